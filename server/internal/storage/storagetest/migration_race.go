package storagetest

import (
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

// raceRounds is how many queues testWritesRaceTake moves; raceClaims is
// how many claims of raceClaimSize messages each holds.
const raceRounds, raceClaims, raceClaimSize = 4, 16, 3

// What a client does with one claim while the mover takes batches.
const (
	raceDelete     = iota // deletes its messages one by one
	raceDeleteMany        // deletes its messages in one call
	raceRelease           // releases the claim
	raceRenew             // renews the claim for raceRenewTTL
	raceKeep              // leaves it alone
	raceActions
)

const raceRenewTTL = 3 * time.Hour

// testWritesRaceTake runs clients' writes on claimed messages (deletes,
// batch deletes, releases, renewals) against a mover taking, importing and
// settling small batches at the same time, calls routed as the pooled
// driver routes them (the source; Moving: retry; Moved: the target). A
// write the source acknowledged must hold wherever the message ends up:
// a deleted message is on neither backend, a released one is free on the
// target, a renewed claim holds its messages until the new expiry. A
// driver that reads a message, then writes it by a filter a concurrent
// Take no longer matches, acknowledges a write that never happened (the
// message moves on unchanged).
func testWritesRaceTake(m *menv) {
	m.eachQueue("race", raceRounds, func(rng *rand.Rand) {
		for i := 0; i < raceClaims*raceClaimSize; i++ {
			if _, err := m.src.d.Messages().Post(m.ctx, m.q, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte(fmt.Sprint(i))}}); err != nil {
				m.t.Fatalf("post: %v", err)
			}
		}
		claims := make([]storage.Claim, raceClaims)
		actions := make([]int, raceClaims)
		for i := range claims {
			claims[i] = m.src.claim(m.q, raceClaimSize, time.Hour, time.Hour)
			actions[i] = rng.Intn(raceActions)
		}
		m.seal()
		raceMoveAndWrite(m, claims, actions)
		if left := listAll(m.src, m.q); len(left) > 0 {
			m.t.Fatalf("source holds %d messages after the move:%s", len(left), describeRaced(left, claims, actions))
		}
		checkRacedWrites(m, claims, actions)
	})
}

var raceActionNames = [raceActions]string{"delete", "delete many", "release", "renew", "keep"}

// describeRaced names, for each message, the claim that held it when the
// move began and what its client did, and what holds it now: what a
// failure needs to be told apart.
func describeRaced(msgs []storage.Message, claims []storage.Claim, actions []int) string {
	sent := map[string]int{}
	for i, c := range claims {
		for _, msg := range c.Messages {
			sent[msg.ID] = i
		}
	}
	var b strings.Builder
	for _, msg := range msgs {
		fmt.Fprintf(&b, "\n  %s: ", msg.ID)
		if i, ok := sent[msg.ID]; ok {
			fmt.Fprintf(&b, "claimed by %s, which the client told to %s; ", claims[i].ID, raceActionNames[actions[i]])
		}
		fmt.Fprintf(&b, "now held by %q until %s, claimed %d times", msg.ClaimID, msg.ClaimExpires.Format(time.RFC3339), msg.ClaimCount)
	}
	return b.String()
}

// raceMoveAndWrite moves the queue in batches of 2 while two clients act
// on the claims, and returns when both are done.
func raceMoveAndWrite(m *menv, claims []storage.Claim, actions []int) {
	var wg sync.WaitGroup
	errs := make(chan error, raceClaims+1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 1000; i++ { // bounded: 1000 batches
			b, err := m.from.Take(m.ctx, m.q, 2)
			if err == nil {
				err = m.to.Import(m.ctx, m.q, b)
			}
			if err == nil {
				err = m.from.Settle(m.ctx, m.q, b)
			}
			if err != nil {
				errs <- fmt.Errorf("move: %w", err)
				return
			}
			if b.Empty() {
				return
			}
		}
		errs <- errors.New("move did not end after 1000 batches")
	}()
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(claims); i += 2 {
				if err := raceWrite(m, claims[i], actions[i]); err != nil {
					errs <- fmt.Errorf("claim %s, action %d: %w", claims[i].ID, actions[i], err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		m.t.Error(err)
	}
	if m.t.Failed() {
		m.t.FailNow()
	}
}

// raceWrite does one claim's action, routed as the pooled driver routes a
// call while its queue moves.
func raceWrite(m *menv, c storage.Claim, action int) error {
	ids := messageIDs(c.Messages)
	one := func(call func(d storage.Driver) error) error {
		for try := 0; try < 5000; try++ { // bounded: a batch settles in well under that
			err := call(m.src.d)
			if _, moved := storage.MovedTo(err); moved {
				return call(m.dst.d)
			}
			if !errors.Is(err, storage.ErrMoving) {
				return err
			}
			time.Sleep(200 * time.Microsecond)
		}
		return errors.New("still moving after 5000 tries")
	}
	switch action {
	case raceDelete:
		for _, id := range ids {
			if err := one(func(d storage.Driver) error { return d.Messages().Delete(m.ctx, m.q, id, c.ID) }); err != nil {
				return err
			}
		}
	case raceDeleteMany:
		return one(func(d storage.Driver) error { return d.Messages().DeleteMany(m.ctx, m.q, ids, c.ID) })
	case raceRelease:
		return one(func(d storage.Driver) error { return d.Claims().Delete(m.ctx, m.q, c.ID) })
	case raceRenew:
		return one(func(d storage.Driver) error { return d.Claims().Update(m.ctx, m.q, c.ID, raceRenewTTL, time.Hour) })
	}
	return nil
}

// checkRacedWrites checks every acknowledged write on the target.
func checkRacedWrites(m *menv, claims []storage.Claim, actions []int) {
	onTarget := map[string]storage.Message{}
	for _, msg := range listAll(m.dst, m.q) {
		onTarget[msg.ID] = msg
	}
	renewed := m.clock.Now().Add(raceRenewTTL)
	for i, c := range claims {
		for _, sent := range c.Messages {
			got, there := onTarget[sent.ID]
			switch a := actions[i]; {
			case a == raceDelete || a == raceDeleteMany:
				if there {
					m.t.Errorf("message %s was deleted (action %d acknowledged), yet it moved: %+v", sent.ID, a, got)
				}
			case !there:
				m.t.Errorf("message %s (claim %s, action %d) is not on the target", sent.ID, c.ID, a)
			case a == raceRelease && got.ClaimID != "":
				m.t.Errorf("message %s: its claim was released, yet it moved claimed by %s", sent.ID, got.ClaimID)
			case a == raceRenew && (got.ClaimID != c.ID || got.ClaimExpires.Before(renewed)):
				m.t.Errorf("message %s: its claim was renewed until %s, yet it moved held by %q until %s",
					sent.ID, renewed.Format(time.RFC3339), got.ClaimID, got.ClaimExpires.Format(time.RFC3339))
			case a == raceKeep && got.ClaimID != c.ID:
				m.t.Errorf("message %s moved held by %q, want its claim %s", sent.ID, got.ClaimID, c.ID)
			}
		}
	}
}
