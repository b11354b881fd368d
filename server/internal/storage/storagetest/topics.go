package storagetest

import (
	"fmt"
	"time"

	"sluice.dev/server/internal/storage"
)

// Topics are queues in a namespace of their project (storage.TopicRef);
// these cases check that every driver keeps that namespace apart from the
// project's queues and from other projects, and serves a topic's whole
// life through the ordinary stores.
var topicCases = []testCase{
	{"Topics/Ref", testTopicRef},
	{"Topics/Lifecycle", testTopicLifecycle},
	{"Topics/ApartFromQueues", testTopicsApartFromQueues},
	{"Topics/ProjectIsolation", testTopicProjectIsolation},
	{"Topics/List", testTopicList},
}

// topic returns a topic ref in the case's project p and records it.
func (e *env) topic(p, name string) storage.QueueRef {
	ref := storage.TopicRef(e.project(p), name)
	return e.rawQueue(ref.Project, ref.Name)
}

func testTopicRef(e *env) {
	ref := storage.TopicRef("proj", "t")
	if p, ok := storage.IsTopic(ref); !ok || p != "proj" || ref.Name != "t" {
		e.t.Errorf("IsTopic(TopicRef(proj, t)) = %q, %v", p, ok)
	}
	if _, ok := storage.IsTopic(storage.QueueRef{Project: "proj", Name: "t"}); ok {
		e.t.Error("a queue reads as a topic")
	}
	if ref.Project == "proj" || storage.ReservedProject("proj") || !storage.ReservedProject(ref.Project) {
		e.t.Errorf("topic namespace %q is not apart from project names", ref.Project)
	}
}

func testTopicLifecycle(e *env) {
	qs, ms := e.d.Queues(), e.d.Messages()
	t := e.topic("a", "events")
	if ok, err := qs.Exists(e.ctx, t); ok || err != nil {
		e.t.Fatalf("Exists before create = %v, %v", ok, err)
	}
	if created, err := qs.Create(e.ctx, t, storage.Metadata{"_default_message_ttl": float64(600)}); !created || err != nil {
		e.t.Fatalf("Create = %v, %v", created, err)
	}
	if created, err := qs.Create(e.ctx, t, nil); created || err != nil {
		e.t.Errorf("second Create = %v, %v", created, err)
	}
	if err := qs.SetMetadata(e.ctx, t, storage.Metadata{"k": "v"}); err != nil {
		e.t.Fatal(err)
	}
	if meta, err := qs.GetMetadata(e.ctx, t); err != nil || meta["k"] != "v" || len(meta) != 1 {
		e.t.Errorf("GetMetadata = %v, %v", meta, err)
	}
	ids := e.post(t, "c", 3, time.Hour)
	got, _, err := ms.List(e.ctx, t, storage.ListMessagesOptions{Limit: 10, Echo: true})
	if err != nil || !equalStrings(messageIDs(got), ids) {
		e.t.Errorf("List = %v, %v; want %v", messageIDs(got), err, ids)
	}
	if m, err := ms.Get(e.ctx, t, ids[1]); err != nil || string(m.Body) != "1" {
		e.t.Errorf("Get = %+v, %v", m, err)
	}
	if st := e.stats(t); st.Total != 3 || st.Free != 3 || st.Oldest == nil || st.Oldest.ID != ids[0] {
		e.t.Errorf("Stats = %+v", st)
	}
	if err := ms.Delete(e.ctx, t, ids[0], ""); err != nil {
		e.t.Fatal(err)
	}
	if err := qs.Purge(e.ctx, t); err != nil {
		e.t.Fatal(err)
	}
	if st := e.stats(t); st.Total != 0 {
		e.t.Errorf("Stats after purge = %+v", st)
	}
	if ok, _ := qs.Exists(e.ctx, t); !ok {
		e.t.Error("purge removed the topic")
	}
	e.post(t, "c", 1, time.Hour)
	if err := qs.Delete(e.ctx, t); err != nil {
		e.t.Fatal(err)
	}
	if ok, _ := qs.Exists(e.ctx, t); ok {
		e.t.Error("topic exists after delete")
	}
	if st := e.stats(t); st.Total != 0 {
		e.t.Errorf("messages outlive their topic: %+v", st)
	}
}

// testTopicsApartFromQueues: a topic and a queue of the same project and
// name are two things; nothing done to one shows in the other.
func testTopicsApartFromQueues(e *env) {
	qs, ms := e.d.Queues(), e.d.Messages()
	q, t := e.queue("same"), e.topic("a", "same")
	if _, err := qs.Create(e.ctx, q, storage.Metadata{"kind": "queue"}); err != nil {
		e.t.Fatal(err)
	}
	if _, err := qs.Create(e.ctx, t, storage.Metadata{"kind": "topic"}); err != nil {
		e.t.Fatal(err)
	}
	qids, tids := e.post(q, "c", 2, time.Hour), e.post(t, "c", 3, time.Hour)
	if meta, _ := qs.GetMetadata(e.ctx, q); meta["kind"] != "queue" {
		e.t.Errorf("queue metadata = %v", meta)
	}
	if meta, _ := qs.GetMetadata(e.ctx, t); meta["kind"] != "topic" {
		e.t.Errorf("topic metadata = %v", meta)
	}
	if got, _ := ms.GetMany(e.ctx, q, tids); len(got) != 0 {
		e.t.Errorf("the queue reads the topic's messages: %v", messageIDs(got))
	}
	if _, err := ms.Get(e.ctx, t, qids[0]); !storage.Is(err, storage.NotFound) {
		e.t.Errorf("the topic reads the queue's message: %v", err)
	}
	if c := e.claim(q, 10, time.Minute, time.Minute); len(c.Messages) != 2 {
		e.t.Errorf("claim on the queue took %d messages, want its 2", len(c.Messages))
	}
	queues, err := qs.List(e.ctx, e.project("a"), storage.ListQueuesOptions{Limit: 10})
	if err != nil || len(queues) != 1 || queues[0].Name != "same" {
		e.t.Errorf("queue listing = %+v, %v", queues, err)
	}
	topics, err := qs.List(e.ctx, storage.TopicProject(e.project("a")), storage.ListQueuesOptions{Limit: 10, Detailed: true})
	if err != nil || len(topics) != 1 || topics[0].Metadata["kind"] != "topic" {
		e.t.Errorf("topic listing = %+v, %v", topics, err)
	}
	if err := qs.Purge(e.ctx, t); err != nil {
		e.t.Fatal(err)
	}
	if st := e.stats(q); st.Total != 2 || st.Claimed != 2 {
		e.t.Errorf("purging the topic changed the queue: %+v", st)
	}
	e.post(t, "c", 1, time.Hour)
	if err := qs.Delete(e.ctx, q); err != nil {
		e.t.Fatal(err)
	}
	if ok, _ := qs.Exists(e.ctx, t); !ok {
		e.t.Error("deleting the queue deleted the topic")
	}
	if st := e.stats(t); st.Total != 1 {
		e.t.Errorf("deleting the queue changed the topic: %+v", st)
	}
}

func testTopicProjectIsolation(e *env) {
	qs, ms := e.d.Queues(), e.d.Messages()
	a, b := e.topic("a", "t"), e.topic("b", "t")
	ids := e.post(a, "c", 2, time.Hour)
	if ok, _ := qs.Exists(e.ctx, b); ok {
		e.t.Error("project a's topic exists in project b")
	}
	if got, _ := ms.GetMany(e.ctx, b, ids); len(got) != 0 {
		e.t.Errorf("project b reads a's topic messages: %v", messageIDs(got))
	}
	if got, _ := qs.List(e.ctx, storage.TopicProject(e.project("b")), storage.ListQueuesOptions{Limit: 10}); len(got) != 0 {
		e.t.Errorf("project b lists a's topics: %+v", got)
	}
	_ = qs.Purge(e.ctx, b)
	_ = qs.Delete(e.ctx, b)
	if st := e.stats(a); st.Total != 2 {
		e.t.Errorf("project b's writes reached a's topic: %+v", st)
	}
}

func testTopicList(e *env) {
	qs := e.d.Queues()
	var want []string
	for i := 0; i < 5; i++ {
		n := fmt.Sprintf("t%d", i)
		want = append(want, n)
		if _, err := qs.Create(e.ctx, e.topic("a", n), nil); err != nil {
			e.t.Fatal(err)
		}
		// Queues with names sorting among the topics' never interleave.
		if _, err := qs.Create(e.ctx, e.queue(n+"q"), nil); err != nil {
			e.t.Fatal(err)
		}
	}
	space := storage.TopicProject(e.project("a"))
	var got []string
	marker := ""
	for page := 0; page < 5; page++ {
		infos, err := qs.List(e.ctx, space, storage.ListQueuesOptions{Marker: marker, Limit: 2})
		if err != nil {
			e.t.Fatal(err)
		}
		if len(infos) == 0 {
			break
		}
		for _, in := range infos {
			got = append(got, in.Name)
		}
		marker = infos[len(infos)-1].Name
	}
	if !equalStrings(got, want) {
		e.t.Errorf("paged topic listing = %v, want %v", got, want)
	}
	if infos, err := qs.List(e.ctx, space, storage.ListQueuesOptions{Limit: 10, Name: "3"}); err != nil || len(infos) != 1 || infos[0].Name != "t3" {
		e.t.Errorf("topic listing filtered by 3 = %+v, %v", infos, err)
	}
}
