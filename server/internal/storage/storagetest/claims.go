package storagetest

import (
	"fmt"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

var claimCases = []testCase{
	{"Claims/CreateLimitAndEmpty", testClaimCreate},
	{"Claims/RaisesMessageTTL", testClaimTTL},
	{"Claims/GetUpdateDelete", testClaimGetUpdateDelete},
	{"Claims/ExpiryFreesMessages", testClaimExpiry},
	{"Claims/ConcurrentClaimers", testConcurrentClaimers},
	{"Claims/EndsRace", testClaimEndsRace},
}

func testClaimCreate(e *env) {
	q := e.queue("claims")
	if c := e.claim(q, 5, time.Minute, time.Minute); c.ID != "" || len(c.Messages) != 0 {
		e.t.Errorf("claim on absent queue = %+v, want empty", c)
	}
	ids := e.post(q, "c", 5, time.Hour)
	c := e.claim(q, 3, 2*time.Minute, time.Minute)
	if c.ID == "" || !equalStrings(messageIDs(c.Messages), ids[:3]) {
		e.t.Fatalf("claim = %q %v, want the 3 oldest %v", c.ID, messageIDs(c.Messages), ids[:3])
	}
	if c.TTL != 2*time.Minute || !c.Created.Equal(e.clock.Now()) {
		e.t.Errorf("claim ttl %v created %v", c.TTL, c.Created)
	}
	for _, m := range c.Messages {
		if m.ClaimID != c.ID || m.ClaimCount != 1 || !m.ClaimExpires.Equal(e.clock.Now().Add(2*time.Minute)) {
			e.t.Errorf("claimed message %s: claim %q count %d expires %v", m.ID, m.ClaimID, m.ClaimCount, m.ClaimExpires)
		}
	}
	c2 := e.claim(q, 10, time.Minute, time.Minute)
	if !equalStrings(messageIDs(c2.Messages), ids[3:]) || c2.ID == c.ID {
		e.t.Errorf("second claim = %q %v, want %v", c2.ID, messageIDs(c2.Messages), ids[3:])
	}
	if c3 := e.claim(q, 10, time.Minute, time.Minute); c3.ID != "" || len(c3.Messages) != 0 {
		e.t.Errorf("claim with nothing free = %+v, want empty", c3)
	}
	_, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 0})
	e.wantKind("claim with limit 0", err, kind(storage.Invalid))
}

func testClaimTTL(e *env) {
	q := e.queue("raised")
	ms := e.d.Messages()
	short := e.post(q, "c", 1, time.Minute)
	long := e.post(q, "c", 1, time.Hour)
	c := e.claim(q, 2, 5*time.Minute, time.Minute)
	if len(c.Messages) != 2 {
		e.t.Fatalf("claimed %d", len(c.Messages))
	}
	// The short message now lives at least until claim end + grace; the
	// long one keeps its own, longer, expiry.
	m, err := ms.Get(e.ctx, q, short[0])
	if err != nil {
		e.t.Fatal(err)
	}
	if end := m.Created.Add(m.TTL); !end.Equal(e.clock.Now().Add(6 * time.Minute)) {
		e.t.Errorf("short message expires at %v, want claim ttl + grace from now", end)
	}
	if m, _ := ms.Get(e.ctx, q, long[0]); m.TTL != time.Hour {
		e.t.Errorf("long message ttl = %v, want unchanged 1h", m.TTL)
	}
	e.clock.Advance(5*time.Minute + 59*time.Second)
	if _, err := ms.Get(e.ctx, q, short[0]); err != nil {
		e.t.Errorf("claimed message expired before claim ttl + grace: %v", err)
	}
	e.clock.Advance(time.Second)
	_, err = ms.Get(e.ctx, q, short[0])
	e.wantKind("get after claim ttl + grace", err, kind(storage.NotFound))
}

func testClaimGetUpdateDelete(e *env) {
	q := e.queue("lifecycle")
	cs := e.d.Claims()
	ids := e.post(q, "c", 3, time.Hour)
	c := e.claim(q, 2, time.Minute, time.Minute)
	got, err := cs.Get(e.ctx, q, c.ID)
	if err != nil || got.ID != c.ID || got.TTL != time.Minute || !equalStrings(messageIDs(got.Messages), ids[:2]) {
		e.t.Fatalf("get = %+v, %v", got, err)
	}
	for _, bad := range []string{"unknown", ""} {
		_, err := cs.Get(e.ctx, q, bad)
		e.wantKind("get claim "+bad, err, kind(storage.NotFound))
		e.wantKind("update claim "+bad, cs.Update(e.ctx, q, bad, time.Minute, time.Minute), kind(storage.NotFound))
	}
	_, err = cs.Get(e.ctx, e.queue("absent"), c.ID)
	e.wantKind("get claim in absent queue", err, kind(storage.NotFound))

	// Renewal counts from now: after 50s a 2-minute renewal outlives the
	// original one-minute claim.
	e.clock.Advance(50 * time.Second)
	if err := cs.Update(e.ctx, q, c.ID, 2*time.Minute, 3*time.Minute); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	got, err = cs.Get(e.ctx, q, c.ID)
	if err != nil || got.TTL != 2*time.Minute || len(got.Messages) != 2 {
		e.t.Fatalf("get after renewal = %+v, %v", got, err)
	}
	if m := got.Messages[0]; !m.ClaimExpires.Equal(e.clock.Now().Add(time.Minute)) {
		e.t.Errorf("message claim expiry %v not renewed", m.ClaimExpires)
	}
	if c2 := e.claim(q, 10, time.Minute, time.Minute); !equalStrings(messageIDs(c2.Messages), ids[2:]) {
		e.t.Errorf("renewed claim's messages were claimable again: %v", messageIDs(c2.Messages))
	}
	// Releasing frees the messages at once, and the claim is gone.
	if err := cs.Delete(e.ctx, q, c.ID); err != nil {
		e.t.Fatal(err)
	}
	_, err = cs.Get(e.ctx, q, c.ID)
	e.wantKind("get released claim", err, kind(storage.NotFound))
	if err := cs.Delete(e.ctx, q, c.ID); err != nil {
		e.t.Errorf("releasing twice: %v", err)
	}
	m, _ := e.d.Messages().Get(e.ctx, q, ids[0])
	if m.ClaimID != "" {
		e.t.Errorf("released message still shows claim %q", m.ClaimID)
	}
	c3 := e.claim(q, 10, time.Minute, time.Minute)
	if !equalStrings(messageIDs(c3.Messages), ids[:2]) {
		e.t.Errorf("claim after release = %v, want %v", messageIDs(c3.Messages), ids[:2])
	}
	for _, m := range c3.Messages {
		if m.ClaimCount != 2 {
			e.t.Errorf("claim count of %s = %d, want 2", m.ID, m.ClaimCount)
		}
	}
}

func testClaimExpiry(e *env) {
	q := e.queue("lapsing")
	ids := e.post(q, "c", 2, time.Hour)
	c := e.claim(q, 10, time.Minute, time.Minute)
	expiredBefore, _ := e.clock.Events.Counts()
	e.clock.Advance(59 * time.Second)
	if c2 := e.claim(q, 10, time.Minute, time.Minute); len(c2.Messages) != 0 {
		e.t.Errorf("claimed messages of a live claim: %v", messageIDs(c2.Messages))
	}
	e.clock.Advance(time.Second)
	_, err := e.d.Claims().Get(e.ctx, q, c.ID)
	e.wantKind("get expired claim", err, kind(storage.NotFound))
	e.wantKind("update expired claim", e.d.Claims().Update(e.ctx, q, c.ID, time.Minute, time.Minute), kind(storage.NotFound))
	if st := e.stats(q); st.Claimed != 0 || st.Free != 2 {
		e.t.Errorf("stats after claim expiry = %+v", st)
	}
	if m, _ := e.d.Messages().Get(e.ctx, q, ids[0]); m.ClaimID != "" {
		e.t.Errorf("message still shows expired claim %q", m.ClaimID)
	}
	e.wantKind("delete with expired claim id", e.d.Messages().Delete(e.ctx, q, ids[0], c.ID), kind(storage.Invalid))
	if c3 := e.claim(q, 10, time.Minute, time.Minute); !equalStrings(messageIDs(c3.Messages), ids) {
		e.t.Errorf("claim after expiry = %v, want %v", messageIDs(c3.Messages), ids)
	}
	if expired, _ := e.clock.Events.Counts(); expired-expiredBefore != 1 {
		e.t.Errorf("ClaimsExpired events = %d, want 1", expired-expiredBefore)
	}
}

func testConcurrentClaimers(e *env) {
	const (
		messages = 300
		workers  = 8
	)
	q := e.queue("contended")
	ids := e.post(q, "c", messages, time.Hour)
	var (
		mu      sync.Mutex
		owner   = map[string]string{}
		errs    []error
		wg      sync.WaitGroup
		claimed int
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; round < messages; round++ { // bounded: each round claims >= 1 or stops
				c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Hour, Grace: time.Minute, Limit: 7})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				for _, m := range c.Messages {
					if prev, dup := owner[m.ID]; dup {
						errs = append(errs, fmt.Errorf("message %s in claims %s and %s", m.ID, prev, c.ID))
					}
					owner[m.ID] = c.ID
					claimed++
				}
				mu.Unlock()
				if err != nil || len(c.Messages) == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		e.t.Error(err)
	}
	if claimed != messages || len(owner) != messages {
		e.t.Errorf("claimed %d messages (%d distinct), want each of %d exactly once", claimed, len(owner), messages)
	}
	for _, id := range ids {
		if owner[id] == "" {
			e.t.Errorf("message %s never claimed", id)
			break
		}
	}
	if st := e.stats(q); st.Claimed != messages || st.Free != 0 {
		e.t.Errorf("stats = %+v", st)
	}
}
