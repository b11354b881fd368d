package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

var isolationCases = []testCase{
	{"Isolation/Projects", testProjectIsolation},
	{"Isolation/AwkwardNames", testAwkwardNames},
}

func testProjectIsolation(e *env) {
	a, b := e.queueIn("a", "shared"), e.queueIn("b", "shared")
	qs, ms, cs := e.d.Queues(), e.d.Messages(), e.d.Claims()
	if _, err := qs.Create(e.ctx, a, storage.Metadata{"owner": "a"}); err != nil {
		e.t.Fatal(err)
	}
	ids := e.post(a, "c", 3, time.Hour)
	ca := e.claim(a, 1, time.Minute, time.Minute)

	if ok, _ := qs.Exists(e.ctx, b); ok {
		e.t.Errorf("queue of project a visible in project b")
	}
	if meta, _ := qs.GetMetadata(e.ctx, b); len(meta) != 0 {
		e.t.Errorf("metadata leaked to project b: %v", meta)
	}
	if st := e.stats(b); st.Total != 0 {
		e.t.Errorf("stats leaked to project b: %+v", st)
	}
	if got, _, _ := ms.List(e.ctx, b, storage.ListMessagesOptions{Limit: 10, Echo: true, IncludeClaimed: true}); len(got) != 0 {
		e.t.Errorf("project b lists a's messages: %v", messageIDs(got))
	}
	if _, err := ms.Get(e.ctx, b, ids[1]); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("project b gets a's message: %v", err)
	}
	if got, _ := ms.GetMany(e.ctx, b, ids); len(got) != 0 {
		e.t.Errorf("project b bulk-gets a's messages: %v", messageIDs(got))
	}
	if _, err := cs.Get(e.ctx, b, ca.ID); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("project b sees a's claim: %v", err)
	}
	if c := e.claim(b, 10, time.Minute, time.Minute); len(c.Messages) != 0 {
		e.t.Errorf("project b claimed a's messages: %v", messageIDs(c.Messages))
	}
	if got, _ := ms.Pop(e.ctx, b, 10); len(got) != 0 {
		e.t.Errorf("project b popped a's messages: %v", messageIDs(got))
	}
	// Writes in b never reach a.
	_ = ms.Delete(e.ctx, b, ids[1], "")
	_ = ms.DeleteMany(e.ctx, b, ids, "")
	_ = cs.Delete(e.ctx, b, ca.ID)
	_ = cs.Update(e.ctx, b, ca.ID, time.Second, 0)
	_ = qs.Purge(e.ctx, b)
	e.post(b, "c", 1, time.Hour)
	if err := qs.Delete(e.ctx, b); err != nil {
		e.t.Fatal(err)
	}
	if st := e.stats(a); st.Total != 3 || st.Claimed != 1 {
		e.t.Errorf("project a after b's writes = %+v, want 3 total 1 claimed", st)
	}
	if got, err := cs.Get(e.ctx, a, ca.ID); err != nil || got.TTL != time.Minute {
		e.t.Errorf("project a's claim after b's writes = %+v, %v", got, err)
	}
	if infos, _ := qs.List(e.ctx, e.project("b"), storage.ListQueuesOptions{Limit: 10}); len(infos) != 0 {
		e.t.Errorf("project b lists %v", infos)
	}
}

// testAwkwardNames checks that scoping survives names built to collide with
// a driver's key or path separators.
func testAwkwardNames(e *env) {
	base := e.project("n")
	raw := func(project, name string) storage.QueueRef { return e.rawQueue(base+project, name) }
	pairs := [][2]storage.QueueRef{
		{raw("", "a:b"), raw(":a", "b")},
		{raw("", "a_b"), raw("_a", "b")},
		{raw("", "a}{b"), raw("}{a", "b")},
		{raw("", "1:x"), raw("1", ":x")},
		{raw("", "3:abc"), raw("3", ":abc")},
	}
	for _, p := range pairs {
		id := e.post(p[0], "c", 1, time.Hour)[0]
		if st := e.stats(p[1]); st.Total != 0 {
			e.t.Errorf("posting to %+v shows up in %+v", p[0], p[1])
		}
		if _, err := e.d.Messages().Get(e.ctx, p[1], id); !storage.Is(err, storage.NotFound) {
			e.t.Errorf("message of %+v readable through %+v", p[0], p[1])
		}
	}
}
