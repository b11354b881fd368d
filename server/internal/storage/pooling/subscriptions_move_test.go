package pooling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/pooling"
)

// Subscriptions and their pending notifications across a move (the move
// itself, and its helpers, are in migrate_test.go).
// A queue's subscriptions keep their ids when it moves: a client holding
// one (to confirm, update or delete it, or paging through them) still
// reaches it afterwards, with its ttl and expiry (so its age goes on).
func TestSubscriptionsKeepTheirIDsAcrossAMove(t *testing.T) {
	everyBackendPair(t, 10, func(t *testing.T, d *pooling.Driver, mover *pooling.Mover) {
		ctx := context.Background()
		q := storage.QueueRef{Project: "move", Name: "subscribed"}
		if _, err := d.Messages().Post(ctx, q, "p", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); err != nil {
			t.Fatal(err)
		}
		want := map[string]storage.Subscription{}
		var ids []string
		for i := range 7 {
			sub := storage.Subscription{Subscriber: fmt.Sprintf("http://127.0.0.1:9/hook/%d", i), TTL: time.Hour,
				Options: storage.Metadata{"n": float64(i)}, NeedsConfirmation: i%2 == 0}
			id, created, err := d.Subscriptions().Create(ctx, q, sub)
			if err != nil || !created {
				t.Fatalf("create %d: created %v, %v", i, created, err)
			}
			if i%3 == 0 {
				if err := d.Subscriptions().Confirm(ctx, q, id, true); err != nil {
					t.Fatal(err)
				}
			}
			got, err := d.Subscriptions().Get(ctx, q, id)
			if err != nil {
				t.Fatal(err)
			}
			want[id] = got
			ids = append(ids, id)
		}
		first, marker, err := d.Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Limit: 3})
		if err != nil || len(first) != 3 || marker == "" {
			t.Fatalf("first page: %d subscriptions, marker %q, %v", len(first), marker, err)
		}
		moveAndWait(t, d, mover, q)
		for _, id := range ids {
			got, err := d.Subscriptions().Get(ctx, q, id)
			if err != nil {
				t.Fatalf("subscription %s after the move: %v", id, err)
			}
			w := want[id]
			if got.Subscriber != w.Subscriber || got.Confirmed != w.Confirmed || got.TTL != w.TTL ||
				!got.Expires.Equal(w.Expires) || got.NeedsConfirmation != w.NeedsConfirmation || got.Options["n"] != w.Options["n"] {
				t.Fatalf("subscription %s after the move = %+v, want %+v", id, got, w)
			}
		}
		listed := []string{}
		for _, s := range first {
			listed = append(listed, s.ID)
		}
		for page := 0; marker != "" && page < 10; page++ {
			var subs []storage.Subscription
			subs, marker, err = d.Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Marker: marker, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range subs {
				listed = append(listed, s.ID)
			}
		}
		if fmt.Sprint(listed) != fmt.Sprint(ids) {
			t.Fatalf("listing across the move: %v, want %v", listed, ids)
		}
		if err := d.Subscriptions().Delete(ctx, q, ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Subscriptions().Get(ctx, q, ids[0]); !storage.Is(err, storage.NotFound) {
			t.Fatalf("deleted by the id it had before the move: %v", err)
		}
	})
}

// subscribeTwo places q with one message, which no notification is
// recorded for, and subscribes two webhooks to it.
func subscribeTwo(t *testing.T, d *pooling.Driver, q storage.QueueRef) {
	t.Helper()
	postNumbered(t, d, q, 1)
	for _, hook := range []string{"a", "b"} {
		if _, _, err := d.Subscriptions().Create(context.Background(), q, storage.Subscription{
			Subscriber: "http://127.0.0.1:9/" + hook, TTL: time.Hour, Options: storage.Metadata{}}); err != nil {
			t.Fatal(err)
		}
	}
}

// Notifications still pending when their queue moves are sent from the
// target, once each, with the attempts they had; one in flight on the
// source when the queue moved is acknowledged there and not sent again;
// the counts of those sent and the last error go with the queue.
func TestDeliveriesPendingAtAMoveAreSentOnce(t *testing.T) {
	everyBackendPair(t, 10, func(t *testing.T, d *pooling.Driver, mover *pooling.Mover) {
		ctx := context.Background()
		q := storage.QueueRef{Project: "move", Name: "notified"}
		subscribeTwo(t, d, q)
		postNumbered(t, d, q, 5)
		const hold = time.Second
		before, _, err := d.Deliveries().Lease(ctx, 3, hold)
		if err != nil || len(before) != 3 {
			t.Fatalf("lease before the move: %d, %v", len(before), err)
		}
		inFlight, retried, sent := before[0], before[1], before[2]
		if err := d.Deliveries().Retry(ctx, retried, time.Now(), "refused"); err != nil {
			t.Fatal(err)
		}
		if err := d.Deliveries().Ack(ctx, sent); err != nil {
			t.Fatal(err)
		}
		moveAndWait(t, d, mover, q)

		got := map[string]storage.Delivery{}
		for round := 0; len(got) < 8 && round < 50; round++ {
			ds, _, err := d.Deliveries().Lease(ctx, 100, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, dl := range ds {
				if _, twice := got[dl.ID()]; twice {
					t.Fatalf("delivery %s handed out twice", dl.ID())
				}
				got[dl.ID()] = dl
			}
			time.Sleep(20 * time.Millisecond)
		}
		if len(got) != 8 {
			t.Fatalf("leased %d deliveries after the move, want the 8 not sent or in flight", len(got))
		}
		if _, ok := got[inFlight.ID()]; ok {
			t.Fatalf("delivery %s, in flight when the queue moved, handed out again before its lease ended", inFlight.ID())
		}
		if r := got[retried.ID()]; r.Attempts != 1 || string(r.Body) != string(retried.Body) {
			t.Fatalf("retried delivery after the move: attempts %d, body %s; want 1, %s", r.Attempts, r.Body, retried.Body)
		}
		if err := d.Deliveries().Ack(ctx, inFlight); err != nil {
			t.Fatal(err)
		}
		for _, dl := range got {
			if err := d.Deliveries().Ack(ctx, dl); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(hold + 200*time.Millisecond)
		if again, _, err := d.Deliveries().Lease(ctx, 100, time.Minute); err != nil || len(again) != 0 {
			t.Fatalf("lease after every ack: %d deliveries, %v; want none", len(again), err)
		}
		// The counts kept before the move are carried: one sent, one error.
		if st, err := d.Deliveries().Stats(ctx, q); err != nil || st.Pending != 0 || st.Delivered != 10 || st.LastError != "refused" {
			t.Fatalf("stats after every ack: %+v, %v; want 10 sent, last error refused", st, err)
		}
	})
}

// While its queue moves, a delivery the mover copied to the target is on
// both pools: a lease hands it out once, and settling it there settles both
// copies, so it is not sent again by either pool. The move's steps are
// driven by hand, stopped between the copy and Finish.
func TestDeliveriesCopiedDuringAMoveAreSettledOnBothPools(t *testing.T) {
	for _, pair := range [][2]string{{"redis", "redis"}, {"mongodb", "redis"}, {"redis", "mongodb"}, {"mongodb", "mongodb"}} {
		t.Run(pair[0]+"-"+pair[1], func(t *testing.T) {
			ctx := context.Background()
			catalogURI, uris := movePools(t, pair[0], pair[1])
			d := openPooled(t, catalogURI, storage.Options{})
			raw := map[string]storage.Driver{}
			for _, pool := range []string{"src", "dst"} {
				drv, err := storage.Open(ctx, uris[pool], storage.Options{})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { drv.Close() })
				raw[pool] = drv
			}
			from, to := raw["src"].(storage.Migrator).Migrations(), raw["dst"].(storage.Migrator).Migrations()
			q := storage.QueueRef{Project: "move", Name: "settled"}
			subscribeTwo(t, d, q)
			postNumbered(t, d, q, 3)

			if _, _, err := d.Catalog().StartMigration(ctx, q, "dst", "by-hand", time.Hour); err != nil {
				t.Fatal(err)
			}
			sealed, err := from.Seal(ctx, q, "dst")
			if err != nil {
				t.Fatal(err)
			}
			subs, _, err := raw["src"].Subscriptions().List(ctx, q, storage.ListSubscriptionsOptions{Limit: 10})
			if err != nil || len(subs) != 2 {
				t.Fatalf("subscriptions on the source: %d, %v", len(subs), err)
			}
			for _, sub := range subs {
				if _, _, err := raw["dst"].Subscriptions().Create(ctx, q, sub); err != nil {
					t.Fatal(err)
				}
			}
			if err := to.Prepare(ctx, q, sealed.Metadata, sealed.Seq); err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 10; i++ {
				b, err := from.Take(ctx, q, 10)
				if err != nil {
					t.Fatal(err)
				}
				if b.Empty() {
					break
				}
				if err := to.Import(ctx, q, b); err != nil {
					t.Fatal(err)
				}
				if err := from.Settle(ctx, q, b); err != nil {
					t.Fatal(err)
				}
			}
			copied := 0
			if err := from.Deliveries(ctx, q, 2, func(ds []storage.MovedDelivery) error {
				copied += len(ds)
				return to.ImportDeliveries(ctx, q, ds)
			}); err != nil {
				t.Fatal(err)
			}
			if copied != 6 {
				t.Fatalf("copied %d deliveries, want 6", copied)
			}
			if _, _, err := d.Catalog().ReloadMigration(ctx, q); err != nil {
				t.Fatal(err)
			}

			leased, _, err := d.Deliveries().Lease(ctx, 100, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ids := map[string]bool{}
			for _, dl := range leased {
				if ids[dl.ID()] {
					t.Fatalf("one lease handed delivery %s out twice", dl.ID())
				}
				ids[dl.ID()] = true
			}
			if len(ids) != 6 {
				t.Fatalf("leased %d deliveries, want 6", len(ids))
			}
			for i, dl := range leased {
				var err error
				if i%2 == 0 {
					err = d.Deliveries().Ack(ctx, dl)
				} else {
					err = d.Deliveries().Fail(ctx, dl, "gave up")
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			for pool, drv := range raw {
				if n, err := drv.Deliveries().Pending(ctx); err != nil || n != 0 {
					t.Errorf("%s holds %d deliveries after each was settled once, %v; want none", pool, n, err)
				}
			}
		})
	}
}
