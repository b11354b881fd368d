package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

func testDelete(e *env) {
	q := e.queue("deletes")
	ms := e.d.Messages()
	ids := e.post(q, "c", 3, time.Hour)
	c := e.claim(q, 1, time.Minute, time.Minute) // holds ids[0]
	other := e.claim(q, 1, time.Minute, time.Minute)
	if len(c.Messages) != 1 || len(other.Messages) != 1 {
		e.t.Fatalf("claims = %v / %v", messageIDs(c.Messages), messageIDs(other.Messages))
	}
	cases := []struct {
		name    string
		id      string
		claimID string
		want    *storage.Kind
		gone    bool
	}{
		{"claimed without claim id", ids[0], "", kind(storage.Forbidden), false},
		{"claimed with another live claim's id (Zaqar: 403)", ids[0], other.ID, kind(storage.Forbidden), false},
		{"claimed with an unknown claim id", ids[0], "nope", kind(storage.Invalid), false},
		{"free with a claim id", ids[2], c.ID, kind(storage.Invalid), false},
		{"claimed with its claim id", ids[0], c.ID, nil, true},
		{"free without claim id", ids[2], "", nil, true},
		{"absent", "no-such-id", "", nil, true},
		{"already deleted", ids[0], c.ID, nil, true},
	}
	for _, tc := range cases {
		err := ms.Delete(e.ctx, q, tc.id, tc.claimID)
		e.wantKind(tc.name, err, tc.want)
		_, gerr := ms.Get(e.ctx, q, tc.id)
		if gone := storage.Is(gerr, storage.NotFound); gone != tc.gone {
			e.t.Errorf("%s: message gone = %v, want %v (%v)", tc.name, gone, tc.gone, gerr)
		}
	}
	// The claim no longer lists the deleted message; the other is intact.
	if got, err := e.d.Claims().Get(e.ctx, q, c.ID); err == nil && len(got.Messages) != 0 {
		e.t.Errorf("claim still lists deleted message: %v", messageIDs(got.Messages))
	}
	if st := e.stats(q); st.Total != 1 || st.Claimed != 1 {
		e.t.Errorf("stats after deletes = %+v, want 1 total 1 claimed", st)
	}
	if err := ms.Delete(e.ctx, e.queue("absent"), ids[1], ""); err != nil {
		e.t.Errorf("delete in absent queue: %v", err)
	}
}

// testRemove: a driver that says whether a delete removed the message
// (storage.Remover) says so exactly when the message was there to remove;
// the pooled driver skips the target of a move on its word.
func testRemove(e *env) {
	rm, ok := e.raw.Messages().(storage.Remover)
	if !ok {
		e.t.Skip("the driver does not report removals")
	}
	q := e.queue("removes")
	ids := e.post(q, "c", 2, time.Hour)
	c := e.claim(q, 1, time.Minute, time.Minute) // holds ids[0]
	cases := []struct {
		name    string
		id      string
		claimID string
		want    *storage.Kind
		removed bool
	}{
		{"claimed without claim id", ids[0], "", kind(storage.Forbidden), false},
		{"claimed with its claim id", ids[0], c.ID, nil, true},
		{"already removed", ids[0], c.ID, nil, false},
		{"free", ids[1], "", nil, true},
		{"free, again", ids[1], "", nil, false},
		{"absent", "no-such-id", "", nil, false},
	}
	for _, tc := range cases {
		removed, err := rm.Remove(e.ctx, q, tc.id, tc.claimID)
		e.wantKind(tc.name, err, tc.want)
		if removed != tc.removed {
			e.t.Errorf("%s: removed = %v, want %v", tc.name, removed, tc.removed)
		}
	}
	if removed, err := rm.Remove(e.ctx, e.queue("absent"), ids[1], ""); err != nil || removed {
		e.t.Errorf("remove in absent queue: %v, %v", removed, err)
	}
}

func testDeleteMany(e *env) {
	q := e.queue("bulk")
	ms := e.d.Messages()
	ids := e.post(q, "c", 5, time.Hour)
	c := e.claim(q, 2, time.Minute, time.Minute) // holds ids[0], ids[1]
	// Without a claim id, claimed messages are skipped.
	if err := ms.DeleteMany(e.ctx, q, []string{ids[0], ids[2], "unknown"}, ""); err != nil {
		e.t.Fatal(err)
	}
	left := func() []string {
		got, _, err := ms.List(e.ctx, q, storage.ListMessagesOptions{Limit: 10, Echo: true, IncludeClaimed: true})
		if err != nil {
			e.t.Fatal(err)
		}
		return messageIDs(got)
	}
	if got, want := left(), []string{ids[0], ids[1], ids[3], ids[4]}; !equalStrings(got, want) {
		e.t.Errorf("after delete many without claim = %v, want %v", got, want)
	}
	// With the claim id, that claim's messages go too.
	if err := ms.DeleteMany(e.ctx, q, []string{ids[0], ids[1], ids[3]}, c.ID); err != nil {
		e.t.Fatal(err)
	}
	if got, want := left(), []string{ids[4]}; !equalStrings(got, want) {
		e.t.Errorf("after delete many with claim = %v, want %v", got, want)
	}
	if st := e.stats(q); st.Total != 1 || st.Claimed != 0 {
		e.t.Errorf("stats = %+v", st)
	}
	if err := ms.DeleteMany(e.ctx, e.queue("absent"), ids, ""); err != nil {
		e.t.Errorf("delete many in absent queue: %v", err)
	}
}

func testPop(e *env) {
	q := e.queue("popped")
	ms := e.d.Messages()
	ids := e.post(q, "c", 5, time.Hour)
	c := e.claim(q, 1, time.Minute, time.Minute) // holds ids[0]
	got, err := ms.Pop(e.ctx, q, 3)
	if err != nil {
		e.t.Fatal(err)
	}
	if want := ids[1:4]; !equalStrings(messageIDs(got), want) {
		e.t.Errorf("pop = %v, want %v (oldest free)", messageIDs(got), want)
	}
	for _, m := range got {
		if string(m.Body) == "" || m.ClaimID != "" {
			e.t.Errorf("popped message %+v", m)
		}
		if _, err := ms.Get(e.ctx, q, m.ID); !storage.Is(err, storage.NotFound) {
			e.t.Errorf("popped message %s still there: %v", m.ID, err)
		}
	}
	got, _ = ms.Pop(e.ctx, q, 10)
	if !equalStrings(messageIDs(got), ids[4:]) {
		e.t.Errorf("second pop = %v, want %v", messageIDs(got), ids[4:])
	}
	if got, _ := ms.Pop(e.ctx, q, 10); len(got) != 0 {
		e.t.Errorf("pop took a claimed message: %v", messageIDs(got))
	}
	if err := e.d.Claims().Delete(e.ctx, q, c.ID); err != nil {
		e.t.Fatal(err)
	}
	if got, _ := ms.Pop(e.ctx, q, 10); !equalStrings(messageIDs(got), ids[:1]) {
		e.t.Errorf("pop after release = %v, want %v", messageIDs(got), ids[:1])
	}
	if got, err := ms.Pop(e.ctx, e.queue("absent"), 3); err != nil || len(got) != 0 {
		e.t.Errorf("pop from absent queue = %v, %v", got, err)
	}
}
