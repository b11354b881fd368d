package mongo_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net/url"
	"reflect"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// A move between two databases of one FerretDB: each is a backend of its own
// (its own queues, messages and claims), as two pools are.

type movePair struct {
	clock    *storagetest.Clock
	src, dst storage.Driver
	from, to storage.MigrationStore
}

const targetName = "pool-b"

func openPair(t *testing.T) *movePair {
	t.Helper()
	f := testutil.StartFerretDB(t)
	p := &movePair{clock: storagetest.NewClock()}
	open := func(db string) storage.Driver {
		u, _ := url.Parse(f.URI(db))
		d, err := mongo.Open(context.Background(), u, storagetest.Options(p.clock))
		if err != nil {
			t.Fatalf("open %s: %v", u, err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	p.src, p.dst = open("move_source"), open("move_target")
	p.from = p.src.(storage.Migrator).Migrations()
	p.to = p.dst.(storage.Migrator).Migrations()
	return p
}

type fataler interface {
	Helper()
	Fatalf(format string, args ...any)
}

// all lists every live message of q in order, claimed and delayed included.
func all(t fataler, d storage.Driver, q storage.QueueRef) []storage.Message {
	t.Helper()
	var out []storage.Message
	o := storage.ListMessagesOptions{Limit: 50, Echo: true, IncludeClaimed: true, IncludeDelayed: true}
	for page := 0; page < 100; page++ {
		ms, next, err := d.Messages().List(context.Background(), q, o)
		if err != nil {
			t.Fatalf("list %v: %v", q, err)
		}
		out = append(out, ms...)
		if next == "" {
			return out
		}
		o.Marker = next
	}
	t.Fatalf("list %v: too many pages", q)
	return nil
}

func isMoving(err error) bool {
	return storage.Is(err, storage.Unavailable) && errors.Is(err, storage.ErrMoving)
}

func isMoved(err error) bool {
	to, ok := storage.MovedTo(err)
	return ok && to == targetName && storage.Is(err, storage.Conflict)
}

// checkChecks sets -rapid.checks to n unless the command line set it:
// every case starts work on FerretDB, the slowest backend.
func checkChecks(n int) func() {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	f := flag.Lookup("rapid.checks")
	if set || f == nil {
		return func() {}
	}
	old := f.Value.String()
	_ = f.Value.Set(strconv.Itoa(n))
	return func() { _ = f.Value.Set(old) }
}

// TestMoveKeepsEveryMessage moves generated queues (free, delayed, claimed
// and nearly expired messages, claims of several messages, any batch size)
// and checks at every step what the invariant of docs/pooling.md promises:
// a message in transit answers Moving on the source, a settled one Moved,
// no claim is split between batches, and afterwards the target holds every
// message with its id, body, age, lifetime, delay and claim, in the same
// order, below what is posted there next.
func TestMoveKeepsEveryMessage(t *testing.T) {
	p := openPair(t)
	ctx := context.Background()
	defer checkChecks(12)()
	cases := 0
	rapid.Check(t, func(rt *rapid.T) {
		cases++
		q := storage.QueueRef{Project: "gen" + strconv.Itoa(cases), Name: "q"}
		meta := storage.Metadata{"color": "blue"}
		if err := p.src.Queues().SetMetadata(ctx, q, meta); err != nil {
			rt.Fatalf("metadata: %v", err)
		}
		n := rapid.IntRange(0, 12).Draw(rt, "messages")
		for i := 0; i < n; i++ {
			m := storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(`{"i":` + strconv.Itoa(i) + `}`)}
			switch rapid.SampledFrom([]string{"free", "delayed", "expiring"}).Draw(rt, "kind") {
			case "delayed":
				m.Delay = 10 * time.Minute
			case "expiring":
				m.TTL = 100 * time.Second
			}
			if _, err := p.src.Messages().Post(ctx, q, "poster", []storage.NewMessage{m}); err != nil {
				rt.Fatalf("post: %v", err)
			}
			p.clock.Advance(time.Millisecond)
		}
		for c := rapid.IntRange(0, 3).Draw(rt, "claims"); c > 0; c-- {
			limit := rapid.IntRange(1, 4).Draw(rt, "claim size")
			if _, err := p.src.Claims().Create(ctx, q, storage.ClaimOptions{TTL: 5 * time.Minute, Grace: time.Minute, Limit: limit}); err != nil {
				rt.Fatalf("claim: %v", err)
			}
		}
		// The expiring ones are now 5 s from the end.
		p.clock.Advance(95 * time.Second)
		before := all(rt, p.src, q)
		claimOf := map[string]string{}
		for _, m := range before {
			claimOf[m.ID] = m.ClaimID
		}

		sealed, err := p.from.Seal(ctx, q, targetName)
		if err != nil || !sealed.Exists || !reflect.DeepEqual(sealed.Metadata, meta) {
			rt.Fatalf("seal: %+v, %v", sealed, err)
		}
		if _, err := p.src.Messages().Post(ctx, q, "late", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); !isMoved(err) {
			rt.Fatalf("post on a sealed queue: %v, want Moved(%s)", err, targetName)
		}
		if err := p.to.Prepare(ctx, q, sealed.Metadata, sealed.Seq); err != nil {
			rt.Fatalf("prepare: %v", err)
		}
		size := rapid.IntRange(1, 5).Draw(rt, "batch size")
		moved := map[string]bool{}
		for round := 0; ; round++ {
			if round > n+1 {
				rt.Fatalf("move did not end after %d batches", round)
			}
			b, err := p.from.Take(ctx, q, size)
			if err != nil {
				rt.Fatalf("take: %v", err)
			}
			if b.Empty() {
				break
			}
			inBatch := map[string]bool{}
			for _, m := range b.Messages {
				inBatch[m.ID] = true
				if moved[m.ID] {
					rt.Fatalf("message %s taken twice", m.ID)
				}
				moved[m.ID] = true
			}
			// A claim travels whole.
			for _, c := range b.Claims {
				for id, cid := range claimOf {
					if cid == c.ID && !inBatch[id] {
						rt.Fatalf("claim %s split: %s not in its batch", c.ID, id)
					}
				}
			}
			_, err = p.src.Messages().Get(ctx, q, b.Messages[0].ID)
			if !isMoving(err) {
				rt.Fatalf("get of a message in transit: %v, want Moving", err)
			}
			if _, err := p.src.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 1}); !isMoving(err) {
				rt.Fatalf("claim while a batch is in transit: %v, want Moving", err)
			}
			again, err := p.from.InTransit(ctx, q)
			if err != nil || !reflect.DeepEqual(again, b) {
				rt.Fatalf("in transit: %+v, %v; want %+v", again, err, b)
			}
			if err := p.to.Import(ctx, q, b); err != nil {
				rt.Fatalf("import: %v", err)
			}
			if err := p.from.Settle(ctx, q, b); err != nil {
				rt.Fatalf("settle: %v", err)
			}
			if err := p.src.Messages().Delete(ctx, q, b.Messages[0].ID, ""); !isMoved(err) {
				rt.Fatalf("delete of a settled message: %v, want Moved", err)
			}
		}
		if len(moved) != len(before) {
			rt.Fatalf("moved %d messages, want %d", len(moved), len(before))
		}
		if err := p.from.Finish(ctx, q, time.Hour); err != nil {
			rt.Fatalf("finish: %v", err)
		}
		if _, err := p.src.Queues().Exists(ctx, q); !isMoved(err) {
			rt.Fatalf("exists after finish: %v, want Moved", err)
		}
		if _, _, err := p.src.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 10}); !isMoved(err) {
			rt.Fatalf("list after finish: %v, want Moved", err)
		}
		after := all(rt, p.dst, q)
		if !reflect.DeepEqual(after, before) {
			rt.Fatalf("target holds\n%+v\nwant\n%+v", after, before)
		}
		if got, err := p.dst.Queues().GetMetadata(ctx, q); err != nil || !reflect.DeepEqual(got, meta) {
			rt.Fatalf("target metadata %v, %v", got, err)
		}
		ids, err := p.dst.Messages().Post(ctx, q, "poster", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`"next"`)}})
		if err != nil {
			rt.Fatalf("post on target: %v", err)
		}
		if now := all(rt, p.dst, q); now[len(now)-1].ID != ids[0] {
			rt.Fatalf("a post after the move is not last")
		}
		if err := p.to.Done(ctx, q); err != nil {
			rt.Fatalf("done: %v", err)
		}
		// Lifetimes went on as they were: the expiring ones end now.
		p.clock.Advance(6 * time.Second)
		for _, m := range all(rt, p.dst, q) {
			if m.TTL == 100*time.Second && claimOf[m.ID] == "" {
				rt.Fatalf("message %s outlived its ttl after the move", m.ID)
			}
		}
	})
	t.Logf("%d generated moves", cases)
}
