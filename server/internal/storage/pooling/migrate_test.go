package pooling_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/pooling"
	"sluice.dev/server/internal/storage/storagetest"
	"sluice.dev/server/internal/testutil"
)

// movePools registers a source pool (weight 100, where the queue lands) and
// a target pool (weight 0) of the given kinds: "redis" or "mongodb"
// (FerretDB).
func movePools(t testing.TB, from, to string) (catalogURI string, uris map[string]string) {
	t.Helper()
	catalogURI = testutil.StartRedis(t, testutil.RedisOptions{}).URL
	var ferret *testutil.FerretDB
	uris = map[string]string{}
	for name, kind := range map[string]string{"src": from, "dst": to} {
		switch kind {
		case "redis":
			uris[name] = testutil.StartRedis(t, testutil.RedisOptions{}).URL
		case "mongodb":
			if ferret == nil {
				ferret = testutil.StartFerretDB(t)
			}
			uris[name] = ferret.URI("pool_" + name)
		}
	}
	cat := openCatalog(t, catalogURI)
	for name, weight := range map[string]int{"src": 100, "dst": 0} {
		if _, err := cat.PutPool(context.Background(), catalog.Pool{Name: name, URI: uris[name], Weight: weight}, false); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
	}
	return catalogURI, uris
}

// redisMovePools is movePools for two redis-servers the test can stop,
// kill or pause: the source ("src", weight 100) and the target ("dst",
// weight 0).
func redisMovePools(t *testing.T) (catalogURI string, src, dst *testutil.Redis) {
	t.Helper()
	catalogURI = testutil.StartRedis(t, testutil.RedisOptions{}).URL
	src = testutil.StartRedis(t, testutil.RedisOptions{})
	dst = testutil.StartRedis(t, testutil.RedisOptions{})
	cat := openCatalog(t, catalogURI)
	for name, p := range map[string]*testutil.Redis{"src": src, "dst": dst} {
		weight := map[string]int{"src": 100, "dst": 0}[name]
		if _, err := cat.PutPool(context.Background(), catalog.Pool{Name: name, URI: p.URL, Weight: weight}, false); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
	}
	return catalogURI, src, dst
}

// body is what every test message carries: its producer and its number in
// that producer's sequence.
type body struct {
	P int `json:"p"`
	N int `json:"n"`
}

// ledger records what clients were told: acknowledged posts and claimed
// deliveries.
type ledger struct {
	mu      sync.Mutex
	acked   map[string]body
	claimed map[string]int
	errs    []error
	retries int // calls answered 503 Moving and retried
}

func (l *ledger) retry() {
	l.mu.Lock()
	l.retries++
	l.mu.Unlock()
}

func (l *ledger) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

// moveUnderLoad moves a queue from src to dst while three producers post
// and two consumers claim and delete, through two replicas. With kill
// "sealing" or "moving", the replica that started the move loses its mover
// before the seal or after two batches, and the other one resumes the move
// once the lease lapses.
func moveUnderLoad(t *testing.T, from, to, kill string) {
	// FerretDB moves a message per round trip: a lighter load keeps the
	// test short there.
	preload, pause := 40, 5*time.Millisecond
	if from == "mongodb" || to == "mongodb" {
		preload, pause = 8, 50*time.Millisecond
	}
	ctx := context.Background()
	catalogURI, uris := movePools(t, from, to)
	replicas := []*pooling.Driver{openPooled(t, catalogURI, storage.Options{}), openPooled(t, catalogURI, storage.Options{})}
	batch, rate := 40, -1
	if kill == "moving" {
		// Slow enough to stop it mid-move: a batch per 100 ms, so even the
		// smallest backlog (FerretDB's) takes several batches after the
		// second one, when the kill comes.
		batch, rate = 10, 100
		if preload == 40 {
			// The consumers claim from the sealed source too, faster
			// than the mover takes from it (about 1,500 messages/s on
			// Redis): three times the backlog keeps it from running dry
			// before the second batch.
			preload = 120
		}
	}
	movers := []*pooling.Mover{
		replicas[0].StartMover(pooling.MoverOptions{Batch: batch, Rate: rate, Lease: time.Second, Scan: 200 * time.Millisecond, Owner: "A"}),
		replicas[1].StartMover(pooling.MoverOptions{Batch: batch, Rate: rate, Lease: time.Second, Scan: 200 * time.Millisecond, Owner: "B"}),
	}
	q := storage.QueueRef{Project: "move", Name: "work"}
	l := &ledger{acked: map[string]body{}, claimed: map[string]int{}}
	seq := make([]int, 3)
	post := func(p, n int) {
		msgs := make([]storage.NewMessage, n)
		bodies := make([]body, n)
		for i := range msgs {
			bodies[i] = body{P: p, N: seq[p]}
			seq[p]++
			b, _ := json.Marshal(bodies[i])
			msgs[i] = storage.NewMessage{TTL: time.Hour, Body: b}
		}
		ids, err := replicas[p%2].Messages().Post(ctx, q, fmt.Sprintf("producer-%d", p), msgs)
		for try := 0; errors.Is(err, storage.ErrMoving) && try < 20; try++ {
			// 503 "try again shortly": nothing was stored; a client
			// retries.
			l.retry()
			ids, err = replicas[p%2].Messages().Post(ctx, q, fmt.Sprintf("producer-%d", p), msgs)
		}
		if err != nil {
			l.fail(fmt.Errorf("producer %d: %w", p, err))
			return
		}
		l.mu.Lock()
		for i, id := range ids {
			l.acked[id] = bodies[i]
		}
		l.mu.Unlock()
	}
	// Before the move: 15 x preload messages, 30 of them held by a claim that lives
	// through the move (claimed state must move with them).
	for i := 0; i < preload; i++ {
		post(i%3, 15)
	}
	held, err := replicas[0].Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Hour, Limit: 30})
	if err != nil || len(held.Messages) != 30 {
		t.Fatalf("held claim: %d messages, %v", len(held.Messages), err)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := 0; p < 3; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 400; i++ { // bounded: 400 batches of 3 at most
				select {
				case <-stop:
					return
				case <-time.After(pause):
				}
				post(p, 3)
			}
		}()
	}
	consumed := make(chan struct{})
	var cwg sync.WaitGroup
	for c := 0; c < 2; c++ {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			last := map[int]int{0: -1, 1: -1, 2: -1}
			for i := 0; i < 20000; i++ { // bounded
				// Consumers slower than producers: the source keeps a
				// backlog for the mover.
				time.Sleep(pause)
				cl, err := replicas[c].Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 5})
				if errors.Is(err, storage.ErrMoving) {
					l.retry() // 503 "try again shortly"
					continue
				}
				if err != nil {
					l.fail(fmt.Errorf("consumer %d claim: %w", c, err))
					return
				}
				if len(cl.Messages) == 0 {
					select {
					case <-consumed:
						return
					case <-time.After(5 * time.Millisecond):
						continue
					}
				}
				for _, m := range cl.Messages {
					var b body
					_ = json.Unmarshal(m.Body, &b)
					// FIFO per producer, as one consumer sees it.
					if b.N <= last[b.P] {
						l.fail(fmt.Errorf("consumer %d got producer %d's #%d after #%d", c, b.P, b.N, last[b.P]))
					}
					last[b.P] = b.N
					l.mu.Lock()
					l.claimed[m.ID]++
					l.mu.Unlock()
					err := replicas[(c+1)%2].Messages().Delete(ctx, q, m.ID, cl.ID)
					for try := 0; errors.Is(err, storage.ErrMoving) && try < 20; try++ {
						l.retry() // 503 "try again shortly"
						err = replicas[(c+1)%2].Messages().Delete(ctx, q, m.ID, cl.ID)
					}
					if err != nil {
						l.fail(fmt.Errorf("consumer %d delete %s: %w", c, m.ID, err))
					}
				}
			}
		}()
	}

	time.Sleep(100 * time.Millisecond)
	rec, err := movers[0].Migrate(ctx, q, "dst")
	if err != nil || rec.From != "src" || rec.To != "dst" {
		t.Fatalf("migrate: %+v %v", rec, err)
	}
	st := replicas[0].Catalog().Store()
	switch kill {
	case "sealing": // before the seal: the move waits two catalog polls
		movers[0].Stop()
		if m, _ := st.GetMigration(ctx, q); m.State != catalog.StateSealing || m.Owner != "A" {
			t.Fatalf("after the kill: %+v, want sealing, held by A", m)
		}
	case "moving":
		waitUntil(t, 30*time.Second, func() bool { m, _ := st.GetMigration(ctx, q); return m.Batches >= 2 })
		movers[0].Stop()
		if m, _ := st.GetMigration(ctx, q); m.State != catalog.StateMoving || m.Owner != "A" {
			t.Fatalf("after the kill: %+v, want moving, held by A", m)
		}
	}
	waitUntil(t, 60*time.Second, func() bool {
		m, _ := st.GetMigration(ctx, q)
		return m.State == catalog.StateDone
	})
	time.Sleep(200 * time.Millisecond) // posts after the switch too
	close(stop)
	wg.Wait()

	// Drain: the held claim's messages are deleted with it, the rest are
	// claimed by the consumers.
	for _, m := range held.Messages {
		l.mu.Lock()
		l.claimed[m.ID]++
		l.mu.Unlock()
		if err := replicas[1].Messages().Delete(ctx, q, m.ID, held.ID); err != nil {
			t.Errorf("delete a message of the claim held through the move: %v", err)
		}
	}
	var left storage.QueueStats
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if left, err = replicas[0].Queues().Stats(ctx, q); err == nil && left.Total == 0 {
			break
		}
	}
	if err != nil || left.Total != 0 {
		t.Errorf("30 s after the move the queue still holds %+v (%v)", left, err)
	}
	close(consumed)
	cwg.Wait()

	for _, err := range l.errs {
		t.Error(err)
	}
	lost, dup := 0, 0
	for id := range l.acked {
		switch l.claimed[id] {
		case 0:
			lost++
		case 1:
		default:
			dup++
		}
	}
	for id := range l.claimed {
		if _, ok := l.acked[id]; !ok {
			t.Errorf("claimed %s, which no producer was told was posted", id)
		}
	}
	m, _ := st.GetMigration(ctx, q)
	t.Logf("%s -> %s kill=%s: %d posted, lost %d, duplicated %d, %d calls retried after 503; move: %d messages in %d batches, %s",
		from, to, kill, len(l.acked), lost, dup, l.retries, m.Moved, m.Batches, m.Finished.Sub(m.Started))
	if lost != 0 || dup != 0 {
		t.Errorf("lost %d, duplicated %d of %d acknowledged messages", lost, dup, len(l.acked))
	}
	if m.Moved == 0 || m.From != "src" || m.To != "dst" {
		t.Errorf("move record %+v", m)
	}
	if m.Owner != "" {
		t.Errorf("owner after done: %q", m.Owner)
	}
	for i, d := range replicas {
		waitUntil(t, 5*time.Second, func() bool { p, _ := d.Catalog().Locate(ctx, q); return p == "dst" })
		if _, moving := d.Catalog().Migration(q); moving {
			t.Errorf("replica %d still routes the queue as moving", i)
		}
	}
	// The source answers Moved for the queue (its tombstone), so a replica
	// with a stale placement is sent on.
	src, err := storage.Open(ctx, uris["src"], storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	if _, err := src.Messages().Post(ctx, q, "late", []storage.NewMessage{{TTL: time.Minute, Body: json.RawMessage(`1`)}}); !movedTo(err, "dst") {
		t.Errorf("post on the source after the move: %v, want Moved(dst)", err)
	}
}

func movedTo(err error, pool string) bool {
	got, ok := storage.MovedTo(err)
	return ok && got == pool
}

// waitUntil polls cond every 20 ms for at most d.
func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("condition not met within %v", d)
}

// TestMoveUnderLoad: Redis to Redis, Redis to MongoDB and MongoDB to Redis
// (FerretDB), with posters and consumers on two replicas; each also with
// the first replica's mover killed while sealing and while moving. Calls answered 503 Moving are
// retried, as clients do; every other error fails the test.
func TestMoveUnderLoad(t *testing.T) {
	for _, pair := range [][2]string{{"redis", "redis"}, {"redis", "mongodb"}, {"mongodb", "redis"}} {
		for _, kill := range []string{"none", "sealing", "moving"} {
			t.Run(fmt.Sprintf("%s-%s/kill=%s", pair[0], pair[1], kill), func(t *testing.T) {
				moveUnderLoad(t, pair[0], pair[1], kill)
			})
		}
	}
}

// TestMoveRollsBack: the target dies before it is prepared. The move ends
// failed with the error, the source is unsealed, posts and claims go on
// there, and nothing is lost.
func TestMoveRollsBack(t *testing.T) {
	ctx := context.Background()
	catalogURI, _, dst := redisMovePools(t)
	d := openPooled(t, catalogURI, storage.Options{})
	mover := d.StartMover(pooling.MoverOptions{Lease: time.Second, Scan: 200 * time.Millisecond})
	q := storage.QueueRef{Project: "move", Name: "back"}
	post := func(n int) []string {
		return postNumbered(t, d, q, n)
	}
	ids := post(20)
	if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
		t.Fatal(err)
	}
	dst.Kill() // during the wait before the seal
	var m catalog.Migration
	waitUntil(t, 30*time.Second, func() bool {
		m, _ = d.Catalog().Store().GetMigration(ctx, q)
		return m.State == catalog.StateFailed
	})
	if m.Error == "" || m.Finished.IsZero() || m.Moved != 0 {
		t.Errorf("failed move: %+v", m)
	}
	if p, _ := d.Catalog().Locate(ctx, q); p != "src" {
		t.Errorf("after the roll-back the queue is on %q", p)
	}
	ids = append(ids, post(5)...)
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 100})
	if err != nil || len(c.Messages) != len(ids) {
		t.Fatalf("claim after the roll-back: %d of %d messages, %v", len(c.Messages), len(ids), err)
	}
	for i, msg := range c.Messages {
		if msg.ID != ids[i] {
			t.Fatalf("message %d is %s, want %s (FIFO)", i, msg.ID, ids[i])
		}
	}
}

// TestMoveWithinOneStorageIsRefused: two pools whose URIs differ as text
// but reach one database are one storage; a move between them would copy
// the queue's keys onto themselves and then settle (delete) them. The
// catalog refuses a second pool with the same URI, and the move is refused
// whatever the URIs say, before anything is sealed.
func TestMoveWithinOneStorageIsRefused(t *testing.T) {
	ctx := context.Background()
	catalogURI := testutil.StartRedis(t, testutil.RedisOptions{}).URL
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	cat := openCatalog(t, catalogURI)
	if _, err := cat.PutPool(ctx, catalog.Pool{Name: "src", URI: r.URL, Weight: 100}, false); err != nil {
		t.Fatal(err)
	}
	_, err := cat.PutPool(ctx, catalog.Pool{Name: "same", URI: r.URL, Weight: 0}, false)
	if !storage.Is(err, storage.Conflict) || !strings.Contains(err.Error(), "pool src already uses") {
		t.Fatalf("a second pool on the same URI: %v, want Conflict naming pool src", err)
	}
	alias := strings.Replace(r.URL, "127.0.0.1", "localhost", 1)
	if _, err := cat.PutPool(ctx, catalog.Pool{Name: "dst", URI: alias, Weight: 0}, false); err != nil {
		t.Fatal(err)
	}
	d := openPooled(t, catalogURI, storage.Options{})
	mover := d.StartMover(pooling.MoverOptions{Lease: time.Second, Scan: 200 * time.Millisecond})
	q := storage.QueueRef{Project: "move", Name: "onto-itself"}
	ids := postNumbered(t, d, q, 20)
	_, err = mover.Migrate(ctx, q, "dst")
	if !storage.Is(err, storage.Conflict) || !strings.Contains(err.Error(), "one storage") {
		t.Fatalf("move between two names of one storage: %v, want Conflict", err)
	}
	if p, _ := d.Catalog().Locate(ctx, q); p != "src" {
		t.Errorf("after the refusal the queue is on %q", p)
	}
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 100})
	if err != nil || len(c.Messages) != len(ids) {
		t.Fatalf("claim after the refusal: %d of %d messages, %v", len(c.Messages), len(ids), err)
	}
}

// TestDeleteDuringMoveAsksTheTargetOnlyForWhatMoved: a message the source
// removed was at home there, so the delete is done without the target (a
// paused target cannot answer, and the delete still succeeds at once); one
// that has already moved is deleted on the target. Neither comes back once
// the move ends, and the rest arrive in order.
func TestDeleteDuringMoveAsksTheTargetOnlyForWhatMoved(t *testing.T) {
	ctx := context.Background()
	catalogURI, _, dst := redisMovePools(t)
	d := openPooled(t, catalogURI, storage.Options{})
	// One message per batch, five a second: the move lasts about 4 s.
	mover := d.StartMover(pooling.MoverOptions{Batch: 1, Rate: 5, Lease: 5 * time.Second})
	q := storage.QueueRef{Project: "move", Name: "deletes"}
	ids := postNumbered(t, d, q, 20)
	if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
		t.Fatal(err)
	}
	newest := ids[len(ids)-1] // the mover takes from the back
	waitUntil(t, 30*time.Second, func() bool {
		_, gerr := d.Messages().Get(ctx, q, newest)
		m, _ := d.Catalog().Store().GetMigration(ctx, q)
		return gerr == nil && m.State == catalog.StateMoving && m.Moved >= 1
	})

	dst.Pause()
	short, cancel := context.WithTimeout(ctx, time.Second)
	err := d.Messages().Delete(short, q, ids[0], "")
	cancel()
	dst.Resume()
	if err != nil {
		t.Fatalf("delete of a message still on the source, target paused: %v", err)
	}
	if err := d.Messages().Delete(ctx, q, newest, ""); err != nil {
		t.Fatalf("delete of a moved message: %v", err)
	}
	for _, id := range []string{ids[0], newest} {
		if _, err := d.Messages().Get(ctx, q, id); !storage.Is(err, storage.NotFound) {
			t.Errorf("get %s after its delete: %v, want NotFound", id, err)
		}
	}

	waitUntil(t, 60*time.Second, func() bool {
		m, _ := d.Catalog().Store().GetMigration(ctx, q)
		return m.State == catalog.StateDone
	})
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	want := ids[1 : len(ids)-1]
	if len(c.Messages) != len(want) {
		t.Fatalf("after the move the queue holds %d messages, want %d", len(c.Messages), len(want))
	}
	for i, m := range c.Messages {
		if m.ID != want[i] {
			t.Fatalf("message %d is %s, want %s (FIFO, deleted ones gone)", i, m.ID, want[i])
		}
	}
}

// TestListingsDuringMoveMissNothing: a client pages through a queue, in
// pages of random size, while a mover moves it a few messages at a time.
// Nobody claims or deletes, so every complete listing, begun before, during
// or after any step of the move, holds every message once, in order.
func TestListingsDuringMoveMissNothing(t *testing.T) {
	for _, pair := range [][2]string{{"redis", "redis"}, {"mongodb", "redis"}, {"redis", "mongodb"}} {
		t.Run(pair[0]+"-"+pair[1], func(t *testing.T) {
			ctx := context.Background()
			catalogURI, _ := movePools(t, pair[0], pair[1])
			d := openPooled(t, catalogURI, storage.Options{})
			// Uncapped, the mover settles a batch and takes the next in
			// one call (storage.SettleTaker), so a batch is almost always
			// in transit; small batches make many steps to list across.
			mover := d.StartMover(pooling.MoverOptions{Batch: 2, Rate: -1, Lease: 5 * time.Second})
			q := storage.QueueRef{Project: "move", Name: "listed"}
			n := 150
			if pair[0] == "mongodb" {
				n = 60 // FerretDB moves a batch in many round trips: fewer keep the test short
			}
			ids := postNumbered(t, d, q, n)
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(uint64(seed), 0))
			if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
				t.Fatal(err)
			}
			during := 0
			for listing, deadline := 0, time.Now().Add(60*time.Second); ; listing++ {
				m, err := d.Catalog().Store().GetMigration(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				got := listPages(t, d, q, rng)
				if d := diffIDs(got, ids); d != "" {
					t.Fatalf("listing %d (move %s, %d moved): %s", listing, m.State, m.Moved, d)
				}
				if m.State == catalog.StateDone {
					break
				}
				if m.State == catalog.StateMoving {
					during++
				}
				if listing > 5000 || time.Now().After(deadline) {
					t.Fatalf("the move did not end within %d listings", listing)
				}
			}
			if during < 3 {
				t.Fatalf("only %d listings began during the move", during)
			}
			t.Logf("%d listings began during the move", during)
		})
	}
}

// A client that began paging before a move and goes on after it has ended
// gets every message once, in order: its marker was made by the source
// pool's backend, and the queue is now on another.
func TestListingBegunBeforeAMoveMissesNothing(t *testing.T) {
	everyBackendPair(t, 7, func(t *testing.T, d *pooling.Driver, mover *pooling.Mover) {
		ctx := context.Background()
		seed := time.Now().UnixNano()
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		q := storage.QueueRef{Project: "move", Name: "begun"}
		ids := postNumbered(t, d, q, 40)
		// Listings stopped at every few messages, each to go on after the move.
		type begun struct {
			got    []string
			marker string
		}
		var started []begun
		for limit := 1; limit < len(ids); limit += 1 + rng.IntN(9) {
			page, next, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{
				Limit: limit, Echo: true, IncludeClaimed: true, IncludeDelayed: true,
			})
			if err != nil || next == "" {
				t.Fatalf("first page of %d: %d messages, next %q, %v", limit, len(page), next, err)
			}
			b := begun{marker: next}
			for _, m := range page {
				b.got = append(b.got, m.ID)
			}
			started = append(started, b)
		}
		moveAndWait(t, d, mover, q)
		for _, b := range started {
			got := append(b.got, listPagesFrom(t, d, q, b.marker, rng)...)
			if d := diffIDs(got, ids); d != "" {
				t.Fatalf("listing begun with %d messages and marker %q: %s", len(b.got), b.marker, d)
			}
		}
	})
}

// everyBackendPair runs f for every pair of source and target backends, on
// a pooled driver over fresh pools "src" and "dst" and an uncapped mover
// that moves batch messages at a time.
func everyBackendPair(t *testing.T, batch int, f func(t *testing.T, d *pooling.Driver, mover *pooling.Mover)) {
	for _, pair := range [][2]string{{"redis", "redis"}, {"mongodb", "redis"}, {"redis", "mongodb"}, {"mongodb", "mongodb"}} {
		t.Run(pair[0]+"-"+pair[1], func(t *testing.T) {
			catalogURI, _ := movePools(t, pair[0], pair[1])
			d := openPooled(t, catalogURI, storage.Options{})
			f(t, d, d.StartMover(pooling.MoverOptions{Batch: batch, Rate: -1, Lease: 5 * time.Second}))
		})
	}
}

// postNumbered posts n messages to q in one call, their bodies 0 to n-1,
// and returns their ids.
func postNumbered(t *testing.T, d *pooling.Driver, q storage.QueueRef, n int) []string {
	t.Helper()
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprint(i))}
	}
	ids, err := d.Messages().Post(context.Background(), q, "p", msgs)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	return ids
}

// moveAndWait moves q to the pool "dst" and waits until the move is done.
func moveAndWait(t *testing.T, d *pooling.Driver, mover *pooling.Mover, q storage.QueueRef) {
	t.Helper()
	ctx := context.Background()
	if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m, err := d.Catalog().Store().GetMigration(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if m.State == catalog.StateDone {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the move did not end: %s, %d moved", m.State, m.Moved)
		}
	}
}

// listPages pages through q in pages of 1-20 messages and returns the ids.
func listPages(t *testing.T, d *pooling.Driver, q storage.QueueRef, rng *rand.Rand) []string {
	t.Helper()
	return listPagesFrom(t, d, q, "", rng)
}

// listPagesFrom is listPages from marker on.
func listPagesFrom(t *testing.T, d *pooling.Driver, q storage.QueueRef, marker string, rng *rand.Rand) []string {
	t.Helper()
	var out []string
	for page := 0; page < 1000; page++ {
		msgs, next, err := d.Messages().List(context.Background(), q, storage.ListMessagesOptions{
			Marker: marker, Limit: 1 + rng.IntN(20), Echo: true, IncludeClaimed: true, IncludeDelayed: true,
		})
		if err != nil {
			t.Fatalf("list page %d: %v", page, err)
		}
		for _, m := range msgs {
			out = append(out, m.ID)
		}
		if next == "" {
			return out
		}
		marker = next
	}
	t.Fatal("the listing did not end after 1000 pages")
	return nil
}

// diffIDs describes how a listing differs from want: a missing message, a
// repeated one, or one out of order ("" when none).
func diffIDs(got, want []string) string {
	pos := make(map[string]int, len(want))
	for i, id := range want {
		pos[id] = i
	}
	seen := map[string]bool{}
	for i, id := range got {
		if seen[id] {
			return fmt.Sprintf("message #%d (%s) listed twice, the second time at %d", pos[id], id, i)
		}
		seen[id] = true
		if i > 0 && pos[id] < pos[got[i-1]] {
			return fmt.Sprintf("message #%d listed after #%d", pos[id], pos[got[i-1]])
		}
	}
	for i, id := range want {
		if !seen[id] {
			return fmt.Sprintf("message #%d of %d (%s) missing, %d listed", i, len(want), id, len(got))
		}
	}
	return ""
}

// TestMixDuringMove runs storagetest.RunMix (posts, claims, deletes with
// and without claims, releases, renewals, pops, bulk deletes, reads)
// through two replicas while the queue moves, for each pair of backends,
// and again with the first replica's mover stopped after two batches (the
// other resumes the move once the lease lapses): the history must be one
// a queue that never moved could have produced. Calls answered 503 Moving
// are retried, as clients do.
func TestMixDuringMove(t *testing.T) {
	for _, pair := range [][2]string{{"redis", "redis"}, {"redis", "mongodb"}, {"mongodb", "redis"}} {
		for _, kill := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-%s/kill=%v", pair[0], pair[1], kill), func(t *testing.T) {
				mixDuringMove(t, pair[0], pair[1], kill)
			})
		}
	}
}

func mixDuringMove(t *testing.T, from, to string, kill bool) {
	ctx := context.Background()
	catalogURI, _ := movePools(t, from, to)
	replicas := []*pooling.Driver{openPooled(t, catalogURI, storage.Options{}), openPooled(t, catalogURI, storage.Options{})}
	// Small batches, paced (a batch per 50 ms; per 200 ms when the mover
	// is to be stopped, so the workers leave it a backlog to stop in), so
	// the workers' calls meet every state of the move.
	rate, preload := 200, 300
	if kill {
		rate = 50
	}
	if from == "mongodb" || to == "mongodb" {
		preload = 100 // FerretDB takes a message per round trip
	}
	movers := []*pooling.Mover{
		replicas[0].StartMover(pooling.MoverOptions{Batch: 10, Rate: rate, Lease: time.Second, Scan: 200 * time.Millisecond, Owner: "A"}),
		replicas[1].StartMover(pooling.MoverOptions{Batch: 10, Rate: rate, Lease: time.Second, Scan: 200 * time.Millisecond, Owner: "B"}),
	}
	q := storage.QueueRef{Project: "mix", Name: "moving"}
	st := replicas[0].Catalog().Store()
	killed := false
	storagetest.RunMix(t, storagetest.MixOptions{
		Drivers: []storage.Driver{replicas[0], replicas[1]}, Queue: q,
		Workers: 6, Ops: 40, Preload: preload, Retry: 500,
		During: func() {
			if _, err := movers[0].Migrate(ctx, q, "dst"); err != nil {
				t.Errorf("migrate: %v", err)
				return
			}
			if kill {
				waitUntil(t, 30*time.Second, func() bool {
					m, _ := st.GetMigration(ctx, q)
					return m.Batches >= 2 || m.State == catalog.StateDone
				})
				m, _ := st.GetMigration(ctx, q)
				killed = m.State != catalog.StateDone
				movers[0].Stop()
			}
			waitUntil(t, 60*time.Second, func() bool {
				m, _ := st.GetMigration(ctx, q)
				return m.State == catalog.StateDone
			})
		},
	})
	m, _ := st.GetMigration(ctx, q)
	t.Logf("move: %d messages in %d batches, %s; mover A stopped mid-move: %v", m.Moved, m.Batches, m.Finished.Sub(m.Started), killed)
}
