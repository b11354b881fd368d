package storagetest

import (
	"encoding/json"
	"reflect"
	"sync"
	"time"

	"sluice.dev/server/internal/storage"
)

func testSeal(m *menv) {
	ms, cs := m.src.d.Messages(), m.src.d.Claims()
	meta := storage.Metadata{"_default_message_ttl": float64(3600), "owner": "x"}
	m.must("set metadata", m.src.d.Queues().SetMetadata(m.ctx, m.q, meta))
	ids := m.src.post(m.q, "c", 4, time.Hour)
	c := m.src.claim(m.q, 1, time.Minute, time.Minute)

	s1, err := m.from.Seal(m.ctx, m.q, m.target)
	m.must("seal", err)
	if !s1.Exists || s1.Seq < 4 || !sameJSON(s1.Metadata, meta) {
		m.t.Errorf("seal = %+v, want exists, seq >= 4, metadata %v", s1, meta)
	}
	s2, err := m.from.Seal(m.ctx, m.q, m.target)
	m.must("seal again", err)
	if !reflect.DeepEqual(s1, s2) {
		m.t.Errorf("sealing twice: %+v then %+v", s1, s2)
	}
	_, err = m.from.Seal(m.ctx, m.q, m.target+"-other")
	m.src.wantKind("seal to another target", err, kind(storage.Conflict))

	_, err = ms.Post(m.ctx, m.q, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte("1")}})
	m.wantMoved("post on a sealed queue", err)
	if st := m.src.stats(m.q); st.Total != 4 {
		m.t.Errorf("refused post changed the queue: %+v", st)
	}
	// Everything but posting keeps working on the messages still here.
	if _, err := ms.Get(m.ctx, m.q, ids[3]); err != nil {
		m.t.Errorf("get on a sealed queue: %v", err)
	}
	c2 := m.src.claim(m.q, 1, time.Minute, 0)
	if !equalStrings(messageIDs(c2.Messages), ids[1:2]) {
		m.t.Errorf("claim on a sealed queue took %v, want %v", messageIDs(c2.Messages), ids[1:2])
	}
	m.must("claim update", cs.Update(m.ctx, m.q, c.ID, 2*time.Minute, 0))
	m.must("delete claimed", ms.Delete(m.ctx, m.q, ids[0], c.ID))
	m.must("claim delete", cs.Delete(m.ctx, m.q, c2.ID))
	m.must("delete free", ms.Delete(m.ctx, m.q, ids[2], ""))
	if got := messageIDs(listAll(m.src, m.q)); !equalStrings(got, []string{ids[1], ids[3]}) {
		m.t.Errorf("sealed queue lists %v, want %v", got, []string{ids[1], ids[3]})
	}

	// A queue that does not exist can be sealed too (a replica may still
	// post to it through a stale placement).
	absent := m.src.queue("absent")
	s, err := m.from.Seal(m.ctx, absent, m.target)
	m.must("seal absent", err)
	if s.Exists || s.Seq != 0 {
		m.t.Errorf("seal of an absent queue = %+v", s)
	}
	_, err = ms.Post(m.ctx, absent, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte("1")}})
	m.wantMoved("post on a sealed absent queue", err)
}

// testStorageID: each side names its database with one id, call after
// call, and two databases differ.
func testStorageID(m *menv) {
	ids := map[string]string{}
	for side, ms := range map[string]storage.MigrationStore{"source": m.from, "target": m.to} {
		first, err := ms.StorageID(m.ctx)
		m.must(side+" storage id", err)
		again, err := ms.StorageID(m.ctx)
		m.must(side+" storage id again", err)
		if first == "" || first != again {
			m.t.Errorf("%s storage id %q, then %q: want one non-empty id", side, first, again)
		}
		ids[side] = first
	}
	if ids["source"] == ids["target"] {
		m.t.Errorf("source and target, two databases, share storage id %q", ids["source"])
	}
}

func testUnseal(m *menv) {
	ms := m.src.d.Messages()
	m.src.post(m.q, "c", 3, time.Hour)
	m.must("unseal an unsealed queue", m.from.Unseal(m.ctx, m.q))
	m.seal()
	m.must("unseal", m.from.Unseal(m.ctx, m.q))
	m.must("unseal twice", m.from.Unseal(m.ctx, m.q))
	m.src.post(m.q, "c", 1, time.Hour)

	other := m.src.queue("unsealed")
	m.src.post(other, "c", 1, time.Hour)
	_, err := m.from.Take(m.ctx, other, 5)
	m.src.wantKind("take from a queue that is not sealed", err, kind(storage.Conflict))

	m.seal()
	_, err = m.from.Take(m.ctx, m.q, 0)
	m.src.wantKind("take with limit 0", err, kind(storage.Invalid))
	m.must("unseal after a refused take", m.from.Unseal(m.ctx, m.q))
	m.seal()
	m.take(1)
	m.src.wantKind("unseal after a take", m.from.Unseal(m.ctx, m.q), kind(storage.Conflict))
	_, err = ms.Post(m.ctx, m.q, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte("1")}})
	m.wantMoved("post after a refused unseal", err)
}

func testTransit(m *menv) {
	ms, cs := m.src.d.Messages(), m.src.d.Claims()
	ids := m.src.post(m.q, "c", 6, time.Hour)
	c := m.src.claim(m.q, 2, time.Minute, time.Minute)
	m.seal()
	before := m.view()

	b := m.take(2)
	if got, _ := batchIDs(b); !sameSet(got, ids[4:]) || len(b.Claims) != 0 {
		m.t.Fatalf("take(2) = %v claims %d, want the newest %v", got, len(b.Claims), ids[4:])
	}
	_, err := ms.Get(m.ctx, m.q, ids[5])
	m.wantMoving("get in transit", err)
	m.wantMoving("delete in transit", ms.Delete(m.ctx, m.q, ids[5], ""))
	_, err = ms.GetMany(m.ctx, m.q, []string{ids[2], ids[5]})
	m.wantMoving("get many with one in transit", err)
	m.wantMoving("delete many with one in transit", ms.DeleteMany(m.ctx, m.q, []string{ids[2], ids[5]}, ""))
	// A listing goes on into the batch, which sorts after what is left:
	// a caller that goes on to the target next would otherwise skip it.
	if got := messageIDs(listAll(m.src, m.q)); !equalStrings(got, ids) {
		m.t.Errorf("list in transit = %v, want %v", got, ids)
	}
	for limit := 1; limit <= 4; limit++ {
		if got := messageIDs(listPaged(m.src, m.q, func() int { return limit })); !equalStrings(got, ids) {
			m.t.Errorf("list in transit in pages of %d = %v, want %v", limit, got, ids)
		}
	}
	// Stats count the batch too, as listings show it: a queue's depth does
	// not dip while it moves.
	if st := m.src.stats(m.q); st.Total != 6 || st.Claimed != 2 || st.Free != 4 ||
		st.Oldest == nil || st.Oldest.ID != ids[0] || st.Newest == nil || st.Newest.ID != ids[5] {
		m.t.Errorf("stats in transit = %+v, want 6 of which 2 claimed, %s to %s", st, ids[0], ids[5])
	}
	if _, err := ms.Get(m.ctx, m.q, ids[2]); err != nil {
		m.t.Errorf("get of a message not in transit: %v", err)
	}
	if _, err := cs.Get(m.ctx, m.q, c.ID); err != nil {
		m.t.Errorf("get of a claim not in transit: %v", err)
	}
	again := m.take(5)
	m.sameBatch("take while a batch is in transit", again, b)
	inTransit, err := m.from.InTransit(m.ctx, m.q)
	m.must("in transit", err)
	m.sameBatch("in transit", inTransit, b)
	m.must("import", m.to.Import(m.ctx, m.q, b))
	m.must("settle", m.from.Settle(m.ctx, m.q, b))
	if inTransit, _ := m.from.InTransit(m.ctx, m.q); !inTransit.Empty() {
		m.t.Errorf("in transit after settle: %+v", inTransit)
	}
	m.step(2)

	// The claim comes whole, beyond the limit, with its messages.
	b = m.take(1)
	got, claims := batchIDs(b)
	if !sameSet(got, ids[:2]) || !equalStrings(claims, []string{c.ID}) {
		m.t.Fatalf("take(1) = %v claims %v, want %v with claim %s", got, claims, ids[:2], c.ID)
	}
	_, err = cs.Get(m.ctx, m.q, c.ID)
	m.wantMoving("claim get in transit", err)
	// The listing's filters apply to the batch as to the rest.
	page, _, err := ms.List(m.ctx, m.q, storage.ListMessagesOptions{Limit: 10, Echo: true, IncludeClaimed: false})
	m.must("list unclaimed in transit", err)
	if got := messageIDs(page); len(got) != 0 {
		m.t.Errorf("list without claimed messages in transit = %v, want none (claim %s holds %v)", got, c.ID, ids[:2])
	}
	if got := messageIDs(listAll(m.src, m.q)); !equalStrings(got, ids[:2]) {
		m.t.Errorf("list with claimed messages in transit = %v, want %v", got, ids[:2])
	}
	if st := m.src.stats(m.q); st.Total != 2 || st.Claimed != 2 || st.Oldest == nil || st.Oldest.ID != ids[0] || st.Newest == nil || st.Newest.ID != ids[1] {
		m.t.Errorf("stats with only the batch in transit = %+v, want 2 claimed, %s to %s", st, ids[0], ids[1])
	}
	m.wantMoving("claim update in transit", cs.Update(m.ctx, m.q, c.ID, time.Minute, 0))
	m.wantMoving("claim delete in transit", cs.Delete(m.ctx, m.q, c.ID))
	m.must("import", m.to.Import(m.ctx, m.q, b))
	m.must("settle", m.from.Settle(m.ctx, m.q, b))
	if b := m.take(3); !b.Empty() {
		m.t.Errorf("take from an empty source = %+v", b)
	}
	m.sameMessages("after the move", m.view(), before)
	tc, err := m.dst.d.Claims().Get(m.ctx, m.q, c.ID)
	m.must("claim get on target", err)
	if !sameSet(messageIDs(tc.Messages), ids[:2]) || tc.TTL != c.TTL || !tc.Created.Equal(c.Created) {
		m.t.Errorf("claim on target = %+v, want %+v", tc, c)
	}
}

func testSettled(m *menv) {
	ms, cs := m.src.d.Messages(), m.src.d.Claims()
	ids := m.src.post(m.q, "c", 4, time.Hour)
	c := m.src.claim(m.q, 1, time.Minute, time.Minute)
	m.seal()
	m.step(2)
	_, err := ms.Get(m.ctx, m.q, ids[3])
	m.wantMoved("get settled", err)
	m.wantMoved("delete settled", ms.Delete(m.ctx, m.q, ids[3], ""))
	if _, err := ms.Get(m.ctx, m.q, ids[1]); err != nil {
		m.t.Errorf("get of a message still here: %v", err)
	}
	// Acts on what is here, then sends the caller on for the rest.
	m.wantMoved("delete many, one moved", ms.DeleteMany(m.ctx, m.q, []string{ids[1], ids[3]}, ""))
	if _, err := ms.Get(m.ctx, m.q, ids[1]); !storage.Is(err, storage.NotFound) {
		m.t.Errorf("delete many left the message here: %v", err)
	}
	got, err := ms.GetMany(m.ctx, m.q, []string{ids[0], ids[2], ids[3]})
	m.must("get many", err)
	if !equalStrings(messageIDs(got), ids[:1]) {
		m.t.Errorf("get many = %v, want only the one still here %v", messageIDs(got), ids[:1])
	}
	m.moveAll(2)
	for _, id := range ids {
		_, err := ms.Get(m.ctx, m.q, id)
		if id == ids[1] {
			continue // deleted before it moved
		}
		m.wantMoved("get settled "+id, err)
	}
	_, err = cs.Get(m.ctx, m.q, c.ID)
	m.wantMoved("claim get settled", err)
	m.wantMoved("claim update settled", cs.Update(m.ctx, m.q, c.ID, time.Minute, 0))
	m.wantMoved("claim delete settled", cs.Delete(m.ctx, m.q, c.ID))
	m.must("claim delete on target", m.dst.d.Claims().Delete(m.ctx, m.q, c.ID))
	if got := messageIDs(listAll(m.dst, m.q)); !equalStrings(got, []string{ids[0], ids[2], ids[3]}) {
		m.t.Errorf("target holds %v", got)
	}
}

func testImportIdempotent(m *menv) {
	ids := m.src.post(m.q, "c", 3, time.Hour)
	c := m.src.claim(m.q, 1, time.Minute, 0)
	m.seal()
	before := m.view()
	b := m.take(10)
	m.must("import", m.to.Import(m.ctx, m.q, b))
	m.must("import again", m.to.Import(m.ctx, m.q, b))
	m.sameMessages("imported twice", listAll(m.dst, m.q), before)

	dms, dcs := m.dst.d.Messages(), m.dst.d.Claims()
	m.must("delete on target", dms.Delete(m.ctx, m.q, ids[1], ""))
	m.must("claim delete on target", dcs.Delete(m.ctx, m.q, c.ID))
	m.must("import after delete", m.to.Import(m.ctx, m.q, b))
	got := listAll(m.dst, m.q)
	if !equalStrings(messageIDs(got), []string{ids[0], ids[2]}) || got[0].ClaimID != "" {
		m.t.Errorf("re-import resurrected: %v (first claimed by %q)", messageIDs(got), got[0].ClaimID)
	}
	if _, err := dcs.Get(m.ctx, m.q, c.ID); !storage.Is(err, storage.NotFound) {
		m.t.Errorf("re-import resurrected the claim: %v", err)
	}
	m.must("settle", m.from.Settle(m.ctx, m.q, b))
	m.must("done", m.to.Done(m.ctx, m.q))
	m.must("done twice", m.to.Done(m.ctx, m.q))
}

func testResume(m *menv) {
	m.src.post(m.q, "c", 10, time.Hour)
	m.src.claim(m.q, 2, time.Minute, 0)
	m.src.claim(m.q, 3, 2*time.Minute, 0)
	m.seal()
	before := m.view()
	b := m.take(3)
	// The mover crashes before importing: a new one finds the batch.
	again, err := m.from.InTransit(m.ctx, m.q)
	m.must("in transit", err)
	m.sameBatch("in transit after a crash", again, b)
	m.sameBatch("take after a crash", m.take(7), b)
	m.must("import", m.to.Import(m.ctx, m.q, again))
	// It crashes again before settling: the next imports the batch again.
	again, err = m.from.InTransit(m.ctx, m.q)
	m.must("in transit", err)
	m.sameBatch("in transit after import", again, b)
	m.must("import again", m.to.Import(m.ctx, m.q, again))
	m.must("settle", m.from.Settle(m.ctx, m.q, again))
	// And once more after settling: settling again changes nothing.
	m.must("settle again", m.from.Settle(m.ctx, m.q, b))
	if again, _ := m.from.InTransit(m.ctx, m.q); !again.Empty() {
		m.t.Errorf("in transit after settle = %+v", again)
	}
	m.moveAll(4)
	m.sameMessages("after a resumed move", m.view(), before)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	n := map[string]int{}
	for _, s := range a {
		n[s]++
	}
	for _, s := range b {
		n[s]--
	}
	for _, v := range n {
		if v != 0 {
			return false
		}
	}
	return true
}

// sameJSON reports whether a and b encode alike (drivers decode numbers
// in metadata as they choose).
func sameJSON(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// testSealRace seals while posters post until refused: every acknowledged
// post is on the source (the seal covers it), and once a poster was
// refused its later posts are refused too.
func testSealRace(m *menv) {
	const posters, tries, after = 4, 20000, 3
	var mu sync.Mutex
	acked := map[string]bool{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for p := 0; p < posters; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			refused, left := false, after
			for i := 0; i < tries && left > 0; i++ {
				ids, err := m.src.d.Messages().Post(m.ctx, m.q, "c", []storage.NewMessage{{TTL: time.Hour, Body: []byte("1")}})
				switch _, moved := storage.MovedTo(err); {
				case moved:
					refused = true
					left--
				case err != nil:
					m.t.Errorf("post: %v", err)
					return
				case refused:
					m.t.Errorf("post accepted after a refusal: %v", ids)
				default:
					mu.Lock()
					acked[ids[0]] = true
					mu.Unlock()
				}
			}
		}()
	}
	close(start)
	// Seal once some posts landed, so both outcomes occur (bounded wait).
	for i := 0; i < 500; i++ {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= posters*5 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	s, err := m.from.Seal(m.ctx, m.q, m.target)
	m.must("seal", err)
	wg.Wait()
	got := messageIDs(listAll(m.src, m.q))
	m.t.Logf("%d posts acknowledged before the seal, the rest refused", len(acked))
	if len(got) != len(acked) || int64(len(got)) > s.Seq {
		m.t.Fatalf("source holds %d messages, %d acknowledged, seal saw seq %d", len(got), len(acked), s.Seq)
	}
	for _, id := range got {
		if !acked[id] {
			m.t.Errorf("message %s on the source was never acknowledged", id)
		}
	}
}
