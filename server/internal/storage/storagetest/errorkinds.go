package storagetest

import (
	"errors"
	"time"

	"sluice.dev/server/internal/storage"
)

var errorKindCases = []testCase{
	{"Errors/SameKindAndReason", testErrorKinds},
}

// testErrorOps: a refusal names its operation from storage's one table
// (ops.go), whichever driver reports it, so logs and conditions read alike.
func testErrorOps(e *env) {
	q := e.queue("errops")
	const unknown = "00000000-0000-4000-8000-000000000000"
	ss := e.d.Subscriptions()
	cases := []struct {
		op  string
		err error
	}{
		{storage.OpMessageGet, func() error { _, err := e.d.Messages().Get(e.ctx, q, unknown); return err }()},
		{storage.OpClaimGet, func() error { _, err := e.d.Claims().Get(e.ctx, q, unknown); return err }()},
		{storage.OpSubscriptionGet, func() error { _, err := ss.Get(e.ctx, q, unknown); return err }()},
		{storage.OpSubscriptionUpdate, ss.Update(e.ctx, q, unknown, storage.SubscriptionUpdate{})},
		{storage.OpSubscriptionConfirm, ss.Confirm(e.ctx, q, unknown, true)},
	}
	for _, tc := range cases {
		var se *storage.Error
		if !errors.As(tc.err, &se) {
			e.t.Errorf("%s: %v is not a *storage.Error", tc.op, tc.err)
			continue
		}
		if se.Op != tc.op {
			e.t.Errorf("%s: the error names op %q", tc.op, se.Op)
		}
	}
}

// testErrorKinds: each refused operation gives the same kind and the same
// reason on every driver, so the API answers it with the same status and
// wording whichever backend holds the queue.
func testErrorKinds(e *env) {
	q := e.queue("errs")
	ms, cs := e.d.Messages(), e.d.Claims()
	e.post(q, "c", 3, time.Hour)
	held := e.claim(q, 1, time.Minute, time.Minute)
	other := e.claim(q, 1, time.Minute, time.Minute)
	lapsed := e.claim(q, 1, time.Second, 0)
	if len(held.Messages) != 1 || len(other.Messages) != 1 || len(lapsed.Messages) != 1 {
		e.t.Fatalf("claims took %d, %d, %d messages", len(held.Messages), len(other.Messages), len(lapsed.Messages))
	}
	e.clock.Advance(2 * time.Second) // lapsed lapses; its message is free again
	const unknown = "00000000-0000-4000-8000-000000000000"
	cases := []struct {
		name   string
		err    error
		kind   storage.Kind
		reason error
	}{
		{"delete held without claim id", ms.Delete(e.ctx, q, held.Messages[0].ID, ""), storage.Forbidden, storage.ErrClaimed},
		// Another live claim's id: the message is claimed by someone else
		// (Zaqar's MessageNotClaimedBy, 403); a claim that does not exist
		// is the caller's mistake (400).
		{"delete held with another claim", ms.Delete(e.ctx, q, held.Messages[0].ID, other.ID), storage.Forbidden, storage.ErrClaimed},
		{"delete held with an unknown claim", ms.Delete(e.ctx, q, held.Messages[0].ID, unknown), storage.Invalid, storage.ErrNotHolder},
		{"delete free with a claim id", ms.Delete(e.ctx, q, lapsed.Messages[0].ID, held.ID), storage.Invalid, storage.ErrNotClaimed},
		{"delete free with the lapsed claim", ms.Delete(e.ctx, q, lapsed.Messages[0].ID, lapsed.ID), storage.Invalid, storage.ErrNotClaimed},
		{"get unknown claim", func() error { _, err := cs.Get(e.ctx, q, unknown); return err }(), storage.NotFound, storage.ErrNoClaim},
		{"get lapsed claim", func() error { _, err := cs.Get(e.ctx, q, lapsed.ID); return err }(), storage.NotFound, storage.ErrNoClaim},
		{"update unknown claim", cs.Update(e.ctx, q, unknown, time.Minute, 0), storage.NotFound, storage.ErrNoClaim},
		{"update lapsed claim", cs.Update(e.ctx, q, lapsed.ID, time.Minute, 0), storage.NotFound, storage.ErrNoClaim},
		{"get unknown message", func() error { _, err := ms.Get(e.ctx, q, unknown); return err }(), storage.NotFound, storage.ErrNoMessage},
		{"get malformed message id", func() error { _, err := ms.Get(e.ctx, q, "not-an-id"); return err }(), storage.NotFound, storage.ErrNoMessage},
		{"list with a malformed marker", func() error {
			_, _, err := ms.List(e.ctx, q, storage.ListMessagesOptions{Limit: 1, Marker: "not a marker"})
			return err
		}(), storage.Invalid, storage.ErrMarker},
	}
	for _, tc := range cases {
		e.wantKind(tc.name, tc.err, kind(tc.kind))
		if tc.err != nil && !errors.Is(tc.err, tc.reason) {
			e.t.Errorf("%s: %v does not give the reason %q", tc.name, tc.err, tc.reason)
		}
	}
	if st := e.stats(q); st.Total != 3 {
		e.t.Errorf("refused deletes removed messages: %+v", st)
	}
	testErrorOps(e)
}
