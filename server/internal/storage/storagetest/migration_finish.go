package storagetest

import (
	"time"

	"sluice.dev/server/internal/storage"
)

// The end of a move: the tombstone Finish leaves, and a queue moved back.

func testTombstone(m *menv) {
	ids := m.src.post(m.q, "c", 3, time.Hour)
	c := m.src.claim(m.q, 1, time.Minute, 0)
	m.seal()
	m.src.wantKind("finish with messages left", m.from.Finish(m.ctx, m.q, tombstoneTTL), kind(storage.Conflict))
	m.take(1)
	m.src.wantKind("finish with a batch in transit", m.from.Finish(m.ctx, m.q, tombstoneTTL), kind(storage.Conflict))
	m.moveAll(2)
	m.must("finish", m.from.Finish(m.ctx, m.q, tombstoneTTL))
	m.must("finish twice", m.from.Finish(m.ctx, m.q, tombstoneTTL))
	// A mover that finished and died before the switch resumes with the
	// steps before: they must send it on (or find nothing), not fail.
	for step, call := range map[string]func() (storage.Batch, error){
		"in transit": func() (storage.Batch, error) { return m.from.InTransit(m.ctx, m.q) },
		"take":       func() (storage.Batch, error) { return m.from.Take(m.ctx, m.q, 5) },
	} {
		b, err := call()
		if _, moved := storage.MovedTo(err); !b.Empty() || err != nil && !moved {
			m.t.Errorf("%s after finish: %+v, %v; want nothing, or Moved", step, b, err)
		}
	}
	m.must("done", m.to.Done(m.ctx, m.q))

	qs, ms, cs := m.src.d.Queues(), m.src.d.Messages(), m.src.d.Claims()
	ctx, q := m.ctx, m.q
	calls := map[string]func() error{
		"post": func() error {
			_, err := ms.Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte("1")}})
			return err
		},
		"list": func() error {
			_, _, err := ms.List(ctx, q, storage.ListMessagesOptions{Limit: 10})
			return err
		},
		"get":         func() error { _, err := ms.Get(ctx, q, ids[0]); return err },
		"get many":    func() error { _, err := ms.GetMany(ctx, q, ids); return err },
		"delete":      func() error { return ms.Delete(ctx, q, ids[1], "") },
		"delete many": func() error { return ms.DeleteMany(ctx, q, ids, "") },
		"pop":         func() error { _, err := ms.Pop(ctx, q, 1); return err },
		"claim": func() error {
			_, err := cs.Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Limit: 1})
			return err
		},
		"claim get":    func() error { _, err := cs.Get(ctx, q, c.ID); return err },
		"claim update": func() error { return cs.Update(ctx, q, c.ID, time.Minute, 0) },
		"claim delete": func() error { return cs.Delete(ctx, q, c.ID) },
		"exists":       func() error { _, err := qs.Exists(ctx, q); return err },
		"create":       func() error { _, err := qs.Create(ctx, q, storage.Metadata{}); return err },
		"get metadata": func() error { _, err := qs.GetMetadata(ctx, q); return err },
		"set metadata": func() error { return qs.SetMetadata(ctx, q, storage.Metadata{"a": "b"}) },
		"update metadata": func() error {
			_, err := qs.UpdateMetadata(ctx, q, func(md storage.Metadata) (storage.Metadata, error) { return md, nil })
			return err
		},
		"stats":        func() error { _, err := qs.Stats(ctx, q); return err },
		"purge":        func() error { return qs.Purge(ctx, q) },
		"queue delete": func() error { return qs.Delete(ctx, q) },
	}
	for name, call := range calls {
		m.wantMoved(name+" on the tombstone", call())
	}
	list, err := qs.List(ctx, q.Project, storage.ListQueuesOptions{Limit: 100})
	m.must("queue list", err)
	for _, info := range list {
		if info.Name == q.Name {
			m.t.Errorf("the source still lists the moved queue")
		}
	}
	// The target serves everything.
	if got := messageIDs(listAll(m.dst, m.q)); !sameSet(got, ids) {
		m.t.Errorf("target holds %v, want %v", got, ids)
	}
	// Once the tombstone lapses the source forgets the queue.
	m.clock.Advance(tombstoneTTL + time.Second)
	if ok, err := qs.Exists(ctx, q); err != nil || ok {
		m.t.Errorf("exists after the tombstone lapsed = %v, %v", ok, err)
	}
}

// testMoveBack moves a queue away and back again: the target of the way
// back still holds the tombstone of the first move, which Prepare clears.
func testMoveBack(m *menv) {
	ids := m.src.post(m.q, "c", 3, time.Hour)
	m.seal()
	m.moveAll(2)
	m.must("finish", m.from.Finish(m.ctx, m.q, tombstoneTTL))
	m.must("done", m.to.Done(m.ctx, m.q))
	before := listAll(m.dst, m.q)

	s, err := m.to.Seal(m.ctx, m.q, "pool-back")
	m.must("seal on the way back", err)
	m.must("prepare on the way back", m.from.Prepare(m.ctx, m.q, s.Metadata, s.Seq))
	for i := 0; ; i++ {
		b, err := m.to.Take(m.ctx, m.q, 2)
		m.must("take on the way back", err)
		if b.Empty() || i > 100 {
			break
		}
		m.must("import on the way back", m.from.Import(m.ctx, m.q, b))
		m.must("settle on the way back", m.to.Settle(m.ctx, m.q, b))
	}
	m.must("finish on the way back", m.to.Finish(m.ctx, m.q, tombstoneTTL))
	m.must("done on the way back", m.from.Done(m.ctx, m.q))
	m.sameMessages("back on the source", listAll(m.src, m.q), before)
	posted := m.src.post(m.q, "c", 1, time.Hour)
	if got := messageIDs(listAll(m.src, m.q)); !equalStrings(got, append(append([]string{}, ids...), posted...)) {
		m.t.Errorf("source after the way back = %v", got)
	}
	_, err = m.dst.d.Messages().Get(m.ctx, m.q, ids[0])
	if to, ok := storage.MovedTo(err); !ok || to != "pool-back" {
		m.t.Errorf("the first target after the way back answers %v, want Moved(pool-back)", err)
	}
}

// testDeadLetterIntoMoved claims with a dead-letter policy whose queue has
// moved away: the exhausted message stays and is claimed, rather than
// being stranded under the tombstone.
func testDeadLetterIntoMoved(m *menv) {
	m.src.post(m.q, "c", 1, time.Hour)
	m.seal()
	m.moveAll(10)
	m.must("finish", m.from.Finish(m.ctx, m.q, tombstoneTTL))
	work := m.src.queue("work")
	ids := m.src.post(work, "c", 1, time.Hour)
	dl := &storage.DeadLetter{MaxClaimCount: 1, Queue: m.q.Name}
	c := m.src.claim(work, 1, time.Minute, 0)
	m.must("release", m.src.d.Claims().Delete(m.ctx, work, c.ID))
	c, err := m.src.d.Claims().Create(m.ctx, work, storage.ClaimOptions{TTL: time.Minute, Limit: 1, DeadLetter: dl})
	m.must("claim with the policy", err)
	if !equalStrings(messageIDs(c.Messages), ids) {
		m.t.Errorf("claim took %v, want the exhausted message %v kept while its dead-letter queue moved away", messageIDs(c.Messages), ids)
	}
	_, err = m.src.d.Messages().Get(m.ctx, m.q, ids[0])
	m.wantMoved("the moved dead-letter queue", err)
}
