package storagetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"sluice.dev/server/internal/storage"
)

var queueCases = []testCase{
	{"Queues/CreateExistsMetadata", testQueueCreate},
	{"Queues/ListPaging", testQueueList},
	{"Queues/DeleteRemovesMessagesAndClaims", testQueueDelete},
	{"Queues/Stats", testQueueStats},
	{"Queues/Purge", testQueuePurge},
	{"Queues/Depth", testDepth},
}

func testQueueCreate(e *env) {
	qs := e.d.Queues()
	q := e.queue("orders")
	if ok, err := qs.Exists(e.ctx, q); err != nil || ok {
		e.t.Fatalf("Exists before create = %v, %v", ok, err)
	}
	meta, err := qs.GetMetadata(e.ctx, q)
	if err != nil || len(meta) != 0 {
		e.t.Errorf("GetMetadata of absent queue = %v, %v; want empty", meta, err)
	}
	// Numbers come from the API as json.Number and must come back with
	// the same text: no float64 round trip (9007199254740993 would read
	// back as ...992, 1E+2 as 100).
	want := storage.Metadata{"_default_message_ttl": json.Number("3600"), "nested": map[string]any{"a": []any{json.Number("1"), "x"}},
		"big": json.Number("9007199254740993"), "huge": json.Number("123456789012345678901234567890"), "exp": json.Number("1E+2"),
		"neg0": json.Number("-0")}
	created, err := qs.Create(e.ctx, q, want)
	if err != nil || !created {
		e.t.Fatalf("Create = %v, %v; want created", created, err)
	}
	created, err = qs.Create(e.ctx, q, storage.Metadata{"other": true})
	if err != nil || created {
		e.t.Fatalf("second Create = %v, %v; want existing", created, err)
	}
	if ok, err := qs.Exists(e.ctx, q); err != nil || !ok {
		e.t.Errorf("Exists after create = %v, %v", ok, err)
	}
	got, err := qs.GetMetadata(e.ctx, q)
	if err != nil || !reflect.DeepEqual(got, want) {
		e.t.Fatalf("GetMetadata = %#v, %v; want %#v (second Create must not overwrite)", got, err, want)
	}
	// Editing a returned document must not reach the stored one.
	got["nested"].(map[string]any)["a"] = "changed"
	got["added"] = 1
	again, _ := qs.GetMetadata(e.ctx, q)
	if !reflect.DeepEqual(again, want) {
		e.t.Errorf("stored metadata changed through a returned copy: %#v", again)
	}
	repl := storage.Metadata{"description": "replaced"}
	if err := qs.SetMetadata(e.ctx, q, repl); err != nil {
		e.t.Fatal(err)
	}
	if got, _ := qs.GetMetadata(e.ctx, q); !reflect.DeepEqual(got, repl) {
		e.t.Errorf("after SetMetadata: %#v, want %#v", got, repl)
	}
	// SetMetadata creates a queue that did not exist.
	q2 := e.queue("implicit")
	if err := qs.SetMetadata(e.ctx, q2, storage.Metadata{"k": "v"}); err != nil {
		e.t.Fatal(err)
	}
	if ok, _ := qs.Exists(e.ctx, q2); !ok {
		e.t.Errorf("SetMetadata did not create the queue")
	}
	// Posting creates a queue too.
	q3 := e.queue("posted")
	e.post(q3, "c", 1, time.Minute)
	if ok, _ := qs.Exists(e.ctx, q3); !ok {
		e.t.Errorf("Post did not create the queue")
	}
}

func testQueueList(e *env) {
	qs := e.d.Queues()
	var names []string
	for i := 0; i < 7; i++ {
		n := fmt.Sprintf("q%02d", 6-i) // created out of order; listed sorted
		names = append([]string{n}, names...)
		if _, err := qs.Create(e.ctx, e.queue(n), storage.Metadata{"i": json.Number(strconv.Itoa(6 - i))}); err != nil {
			e.t.Fatal(err)
		}
	}
	// A queue in another project never shows up.
	if _, err := qs.Create(e.ctx, e.queueIn("b", "q00x"), nil); err != nil {
		e.t.Fatal(err)
	}
	project := e.project("a")
	var got []string
	marker := ""
	for page := 0; page < 10; page++ {
		infos, err := qs.List(e.ctx, project, storage.ListQueuesOptions{Marker: marker, Limit: 3})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(infos) > 3 {
			e.t.Fatalf("page of %d > limit 3", len(infos))
		}
		if len(infos) == 0 {
			break
		}
		for _, in := range infos {
			if in.Metadata != nil {
				e.t.Errorf("metadata of %s returned without Detailed", in.Name)
			}
			got = append(got, in.Name)
		}
		marker = infos[len(infos)-1].Name
	}
	if !equalStrings(got, names) {
		e.t.Errorf("paged listing = %v, want %v", got, names)
	}
	infos, err := qs.List(e.ctx, project, storage.ListQueuesOptions{Marker: "q02", Limit: 2, Detailed: true})
	if err != nil || len(infos) != 2 || infos[0].Name != "q03" || infos[0].Metadata["i"] != json.Number("3") {
		e.t.Errorf("detailed listing after q02 = %+v, %v", infos, err)
	}
	infos, err = qs.List(e.ctx, project, storage.ListQueuesOptions{Limit: 10, Name: "05"})
	if err != nil || len(infos) != 1 || infos[0].Name != "q05" {
		e.t.Errorf("listing with name filter 05 = %+v, %v", infos, err)
	}
	if infos, err := qs.List(e.ctx, e.project("empty"), storage.ListQueuesOptions{Limit: 10}); err != nil || len(infos) != 0 {
		e.t.Errorf("listing an empty project = %+v, %v", infos, err)
	}
}

func testQueueDelete(e *env) {
	qs := e.d.Queues()
	q := e.queue("doomed")
	if _, err := qs.Create(e.ctx, q, storage.Metadata{"x": json.Number("1")}); err != nil {
		e.t.Fatal(err)
	}
	e.post(q, "c", 3, time.Hour)
	if c := e.claim(q, 2, time.Minute, time.Minute); len(c.Messages) != 2 {
		e.t.Fatalf("claimed %d, want 2", len(c.Messages))
	}
	if err := qs.Delete(e.ctx, q); err != nil {
		e.t.Fatal(err)
	}
	if ok, _ := qs.Exists(e.ctx, q); ok {
		e.t.Errorf("queue exists after delete")
	}
	if st := e.stats(q); st.Total != 0 {
		e.t.Errorf("stats after delete = %+v", st)
	}
	if meta, _ := qs.GetMetadata(e.ctx, q); len(meta) != 0 {
		e.t.Errorf("metadata survived delete: %v", meta)
	}
	// Recreated under the same name it starts empty, with no old claims.
	e.post(q, "c", 1, time.Hour)
	if c := e.claim(q, 10, time.Minute, time.Minute); len(c.Messages) != 1 {
		e.t.Errorf("recreated queue claim got %d messages, want 1", len(c.Messages))
	}
	if err := qs.Delete(e.ctx, e.queue("never-made")); err != nil {
		e.t.Errorf("deleting an absent queue: %v", err)
	}
}

func testQueueStats(e *env) {
	q := e.queue("counted")
	if st := e.stats(q); st.Total != 0 || st.Oldest != nil || st.Newest != nil {
		e.t.Errorf("stats of absent queue = %+v", st)
	}
	ids := e.post(q, "c", 3, time.Hour)
	e.clock.Advance(time.Second)
	later := e.post(q, "c", 1, time.Hour)
	c := e.claim(q, 1, time.Minute, time.Minute)
	st := e.stats(q)
	if st.Total != 4 || st.Claimed != 1 || st.Free != 3 {
		e.t.Errorf("stats = %d total %d claimed %d free; want 4/1/3", st.Total, st.Claimed, st.Free)
	}
	if st.Oldest == nil || st.Oldest.ID != ids[0] || st.Oldest.ClaimID != c.ID {
		e.t.Errorf("oldest = %+v, want %s claimed by %s", st.Oldest, ids[0], c.ID)
	}
	if st.Newest == nil || st.Newest.ID != later[0] || !st.Newest.Created.Equal(e.clock.Now()) {
		e.t.Errorf("newest = %+v, want %s created now", st.Newest, later[0])
	}
	// Expired messages stop counting without anyone deleting them.
	e.clock.Advance(2 * time.Hour)
	if st := e.stats(q); st.Total != 0 || st.Free != 0 || st.Claimed != 0 || st.Oldest != nil {
		e.t.Errorf("stats after expiry = %+v", st)
	}
}

func testQueuePurge(e *env) {
	qs := e.d.Queues()
	q := e.queue("purged")
	meta := storage.Metadata{"keep": "me"}
	if _, err := qs.Create(e.ctx, q, meta); err != nil {
		e.t.Fatal(err)
	}
	e.post(q, "c", 5, time.Hour)
	c := e.claim(q, 2, time.Minute, time.Minute)
	if err := qs.Purge(e.ctx, q); err != nil {
		e.t.Fatal(err)
	}
	if st := e.stats(q); st.Total != 0 || st.Claimed != 0 {
		e.t.Errorf("stats after purge = %+v", st)
	}
	if _, err := e.d.Claims().Get(e.ctx, q, c.ID); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("claim survived purge: %v", err)
	}
	if ok, _ := qs.Exists(e.ctx, q); !ok {
		e.t.Errorf("purge removed the queue")
	}
	if got, _ := qs.GetMetadata(e.ctx, q); !reflect.DeepEqual(got, meta) {
		e.t.Errorf("purge changed metadata: %v", got)
	}
	if err := qs.Purge(e.ctx, e.queue("absent")); err != nil {
		e.t.Errorf("purging an absent queue: %v", err)
	}
}

func testDepth(e *env) {
	dr, ok := e.d.(storage.DepthReporter)
	if !ok {
		e.t.Skip("driver does not implement storage.DepthReporter")
	}
	before, err := dr.Depth(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.post(e.queue("d1"), "c", 3, time.Hour)
	e.post(e.queueIn("b", "d2"), "c", 2, time.Hour)
	e.claim(e.queue("d1"), 2, time.Minute, time.Minute)
	after, err := dr.Depth(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	// Other tests may share the backend, so compare differences only when
	// nothing else runs; the suite runs its cases one at a time.
	if df, dc := after.Free-before.Free, after.Claimed-before.Claimed; df != 3 || dc != 2 {
		e.t.Errorf("depth grew by free %d claimed %d; want 3 and 2", df, dc)
	}
}
