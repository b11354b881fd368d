package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

// Cases found by the differential test (RunModel), kept as plain cases.
var lifetimeCases = []testCase{
	{"Lifetime/ClaimExtendsReportedTTL", testClaimExtendsTTL},
	{"Lifetime/DeadLetterStartsFresh", testDeadLetterFresh},
}

// testClaimExtendsTTL: a claim that outlives a message extends its life,
// and the message's TTL is reported as that lifetime (expiry - created).
func testClaimExtendsTTL(e *env) {
	q := e.queue("extend")
	ids := e.post(q, "producer", 1, time.Minute)
	e.clock.Advance(30 * time.Second)
	c := e.claim(q, 1, time.Minute, 30*time.Second) // holds it until +120s
	if len(c.Messages) != 1 || c.Messages[0].TTL != 2*time.Minute {
		e.t.Fatalf("claimed %+v, want ttl 2m (created at 0, kept until claim end + grace)", c.Messages)
	}
	m, err := e.d.Messages().Get(e.ctx, q, ids[0])
	if err != nil || m.TTL != 2*time.Minute {
		e.t.Errorf("get after claim = %+v, %v; want ttl 2m", m, err)
	}
}

// testDeadLetterFresh: a dead-lettered message is created anew at the move
// and, without a dead-letter ttl, keeps the lifetime it had.
func testDeadLetterFresh(e *env) {
	q, dlq := e.queue("src"), e.queue("src-dead")
	dl := &storage.DeadLetter{MaxClaimCount: 1, Queue: dlq.Name}
	e.post(q, "producer", 1, time.Minute)
	e.clock.Advance(30 * time.Second)
	e.claimAndLapse(q, dl) // held until +90s+60s grace: lifetime 150s
	if got := e.claimAndLapse(q, dl); len(got) != 0 {
		e.t.Fatalf("claim past the count took %v", got)
	}
	moved, _, err := e.d.Messages().List(e.ctx, dlq, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil || len(moved) != 1 {
		e.t.Fatalf("dead-letter queue holds %v, %v", moved, err)
	}
	// claimAndLapse moved the clock a minute past the move.
	if at := e.clock.Now().Add(-time.Minute); !moved[0].Created.Equal(at) || moved[0].TTL != 150*time.Second {
		e.t.Errorf("moved message created %v ttl %v, want created at the move (%v) with ttl 2m30s", moved[0].Created, moved[0].TTL, at)
	}
}
