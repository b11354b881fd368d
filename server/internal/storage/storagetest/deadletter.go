package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

var deadLetterCases = []testCase{
	{"DeadLetter/MovedToQueue", testDeadLetterQueue},
	{"DeadLetter/KeptWithoutQueue", testDeadLetterKeep},
	{"DeadLetter/IntoItself", testDeadLetterSelf},
	{"DeadLetter/ManyExhaustedAhead", testDeadLetterManyAhead},
	{"DeadLetter/ConcurrentClaimers", testDeadLetterConcurrentClaimers},
}

// testDeadLetterManyAhead: however many exhausted messages sit ahead of a
// claimable one, one claim moves them all and still takes it.
func testDeadLetterManyAhead(e *env) {
	q, dlq := e.queue("crowd"), e.queue("crowd-dead")
	dl := &storage.DeadLetter{MaxClaimCount: 1, Queue: dlq.Name}
	old := e.post(q, "producer", 30, time.Hour)
	c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: 0, Limit: 30, DeadLetter: dl})
	if err != nil || len(c.Messages) != len(old) {
		e.t.Fatalf("first claim took %d of %d: %v", len(c.Messages), len(old), err)
	}
	e.clock.Advance(time.Minute)
	fresh := e.post(q, "producer", 1, time.Hour)
	got, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: 0, Limit: 1, DeadLetter: dl})
	if err != nil {
		e.t.Fatal(err)
	}
	if ids := messageIDs(got.Messages); !equalStrings(ids, fresh) {
		e.t.Errorf("claim behind %d exhausted messages took %v, want %v", len(old), ids, fresh)
	}
	if st := e.stats(dlq); st.Total != len(old) {
		e.t.Errorf("dead-letter queue holds %d, want %d", st.Total, len(old))
	}
}

// claimAndLapse claims everything free in q under the policy and lets the
// claim expire; it returns the claimed ids.
func (e *env) claimAndLapse(q storage.QueueRef, dl *storage.DeadLetter) []string {
	e.t.Helper()
	c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10, DeadLetter: dl})
	if err != nil {
		e.t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	return messageIDs(c.Messages)
}

func testDeadLetterQueue(e *env) {
	q, dlq := e.queue("work"), e.queue("work-dead")
	dl := &storage.DeadLetter{MaxClaimCount: 2, Queue: dlq.Name, TTL: 10 * time.Minute}
	ids := e.post(q, "producer", 2, time.Hour)
	_, deadBefore := e.clock.Events.Counts()
	for round := 1; round <= 2; round++ {
		if got := e.claimAndLapse(q, dl); !equalStrings(got, ids) {
			e.t.Fatalf("claim %d = %v, want %v", round, got, ids)
		}
	}
	// Third attempt: both messages were claimed twice, so they move.
	if got := e.claimAndLapse(q, dl); len(got) != 0 {
		e.t.Errorf("third claim = %v, want nothing (messages dead-lettered)", got)
	}
	if st := e.stats(q); st.Total != 0 {
		e.t.Errorf("source queue after dead-lettering = %+v", st)
	}
	moved, _, err := e.d.Messages().List(e.ctx, dlq, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(moved) != 2 {
		e.t.Fatalf("dead-letter queue holds %v, want 2 messages", messageIDs(moved))
	}
	for i, m := range moved {
		if string(m.Body) != string(rune('0'+i)) || m.ClaimCount != 0 || m.ClaimID != "" || m.TTL != 10*time.Minute {
			e.t.Errorf("dead-lettered message %d = %+v (body %s)", i, m, m.Body)
		}
	}
	if ok, _ := e.d.Queues().Exists(e.ctx, dlq); !ok {
		e.t.Errorf("dead-letter queue not created by the move")
	}
	if _, dead := e.clock.Events.Counts(); dead-deadBefore != 2 {
		e.t.Errorf("DeadLettered events = %d, want 2", dead-deadBefore)
	}
	// The dead-letter queue's TTL applies.
	e.clock.Advance(10 * time.Minute)
	if st := e.stats(dlq); st.Total != 0 {
		e.t.Errorf("dead-lettered messages outlived the dead-letter ttl: %+v", st)
	}
}

// testDeadLetterKeep: a policy without a dead-letter queue is no policy
// (Zaqar acts only when both _max_claim_count and _dead_letter_queue are
// set); exhausted messages stay claimable, nothing is ever dropped.
func testDeadLetterKeep(e *env) {
	q := e.queue("keep")
	dl := &storage.DeadLetter{MaxClaimCount: 1}
	ids := e.post(q, "producer", 3, time.Hour)
	_, deadBefore := e.clock.Events.Counts()
	for round := 1; round <= 3; round++ {
		if got := e.claimAndLapse(q, dl); !equalStrings(got, ids) {
			e.t.Fatalf("claim %d = %v, want %v", round, got, ids)
		}
	}
	if st := e.stats(q); st.Total != 3 {
		e.t.Errorf("stats = %+v, want all 3 messages kept", st)
	}
	if _, dead := e.clock.Events.Counts(); dead != deadBefore {
		e.t.Errorf("DeadLettered events = %d, want none", dead-deadBefore)
	}
}

// testDeadLetterSelf: a queue that is its own dead-letter queue. Every
// driver moves an exhausted message as it would to any queue: it starts a
// fresh life (claim count 0, the dead-letter ttl) at the back of the queue
// and is not taken again by the claim that moved it.
func testDeadLetterSelf(e *env) {
	q := e.queue("loop")
	dl := &storage.DeadLetter{MaxClaimCount: 1, Queue: q.Name, TTL: 10 * time.Minute}
	old := e.post(q, "producer", 1, time.Hour)
	if got := e.claimAndLapse(q, dl); !equalStrings(got, old) {
		e.t.Fatalf("first claim = %v, want %v", got, old)
	}
	fresh := e.post(q, "producer", 1, time.Hour)
	// The exhausted message moves behind the fresh one; only the fresh one
	// is claimed by this call.
	if got := e.claimAndLapse(q, dl); !equalStrings(got, fresh) {
		e.t.Fatalf("second claim = %v, want only %v", got, fresh)
	}
	msgs, _, err := e.d.Messages().List(e.ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil {
		e.t.Fatal(err)
	}
	if got := messageIDs(msgs); !equalStrings(got, []string{fresh[0], old[0]}) {
		e.t.Fatalf("queue after moving into itself = %v, want %v then %v", got, fresh, old)
	}
	if m := msgs[1]; m.ClaimCount != 0 || m.TTL != 10*time.Minute || m.ClaimID != "" {
		e.t.Errorf("moved message = %+v, want a fresh life with the dead-letter ttl", m)
	}
}
