package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestGroupCommitKeepsEachCallsResult posts from many goroutines at once
// through a driver with one sender, so nearly every call shares a
// pipeline: each post must get back the ids of its own messages (bodies
// name their request) and every message must be stored once.
func TestGroupCommitKeepsEachCallsResult(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	d.fc = newGroupCommit(d.c, 1, 8)
	ctx := context.Background()
	q := queueRef("p", "group")
	const workers, posts = 32, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*posts)
	for w := 0; w < workers; w++ {
		wg.Go(func() {
			for i := 0; i < posts; i++ {
				n := 1 + (w+i)%3
				msgs := make([]storage.NewMessage, n)
				for j := range msgs {
					msgs[j] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%d-%d-%d"`, w, i, j))}
				}
				ids, err := d.Messages().Post(ctx, q, "c", msgs)
				if err != nil {
					errs <- err
					return
				}
				got, err := d.Messages().GetMany(ctx, q, ids)
				if err != nil || len(got) != n {
					errs <- fmt.Errorf("post %d-%d: %d of %d messages back (%v)", w, i, len(got), n, err)
					return
				}
				for j, m := range got {
					if want := fmt.Sprintf(`"%d-%d-%d"`, w, i, j); string(m.Body) != want {
						errs <- fmt.Errorf("post %d-%d got message %s, want %s: replies crossed", w, i, m.Body, want)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	want := 0
	for w := 0; w < workers; w++ {
		for i := 0; i < posts; i++ {
			want += 1 + (w+i)%3
		}
	}
	if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != want {
		t.Fatalf("stats %+v, %v; want %d messages", st, err, want)
	}
}

// TestGroupCommitIsolatesErrors sends failing and succeeding calls in one
// pipeline (the only sender slot is held until all are queued): each
// failing call gets its error, each other call its result.
func TestGroupCommitIsolatesErrors(t *testing.T) {
	d, g := oneSenderDriver(t)
	ctx := context.Background()
	good, bad := queueRef("p", "good"), queueRef("p", "bad")
	// A queue hash of the wrong type makes the post script fail at its
	// first command, before any write.
	if err := d.c.Set(ctx, scope(bad)+":q", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	g.slots <- struct{}{} // hold the only sender slot
	const calls = 12
	results := make([]error, calls)
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		q := good
		if i%3 == 0 {
			q = bad
		}
		wg.Go(func() { _, results[i] = post(t, d, q, 2, time.Hour) })
	}
	waitFor(t, 10*time.Second, "every call to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == calls
	})
	<-g.slots
	wg.Wait()
	for i, err := range results {
		if i%3 == 0 && !storage.Is(err, storage.Internal) {
			t.Errorf("call %d to the broken queue: %v, want kind internal", i, err)
		}
		if i%3 != 0 && err != nil {
			t.Errorf("call %d to the good queue: %v", i, err)
		}
	}
	if st, err := d.Queues().Stats(ctx, good); err != nil || st.Total != 2*(calls-calls/3) {
		t.Errorf("good queue %+v, %v; want %d messages", st, err, 2*(calls-calls/3))
	}
}

// TestGroupCommitDropsAbandonedCalls: a caller that gives up while its call
// waits for a sender is told it failed, so the call must never run.
func TestGroupCommitDropsAbandonedCalls(t *testing.T) {
	d, g := oneSenderDriver(t)
	q := queueRef("p", "abandoned")
	g.slots <- struct{}{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}})
		done <- err
	}()
	waitFor(t, 10*time.Second, "the call to queue", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.queue) == 1
	})
	cancel()
	if err := <-done; !storage.Is(err, storage.Unavailable) {
		t.Fatalf("abandoned post: %v, want kind unavailable", err)
	}
	<-g.slots
	// The next call sends whatever is queued; the abandoned one must not go.
	if _, err := post(t, d, q, 1, time.Hour); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Queues().Stats(context.Background(), q); err != nil || st.Total != 1 {
		t.Fatalf("stats %+v, %v; want only the second post's message", st, err)
	}
	// A context that has ended before the call never queues it.
	if _, err := d.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`)}}); !storage.Is(err, storage.Unavailable) {
		t.Fatalf("post with an ended context: %v", err)
	}
}

// TestGroupCommitMergesPostsPerQueue queues random posts (random clients,
// message counts, delays) to three queues while the only sender slot is
// held, one at a time so their order is known, then lets them go as one
// pipeline. Each queue's posts must become one script call (two once they
// outgrow mergeMaxArgs), each post must get back exactly its own
// messages, with its client id, and each queue must list the messages in
// the order they were posted.
func TestGroupCommitMergesPostsPerQueue(t *testing.T) {
	d, g := oneSenderDriver(t)
	ctx := context.Background()
	for round, seed := range []int64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewPCG(uint64(seed), 0))
		queues := []storage.QueueRef{}
		for i := range 3 {
			queues = append(queues, queueRef("p", fmt.Sprintf("merge-%d-%d", round, i)))
		}
		if err := d.c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		type request struct {
			q      int
			client string
			msgs   []storage.NewMessage
			ids    []string
			err    error
		}
		// Up to 64 posts of 1-10 messages: one queue's posts can outgrow
		// one merged call, so splitting is exercised in most rounds.
		reqs := make([]*request, 8+rng.IntN(57))
		args := make([]int, len(queues)) // per queue, arguments as merged
		calls := make([]int, len(queues))
		queueInOrder(t, g, len(reqs), func(i int) {
			rq := &request{q: rng.IntN(len(queues)), client: fmt.Sprintf("client-%d", rng.IntN(4))}
			for j := range 1 + rng.IntN(10) {
				m := storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(fmt.Sprintf(`"%d/%d/%d"`, round, i, j))}
				if rng.IntN(4) == 0 {
					m.Delay = time.Duration(1+rng.IntN(5)) * time.Second
				}
				rq.msgs = append(rq.msgs, m)
			}
			reqs[i] = rq
			own := 2 + 4*len(rq.msgs)
			if args[rq.q] == 0 || args[rq.q]+own > mergeMaxArgs {
				calls[rq.q]++
				args[rq.q] = 3
			}
			args[rq.q] += own
		}, func(i int) {
			rq := reqs[i]
			rq.ids, rq.err = d.Messages().Post(ctx, queues[rq.q], rq.client, rq.msgs)
		})
		want := 0
		for _, c := range calls {
			want += c
		}
		if got := functionCalls(t, d); got != want {
			t.Errorf("round %d: %d posts ran as %d script calls, want %d (one per queue and %d arguments)",
				round, len(reqs), got, want, mergeMaxArgs)
		}
		listed := make([][]storage.Message, len(queues))
		for i, q := range queues {
			ms, _, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 1000, Echo: true, IncludeDelayed: true})
			if err != nil {
				t.Fatal(err)
			}
			listed[i] = ms
		}
		next := make([]int, len(queues))
		for i, rq := range reqs {
			if rq.err != nil || len(rq.ids) != len(rq.msgs) {
				t.Fatalf("round %d post %d: %d ids, %v", round, i, len(rq.ids), rq.err)
			}
			for j, m := range rq.msgs {
				if next[rq.q] >= len(listed[rq.q]) {
					t.Fatalf("round %d post %d: message %d missing from the listing", round, i, j)
				}
				got := listed[rq.q][next[rq.q]]
				next[rq.q]++
				if got.ID != rq.ids[j] || string(got.Body) != string(m.Body) || got.ClientID != rq.client {
					t.Fatalf("round %d post %d message %d: listed %s %s from %q, want %s %s from %q",
						round, i, j, got.ID, got.Body, got.ClientID, rq.ids[j], m.Body, rq.client)
				}
				if (m.Delay > 0) != !got.DelayUntil.IsZero() {
					t.Fatalf("round %d post %d message %d: delay %v, listed until %v", round, i, j, m.Delay, got.DelayUntil)
				}
			}
		}
		for i := range queues {
			if next[i] != len(listed[i]) {
				t.Fatalf("round %d queue %d lists %d messages, the posts made %d", round, i, len(listed[i]), next[i])
			}
		}
	}
}

// functionCalls counts the FCALLs Redis has run since CONFIG RESETSTAT.
func functionCalls(t *testing.T, d *Driver) int {
	t.Helper()
	info, err := d.c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_fcall:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// queueInOrder holds the only sender slot of g while it makes n calls,
// each in its own goroutine, one at a time (prepare(i), then call(i) once
// call i-1 is queued), so their order in the pipeline is known; it then
// lets them go and waits for all.
func queueInOrder(t *testing.T, g *groupCommit, n int, prepare, call func(i int)) {
	t.Helper()
	g.slots <- struct{}{}
	var wg sync.WaitGroup
	for i := range n {
		prepare(i)
		wg.Go(func() { call(i) })
		deadline := time.Now().Add(10 * time.Second)
		for {
			g.mu.Lock()
			queued := len(g.queue)
			g.mu.Unlock()
			if queued == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %d never queued", i)
			}
			time.Sleep(time.Millisecond)
		}
	}
	<-g.slots
	wg.Wait()
}

// TestGroupCommitMergesClaimsAndDeletes makes random claims on two
// queues in one pipeline, then random deletes (by the holding claim, by
// another claim, without a claim, twice, of absent ids). Each queue's
// claims and deletes must each run as one script call; each claim must
// get the oldest messages left by the claims before it, and each delete
// exactly the answer it would get alone.
func TestGroupCommitMergesClaimsAndDeletes(t *testing.T) {
	d, g := oneSenderDriver(t)
	ctx := context.Background()
	remover := d.Messages().(storage.Remover)
	for round, seed := range []int64{1, 2, 3, 4, 5} {
		rng := rand.New(rand.NewPCG(uint64(seed), 1))
		queues := []storage.QueueRef{queueRef("p", fmt.Sprintf("c-%d-0", round)), queueRef("p", fmt.Sprintf("c-%d-1", round))}
		stored := make([][]string, len(queues)) // ids, oldest first
		for i, q := range queues {
			for range 2 + rng.IntN(3) {
				ids, err := post(t, d, q, 1+rng.IntN(10), time.Hour)
				if err != nil {
					t.Fatal(err)
				}
				stored[i] = append(stored[i], ids...)
			}
		}

		type claimReq struct {
			q, limit int
			claim    storage.Claim
			err      error
		}
		claims := make([]*claimReq, 4+rng.IntN(20))
		if err := d.c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		queueInOrder(t, g, len(claims), func(i int) {
			claims[i] = &claimReq{q: rng.IntN(len(queues)), limit: 1 + rng.IntN(4)}
		}, func(i int) {
			c := claims[i]
			c.claim, c.err = d.Claims().Create(ctx, queues[c.q], storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: c.limit})
		})
		if got := functionCalls(t, d); got != len(queues) {
			t.Errorf("round %d: %d claims on %d queues ran as %d script calls", round, len(claims), len(queues), got)
		}
		next := make([]int, len(queues))
		holder := map[string]string{} // message id -> claim id
		for i, c := range claims {
			if c.err != nil {
				t.Fatalf("round %d claim %d: %v", round, i, c.err)
			}
			want := min(c.limit, len(stored[c.q])-next[c.q])
			if len(c.claim.Messages) != want {
				t.Fatalf("round %d claim %d: %d messages, want %d", round, i, len(c.claim.Messages), want)
			}
			for _, m := range c.claim.Messages {
				if m.ID != stored[c.q][next[c.q]] || m.ClaimID != c.claim.ID {
					t.Fatalf("round %d claim %d got %s (claim %q), want %s next", round, i, m.ID, m.ClaimID, stored[c.q][next[c.q]])
				}
				holder[m.ID] = c.claim.ID
				next[c.q]++
			}
		}

		// Deletes: the model answers each from the state the ones before it
		// left.
		type deleteReq struct {
			q          int
			id, claim  string
			removed    bool
			err        error
			wantErr    bool
			wantKind   storage.Kind
			wantRemove bool
		}
		gone := map[string]bool{}
		dels := make([]*deleteReq, 8+rng.IntN(40))
		if err := d.c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		queueInOrder(t, g, len(dels), func(i int) {
			qi := rng.IntN(len(queues))
			del := &deleteReq{q: qi, id: storage.NewID()}
			if rng.IntN(6) > 0 {
				del.id = stored[qi][rng.IntN(len(stored[qi]))]
			}
			held := holder[del.id]
			switch rng.IntN(4) {
			case 0, 1:
				del.claim = held
			case 2:
				del.claim = storage.NewID()
			}
			switch {
			case gone[del.id] || !slices.Contains(stored[qi], del.id):
			case held != del.claim && del.claim == "":
				del.wantErr, del.wantKind = true, storage.Forbidden
			case held != del.claim:
				del.wantErr, del.wantKind = true, storage.Invalid
			default:
				del.wantRemove = true
				gone[del.id] = true
			}
			dels[i] = del
		}, func(i int) {
			del := dels[i]
			del.removed, del.err = remover.Remove(ctx, queues[del.q], del.id, del.claim)
		})
		if got := functionCalls(t, d); got != len(queues) {
			t.Errorf("round %d: %d deletes on %d queues ran as %d script calls", round, len(dels), len(queues), got)
		}
		for i, del := range dels {
			if del.wantErr {
				if !storage.Is(del.err, del.wantKind) {
					t.Errorf("round %d delete %d: %v, want kind %s", round, i, del.err, del.wantKind)
				}
				continue
			}
			if del.err != nil || del.removed != del.wantRemove {
				t.Errorf("round %d delete %d: removed %v, %v; want removed %v", round, i, del.removed, del.err, del.wantRemove)
			}
		}
		for i, q := range queues {
			left := 0
			for _, id := range stored[i] {
				if !gone[id] {
					left++
				}
			}
			if st, err := d.Queues().Stats(ctx, q); err != nil || st.Total != left {
				t.Errorf("round %d queue %d: stats %+v, %v; want %d messages", round, i, st, err, left)
			}
		}
	}
}

// oneSenderDriver is a driver on a fresh redis-server whose group commit
// has one sender slot, which tests hold to gather calls into one pipeline.
func oneSenderDriver(t *testing.T) (*Driver, *groupCommit) {
	t.Helper()
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	g := newGroupCommit(d.c, 1, 64)
	d.fc = g
	return d, g
}

// BenchmarkMerge is the merging of one pipeline as saturation shapes it:
// six one-message posts to one queue, two to another.
func BenchmarkMerge(b *testing.B) {
	batch := make([]*pending, 8)
	for i := range batch {
		keys := queueKeys(queueRef("p", "q"+strconv.Itoa(i/6)))
		batch[i] = &pending{fn: "post", keys: keys, shared: 3, args: []any{1, "q", keys[0], "c", 1, "id", 300, 0, []byte("{}")}}
	}
	b.ReportAllocs()
	for b.Loop() {
		if calls := merge(batch); len(calls) != 2 {
			b.Fatal(len(calls))
		}
	}
}
