package mongo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// clock is a settable clock for expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, clk storage.Clock) storage.Driver {
	t.Helper()
	f := testutil.StartFerretDB(t)
	u, _ := url.Parse(f.URI("sluice_test"))
	d, err := mongo.Open(context.Background(), u, storage.Options{Clock: clk})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func post(t *testing.T, d storage.Driver, q storage.QueueRef, n int, ttl time.Duration) []string {
	t.Helper()
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: ttl, Body: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	ids, err := d.Messages().Post(context.Background(), q, "client-a", msgs)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	return ids
}

// TestConcurrentClaimersNeverShareAMessage races claimers over one queue on
// FerretDB, whose updates are not atomic, and checks that every message was
// handed to exactly one claim.
func TestConcurrentClaimersNeverShareAMessage(t *testing.T) {
	d := open(t, nil)
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "race"}
	const total = 120
	post(t, d, q, total, time.Hour)
	var mu sync.Mutex
	owner := map[string]string{}
	var dup []string
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 5})
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				if len(c.Messages) == 0 {
					return
				}
				mu.Lock()
				for _, m := range c.Messages {
					if prev, ok := owner[m.ID]; ok {
						dup = append(dup, fmt.Sprintf("%s in %s and %s", m.ID, prev, c.ID))
					}
					owner[m.ID] = c.ID
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(dup) > 0 {
		t.Fatalf("messages handed to two live claims: %v", dup)
	}
	if len(owner) != total {
		t.Fatalf("claimed %d distinct messages, want %d", len(owner), total)
	}
	st, err := d.Queues().Stats(ctx, q)
	if err != nil || st.Claimed != total || st.Free != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// TestConcurrentPopAndClaim: a message is either popped or claimed, never both.
func TestConcurrentPopAndClaim(t *testing.T) {
	d := open(t, nil)
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "popclaim"}
	const total = 80
	post(t, d, q, total, time.Hour)
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	record := func(ms []storage.Message) {
		mu.Lock()
		for _, m := range ms {
			seen[m.ID]++
		}
		mu.Unlock()
	}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 40; i++ {
				if w%2 == 0 {
					ms, err := d.Messages().Pop(ctx, q, 3)
					if err != nil {
						t.Errorf("pop: %v", err)
						return
					}
					record(ms)
				} else {
					c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 3})
					if err != nil {
						t.Errorf("claim: %v", err)
						return
					}
					record(c.Messages)
				}
			}
		}(w)
	}
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s handed out %d times", id, n)
		}
	}
	if len(seen) != total {
		t.Errorf("handed out %d distinct messages, want %d", len(seen), total)
	}
}

// TestExpiryFollowsInjectedClock: messages and claims lapse on the driver's
// clock although FerretDB has no TTL index.
func TestExpiryFollowsInjectedClock(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := open(t, clk)
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "ttl"}
	post(t, d, q, 2, time.Minute)
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: 30 * time.Second, Grace: 90 * time.Second, Limit: 1})
	if err != nil || len(c.Messages) != 1 || c.Messages[0].TTL != 2*time.Minute {
		t.Fatalf("claim (ttl raised to claim ttl + grace): %+v %v", c, err)
	}
	clk.Add(31 * time.Second)
	if _, err := d.Claims().Get(ctx, q, c.ID); !storage.Is(err, storage.NotFound) {
		t.Fatalf("expired claim: got %v, want NotFound", err)
	}
	if st, _ := d.Queues().Stats(ctx, q); st.Free != 2 || st.Claimed != 0 {
		t.Fatalf("after claim expiry: %+v", st)
	}
	clk.Add(30 * time.Second) // 61 s: the unclaimed message is gone, the claimed one lives to 120 s
	if st, _ := d.Queues().Stats(ctx, q); st.Total != 1 {
		t.Fatalf("after message expiry: %+v", st)
	}
	clk.Add(time.Minute)
	ms, _, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true, IncludeClaimed: true})
	if err != nil || len(ms) != 0 {
		t.Fatalf("list after expiry: %v %v", ms, err)
	}
	if err := d.Queues().Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
}

// TestDeadLetterMovesMessage: a message claimed _max_claim_count times moves
// to the dead-letter queue instead of being claimed again.
func TestDeadLetterMovesMessage(t *testing.T) {
	clk := &clock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	d := open(t, clk)
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "work"}
	post(t, d, q, 1, time.Hour)
	dl := &storage.DeadLetter{MaxClaimCount: 2, Queue: "dead", TTL: 10 * time.Minute}
	for i := 0; i < 2; i++ {
		c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1, DeadLetter: dl})
		if err != nil || len(c.Messages) != 1 {
			t.Fatalf("claim %d: %+v %v", i, c, err)
		}
		clk.Add(2 * time.Minute)
	}
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1, DeadLetter: dl})
	if err != nil || len(c.Messages) != 0 {
		t.Fatalf("third claim: %+v %v", c, err)
	}
	ms, _, err := d.Messages().List(ctx, storage.QueueRef{Project: "p", Name: "dead"}, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil || len(ms) != 1 || ms[0].TTL != 10*time.Minute {
		t.Fatalf("dead-letter queue: %+v %v", ms, err)
	}
}

// TestClaimRespectsDeleteRules covers claim ids on delete.
func TestClaimRespectsDeleteRules(t *testing.T) {
	d := open(t, nil)
	ctx := context.Background()
	q := storage.QueueRef{Project: "p", Name: "del"}
	ids := post(t, d, q, 3, time.Hour)
	c, err := d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 1})
	if err != nil || len(c.Messages) != 1 || c.Messages[0].ID != ids[0] {
		t.Fatalf("claim oldest: %+v %v", c, err)
	}
	if err := d.Messages().Delete(ctx, q, ids[0], ""); !storage.Is(err, storage.Forbidden) {
		t.Fatalf("delete claimed without claim id: %v", err)
	}
	if err := d.Messages().Delete(ctx, q, ids[0], "other"); !storage.Is(err, storage.Invalid) {
		t.Fatalf("delete claimed with wrong claim id: %v", err)
	}
	if err := d.Messages().Delete(ctx, q, ids[0], c.ID); err != nil {
		t.Fatalf("delete with claim id: %v", err)
	}
	if err := d.Claims().Delete(ctx, q, c.ID); err != nil {
		t.Fatal(err)
	}
	ms, next, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 1, Echo: true})
	if err != nil || len(ms) != 1 || ms[0].ID != ids[1] || next == "" {
		t.Fatalf("page 1: %v %q %v", ms, next, err)
	}
	ms, _, err = d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 5, Echo: true, Marker: next})
	if err != nil || len(ms) != 1 || ms[0].ID != ids[2] {
		t.Fatalf("page 2: %v %v", ms, err)
	}
	if err := d.Queues().Delete(ctx, q); err != nil {
		t.Fatal(err)
	}
	left, err := d.(storage.Inspector).Leftovers(ctx, "p")
	if err != nil || len(left) != 0 {
		t.Fatalf("left behind after queue delete: %v %v", left, err)
	}
}
