package storagetest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
)

// RunModel is the differential test: random sequences of operations (posts
// with ttl and delay, claims with and without dead-letter policies, claim
// renewals and releases, deletes with and without claim ids, pops, reads,
// listings with every filter, metadata updates, queue create, purge and
// delete, clock advances) run against the driver and against the reference
// model; the first answer that differs fails the test, and rapid shrinks the
// sequence to a minimal one.
//
// The number of sequences is rapid's -rapid.checks flag; when it is not
// given, o.Checks is used, so each driver keeps `go test` short (a slow
// backend asks for fewer). `make fuzz` passes a larger -rapid.checks.
func RunModel(t *testing.T, open Opener, o ModelOptions) {
	restore := defaultChecks(o.Checks)
	defer restore()
	clock := NewClock()
	d := open(t, clock)
	runs := 0
	rapid.Check(t, func(rt *rapid.T) {
		runs++
		r := &modelRun{
			t: rt, ctx: context.Background(), d: d, clock: clock,
			project: "model-" + randomHex(6), m: newModel(clock.Now()), opts: o,
		}
		defer r.cleanup()
		actions := r.actions()
		if o.Invariant != nil {
			// rapid runs the "" action after every other one.
			actions[""] = func(t *rapid.T) {
				for _, n := range modelQueues {
					o.Invariant(t, d, r.ref(n))
				}
			}
		}
		rt.Repeat(actions)
	})
	t.Logf("model: %d generated sequences (including shrinking)", runs)
}

// ModelOptions tune RunModel to a driver.
type ModelOptions struct {
	// Checks is the number of sequences when -rapid.checks is not given.
	Checks int
	// PlacedDeadLetters: the driver keeps a dead-letter queue on its
	// source queue's backend and refuses (Invalid) a policy naming a queue
	// already placed elsewhere (the pooled driver). Such a claim must
	// change nothing.
	PlacedDeadLetters bool
	// Invariant, when set, checks what the driver keeps for a queue of
	// the run (its own layout, which the model does not see) after every
	// action.
	Invariant func(t *rapid.T, d storage.Driver, q storage.QueueRef)
}

var checksFlag struct {
	once sync.Once
	set  bool
}

// defaultChecks sets -rapid.checks to n unless the command line set it.
func defaultChecks(n int) func() {
	checksFlag.once.Do(func() {
		flag.Visit(func(f *flag.Flag) { checksFlag.set = checksFlag.set || f.Name == "rapid.checks" })
	})
	f := flag.Lookup("rapid.checks")
	if checksFlag.set || f == nil || n <= 0 {
		return func() {}
	}
	old := f.Value.String()
	_ = f.Value.Set(strconv.Itoa(n))
	return func() { _ = f.Value.Set(old) }
}

// modelRun is one generated sequence: a fresh project on the shared driver.
type modelRun struct {
	t       *rapid.T
	ctx     context.Context
	d       storage.Driver
	clock   *Clock
	project string
	m       *model
	opts    ModelOptions
	ids     []string // every message id handed out, gone ones included
	claims  []string // every claim id handed out
	bodies  int
}

var modelQueues = []string{"a", "b"}

func (r *modelRun) ref(name string) storage.QueueRef {
	return storage.QueueRef{Project: r.project, Name: name}
}

func (r *modelRun) cleanup() {
	for _, n := range modelQueues {
		_ = r.d.Queues().Delete(r.ctx, r.ref(n))
	}
}

func (r *modelRun) fail(format string, args ...any) {
	r.t.Fatalf(format, args...)
}

var (
	genQueue  = rapid.SampledFrom(modelQueues)
	genClient = rapid.SampledFrom([]string{"c1", "c2"})
	genTTL    = rapid.SampledFrom([]time.Duration{60 * time.Second, 90 * time.Second, 300 * time.Second})
	genDelay  = rapid.SampledFrom([]time.Duration{0, 0, 20 * time.Second})
	genCTTL   = rapid.SampledFrom([]time.Duration{30 * time.Second, 60 * time.Second})
	genGrace  = rapid.SampledFrom([]time.Duration{0, 30 * time.Second})
	genStep   = rapid.SampledFrom([]time.Duration{time.Second, 10 * time.Second, 30 * time.Second, 61 * time.Second, 5 * time.Minute})
	genKey    = rapid.SampledFrom([]string{"k1", "k2", "_max_claim_count"})
)

// pick draws one of list, or "" from an empty list.
func pick(t *rapid.T, list []string, label string) string {
	if len(list) == 0 {
		return ""
	}
	return rapid.SampledFrom(list).Draw(t, label)
}

// genPolicy draws a dead-letter policy for a claim on queue name.
func genPolicy(t *rapid.T, name string) *storage.DeadLetter {
	switch rapid.IntRange(0, 4).Draw(t, "policy") {
	case 1:
		return &storage.DeadLetter{MaxClaimCount: 1, Queue: "b"}
	case 2:
		return &storage.DeadLetter{MaxClaimCount: 2, Queue: "b", TTL: 90 * time.Second}
	case 3:
		return &storage.DeadLetter{MaxClaimCount: 1, Queue: name}
	case 4:
		return &storage.DeadLetter{MaxClaimCount: 1} // no queue: no policy
	}
	return nil
}

func (r *modelRun) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"post":         r.post,
		"claim":        r.claim,
		"claimGet":     r.claimGet,
		"claimUpdate":  r.claimUpdate,
		"claimRelease": r.claimRelease,
		"delete":       r.deleteMessage,
		"deleteMany":   r.deleteMany,
		"pop":          r.pop,
		"get":          r.get,
		"getMany":      r.getMany,
		"list":         r.list,
		"stats":        r.stats,
		"create":       r.create,
		"metaUpdate":   r.metaUpdate,
		"metaGet":      r.metaGet,
		"purge":        r.purge,
		"deleteQueue":  r.deleteQueue,
		"advance":      r.advance,
	}
}

func (r *modelRun) post(t *rapid.T) {
	q, client := genQueue.Draw(t, "queue"), genClient.Draw(t, "client")
	n := rapid.IntRange(1, 3).Draw(t, "n")
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		r.bodies++
		msgs[i] = storage.NewMessage{TTL: genTTL.Draw(t, "ttl"), Delay: genDelay.Draw(t, "delay"), Body: json.RawMessage(fmt.Sprintf(`"m%d"`, r.bodies))}
	}
	ids, err := r.d.Messages().Post(r.ctx, r.ref(q), client, msgs)
	if err != nil || len(ids) != n {
		r.fail("post %d to %s: ids %v, error %v", n, q, ids, err)
	}
	r.ids = append(r.ids, ids...)
	r.m.post(q, client, ids, msgs)
}

func (r *modelRun) claim(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	o := storage.ClaimOptions{Limit: rapid.IntRange(1, 4).Draw(t, "limit"), TTL: genCTTL.Draw(t, "ttl"), Grace: genGrace.Draw(t, "grace"), DeadLetter: genPolicy(t, q)}
	got, err := r.d.Claims().Create(r.ctx, r.ref(q), o)
	if r.opts.PlacedDeadLetters && storage.Is(err, storage.Invalid) && o.DeadLetter.Active() && o.DeadLetter.Queue != q {
		return
	}
	if err != nil {
		r.fail("claim %s %+v: %v", q, o, err)
	}
	if got.ID != "" {
		r.claims = append(r.claims, got.ID)
	}
	want := r.m.claim(q, o, got.ID)
	r.sameClaim("claim "+q, got, want)
}

func (r *modelRun) claimGet(t *rapid.T) {
	q, id := genQueue.Draw(t, "queue"), pick(t, r.claims, "claim")
	got, err := r.d.Claims().Get(r.ctx, r.ref(q), id)
	want, wantKind := r.m.claimGet(q, id)
	r.sameKind("claim get", err, wantKind)
	if wantKind == nil {
		r.sameClaim("claim get", got, want)
	}
}

func (r *modelRun) claimUpdate(t *rapid.T) {
	q, id := genQueue.Draw(t, "queue"), pick(t, r.claims, "claim")
	ttl, grace := genCTTL.Draw(t, "ttl"), genGrace.Draw(t, "grace")
	err := r.d.Claims().Update(r.ctx, r.ref(q), id, ttl, grace)
	r.sameKind("claim update", err, r.m.claimUpdate(q, id, ttl, grace))
}

func (r *modelRun) claimRelease(t *rapid.T) {
	q, id := genQueue.Draw(t, "queue"), pick(t, r.claims, "claim")
	if err := r.d.Claims().Delete(r.ctx, r.ref(q), id); err != nil {
		r.fail("claim release: %v", err)
	}
	r.m.claimRelease(q, id)
}

// genClaimID draws no claim id, one handed out, or one never handed out.
func (r *modelRun) genClaimID(t *rapid.T) string {
	switch rapid.IntRange(0, 2).Draw(t, "with claim") {
	case 1:
		return pick(t, r.claims, "claim id")
	case 2:
		return "00000000-0000-4000-8000-000000000000"
	}
	return ""
}

func (r *modelRun) deleteMessage(t *rapid.T) {
	q, id := genQueue.Draw(t, "queue"), pick(t, r.ids, "id")
	if id == "" {
		return
	}
	cid := r.genClaimID(t)
	err := r.d.Messages().Delete(r.ctx, r.ref(q), id, cid)
	r.sameKind(fmt.Sprintf("delete %s claim %q", id, cid), err, r.m.deleteMessage(q, id, cid))
}

func (r *modelRun) deleteMany(t *rapid.T) {
	if len(r.ids) == 0 {
		return
	}
	q := genQueue.Draw(t, "queue")
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(r.ids), 1, 3, rapid.ID[string]).Draw(t, "ids")
	cid := r.genClaimID(t)
	if err := r.d.Messages().DeleteMany(r.ctx, r.ref(q), ids, cid); err != nil {
		r.fail("delete many: %v", err)
	}
	r.m.deleteMany(q, ids, cid)
}

func (r *modelRun) pop(t *rapid.T) {
	q, limit := genQueue.Draw(t, "queue"), rapid.IntRange(1, 3).Draw(t, "limit")
	got, err := r.d.Messages().Pop(r.ctx, r.ref(q), limit)
	if err != nil {
		r.fail("pop: %v", err)
	}
	r.sameMessages("pop "+q, got, r.m.pop(q, limit))
}

func (r *modelRun) get(t *rapid.T) {
	q, id := genQueue.Draw(t, "queue"), pick(t, r.ids, "id")
	if id == "" {
		return
	}
	got, err := r.d.Messages().Get(r.ctx, r.ref(q), id)
	want, wantKind := r.m.get(q, id)
	r.sameKind("get "+id, err, wantKind)
	if wantKind == nil {
		r.sameMessages("get "+id, []storage.Message{got}, []storage.Message{want})
	}
}

func (r *modelRun) getMany(t *rapid.T) {
	if len(r.ids) == 0 {
		return
	}
	q := genQueue.Draw(t, "queue")
	ids := rapid.SliceOfNDistinct(rapid.SampledFrom(r.ids), 1, 4, rapid.ID[string]).Draw(t, "ids")
	got, err := r.d.Messages().GetMany(r.ctx, r.ref(q), ids)
	if err != nil {
		r.fail("get many: %v", err)
	}
	var want []storage.Message
	for _, id := range ids {
		if m, k := r.m.get(q, id); k == nil {
			want = append(want, m)
		}
	}
	// GetMany promises the live messages among ids, in no stated order.
	sortByID(got)
	sortByID(want)
	r.sameMessages(fmt.Sprintf("get many %v", ids), got, want)
}

func sortByID(msgs []storage.Message) {
	sort.Slice(msgs, func(i, j int) bool { return msgs[i].ID < msgs[j].ID })
}

// list walks every page; page boundaries are the driver's business, what
// the walk returns is not.
func (r *modelRun) list(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	o := storage.ListMessagesOptions{
		Limit: rapid.IntRange(1, 4).Draw(t, "limit"), ClientID: genClient.Draw(t, "client"),
		Echo: rapid.Bool().Draw(t, "echo"), IncludeClaimed: rapid.Bool().Draw(t, "claimed"), IncludeDelayed: rapid.Bool().Draw(t, "delayed"),
	}
	var got []storage.Message
	for page := 0; ; page++ {
		if page > len(r.ids)+2 {
			r.fail("list %s %+v: no end after %d pages", q, o, page)
		}
		msgs, next, err := r.d.Messages().List(r.ctx, r.ref(q), o)
		if err != nil {
			r.fail("list %s %+v: %v", q, o, err)
		}
		got = append(got, msgs...)
		if next == "" {
			break
		}
		o.Marker = next
	}
	o.Marker = ""
	r.sameMessages(fmt.Sprintf("list %s %+v", q, o), got, r.m.list(q, o))
}

func (r *modelRun) stats(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	st, err := r.d.Queues().Stats(r.ctx, r.ref(q))
	if err != nil {
		r.fail("stats: %v", err)
	}
	total, claimed := r.m.stats(q)
	if st.Total != total || st.Claimed != claimed || st.Free != total-claimed {
		r.fail("stats %s = %+v, model total %d claimed %d", q, st, total, claimed)
	}
	// Oldest and newest by posting order.
	if all := r.m.list(q, storage.ListMessagesOptions{Echo: true, IncludeClaimed: true, IncludeDelayed: true}); len(all) > 0 {
		if st.Oldest == nil || st.Newest == nil {
			r.fail("stats %s of %d messages has no oldest/newest", q, len(all))
		}
		r.sameMessages("stats oldest/newest "+q, []storage.Message{*st.Oldest, *st.Newest}, []storage.Message{all[0], all[len(all)-1]})
	}
}

func (r *modelRun) create(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	meta := storage.Metadata{"k1": rapid.SampledFrom([]string{"x", "y"}).Draw(t, "value")}
	got, err := r.d.Queues().Create(r.ctx, r.ref(q), meta)
	if err != nil {
		r.fail("create %s: %v", q, err)
	}
	if want := r.m.create(q, meta); got != want {
		r.fail("create %s: created %v, model %v", q, got, want)
	}
	r.sameMeta(q)
}

func (r *modelRun) metaUpdate(t *rapid.T) {
	q, key := genQueue.Draw(t, "queue"), genKey.Draw(t, "key")
	remove := rapid.Bool().Draw(t, "remove")
	value := rapid.SampledFrom([]string{"1", "2"}).Draw(t, "value")
	change := func(m storage.Metadata) storage.Metadata {
		if remove {
			delete(m, key)
		} else {
			m[key] = value
		}
		return m
	}
	got, err := r.d.Queues().UpdateMetadata(r.ctx, r.ref(q), func(m storage.Metadata) (storage.Metadata, error) { return change(m), nil })
	want, wantKind := r.m.updateMetadata(q, change)
	r.sameKind("metadata update "+q, err, wantKind)
	if wantKind == nil && fmt.Sprint(got) != fmt.Sprint(want) {
		r.fail("metadata update %s returned %v, model %v", q, got, want)
	}
}

func (r *modelRun) metaGet(t *rapid.T) { r.sameMeta(genQueue.Draw(t, "queue")) }

func (r *modelRun) sameMeta(q string) {
	got, err := r.d.Queues().GetMetadata(r.ctx, r.ref(q))
	if err != nil {
		r.fail("metadata of %s: %v", q, err)
	}
	if want := r.m.metadata(q); fmt.Sprint(got) != fmt.Sprint(want) {
		r.fail("metadata of %s = %v, model %v", q, got, want)
	}
	ok, err := r.d.Queues().Exists(r.ctx, r.ref(q))
	if err != nil || ok != r.m.queue(q).exists {
		r.fail("exists %s = %v (%v), model %v", q, ok, err, r.m.queue(q).exists)
	}
}

func (r *modelRun) purge(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	if err := r.d.Queues().Purge(r.ctx, r.ref(q)); err != nil {
		r.fail("purge: %v", err)
	}
	r.m.purge(q)
}

func (r *modelRun) deleteQueue(t *rapid.T) {
	q := genQueue.Draw(t, "queue")
	if err := r.d.Queues().Delete(r.ctx, r.ref(q)); err != nil {
		r.fail("delete queue: %v", err)
	}
	r.m.deleteQueue(q)
	r.sameMeta(q)
}

func (r *modelRun) advance(t *rapid.T) {
	d := genStep.Draw(t, "step")
	r.clock.Advance(d)
	r.m.advance(d)
}

func (r *modelRun) sameKind(what string, err error, want *storage.Kind) {
	switch {
	case want == nil && err != nil:
		r.fail("%s: error %v, model: none", what, err)
	case want != nil && !storage.Is(err, *want):
		r.fail("%s: error %v, model: kind %v", what, err, *want)
	}
}

func (r *modelRun) sameClaim(what string, got, want storage.Claim) {
	if got.ID != want.ID || (want.ID != "" && (got.TTL != want.TTL || !got.Created.Equal(want.Created))) {
		r.fail("%s: claim %s ttl %v created %v, model %s ttl %v created %v",
			what, got.ID, got.TTL, got.Created, want.ID, want.TTL, want.Created)
	}
	r.sameMessages(what, got.Messages, want.Messages)
}

// sameMessages compares what a client can see of each message.
func (r *modelRun) sameMessages(what string, got, want []storage.Message) {
	if len(got) != len(want) {
		r.fail("%s: %d messages %v, model %d %v", what, len(got), describe(got), len(want), describe(want))
	}
	for i := range got {
		if g, w := describe(got[i:i+1]), describe(want[i:i+1]); g != w {
			r.fail("%s: message %d is %s, model %s", what, i, g, w)
		}
	}
}

func describe(msgs []storage.Message) string {
	s := "["
	for i, m := range msgs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{%s body=%s client=%s created=%d ttl=%v claims=%d", m.ID, m.Body, m.ClientID, m.Created.UnixMilli(), m.TTL, m.ClaimCount)
		if m.ClaimID != "" {
			s += fmt.Sprintf(" held=%s until=%d", m.ClaimID, m.ClaimExpires.UnixMilli())
		}
		s += "}"
	}
	return s + "]"
}
