package storagetest

import (
	"encoding/json"
	"errors"
	"time"

	"sluice.dev/server/internal/storage"
)

var validationCases = []testCase{
	{"Validation/BadArguments", testBadArguments},
}

// testBadArguments checks that arguments the API layer should never pass
// are refused as Invalid rather than stored or half-applied.
func testBadArguments(e *env) {
	q := e.queue("strict")
	ids := e.post(q, "c", 1, time.Hour)
	c := e.claim(q, 1, time.Minute, time.Minute)
	ms, cs, qs := e.d.Messages(), e.d.Claims(), e.d.Queues()
	body := json.RawMessage(`1`)
	cases := []struct {
		name string
		call func() error
	}{
		{"post nothing", func() error { _, err := ms.Post(e.ctx, q, "c", nil); return err }},
		{"post ttl 0", func() error {
			_, err := ms.Post(e.ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: body}, {TTL: 0, Body: body}})
			return err
		}},
		{"list limit 0", func() error { _, _, err := ms.List(e.ctx, q, storage.ListMessagesOptions{}); return err }},
		{"pop limit 0", func() error { _, err := ms.Pop(e.ctx, q, 0); return err }},
		{"claim ttl 0", func() error {
			_, err := cs.Create(e.ctx, q, storage.ClaimOptions{TTL: 0, Limit: 1})
			return err
		}},
		{"claim negative grace", func() error {
			_, err := cs.Create(e.ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: -time.Second, Limit: 1})
			return err
		}},
		{"update ttl 0", func() error { return cs.Update(e.ctx, q, c.ID, 0, time.Minute) }},
		{"queue list limit 0", func() error { _, err := qs.List(e.ctx, q.Project, storage.ListQueuesOptions{}); return err }},
	}
	for _, tc := range cases {
		err := tc.call()
		e.wantKind(tc.name, err, kind(storage.Invalid))
		if err != nil && !errors.Is(err, storage.ErrArgument) {
			e.t.Errorf("%s: %v does not give the reason storage.ErrArgument", tc.name, err)
		}
	}
	// Nothing above changed the queue: the one message, still claimed.
	if st := e.stats(q); st.Total != 1 || st.Claimed != 1 {
		e.t.Errorf("after refused calls: %+v, want the one claimed message", st)
	}
	if got, err := cs.Get(e.ctx, q, c.ID); err != nil || len(got.Messages) != 1 || got.Messages[0].ID != ids[0] {
		e.t.Errorf("claim after refused calls = %+v, %v", got, err)
	}
}
