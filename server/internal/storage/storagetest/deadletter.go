package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

var deadLetterCases = []testCase{
	{"DeadLetter/MovedToQueue", testDeadLetterQueue},
	{"DeadLetter/DroppedWithoutQueue", testDeadLetterDrop},
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

func testDeadLetterDrop(e *env) {
	q := e.queue("drop")
	dl := &storage.DeadLetter{MaxClaimCount: 1}
	ids := e.post(q, "producer", 3, time.Hour)
	if got := e.claimAndLapse(q, dl); !equalStrings(got, ids) {
		e.t.Fatalf("first claim = %v", got)
	}
	// Without a dead-letter queue the exhausted messages are dropped; a
	// fresh message posted meanwhile is still claimable in the same call.
	fresh := e.post(q, "producer", 1, time.Hour)
	if got := e.claimAndLapse(q, dl); !equalStrings(got, fresh) {
		e.t.Errorf("second claim = %v, want only the fresh %v", got, fresh)
	}
	if st := e.stats(q); st.Total != 1 {
		e.t.Errorf("stats = %+v, want only the fresh message", st)
	}
	// Claims without a policy never drop anything.
	if got := e.claimAndLapse(q, nil); !equalStrings(got, fresh) {
		e.t.Errorf("claim without policy = %v", got)
	}
}
