package storagetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

// RunMigration runs the driver-level suite for moving a queue
// (storage.MigrationStore, docs/pooling.md "Moving a queue") with a source
// and a target backend. The two openers may be of one driver kind or of two;
// they must return separate backends (two memory drivers, two Redis
// databases, ...), because the same queue lives on both. Both drivers share
// the case's clock and sit behind the instrumentation wrapper, which must
// pass storage.Migrator through.
//
// The rules a driver follows, beyond the interface's comments:
//   - while a batch is in transit, a claim or pop that finds no free
//     message answers Moving; one that finds some may take them (what is
//     left sorts before the batch) or answer Moving too;
//   - calls with many ids (GetMany, DeleteMany) answer Moving when any id
//     is in transit; otherwise they act on the ids still here, and
//     DeleteMany answers Moved when any id was moved, so the caller
//     repeats it on the target;
//   - Seal to another target than the sealed one, Take on a queue that is
//     not sealed, Finish while live messages or a batch in transit remain,
//     and Unseal after a Take answer Conflict;
//   - after Finish, until the tombstone lapses, every message, claim and
//     queue call except List answers Moved; a queue Delete then removes
//     whatever is left, the tombstone included.
func RunMigration(t *testing.T, source, target Opener) {
	for _, tc := range migrationCases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock()
			suffix := randomHex(4)
			ctx := context.Background()
			m := &menv{
				t:      t,
				ctx:    ctx,
				clock:  clock,
				src:    newEnv(t, ctx, clock, source(t, clock), suffix),
				dst:    newEnv(t, ctx, clock, target(t, clock), suffix),
				target: "pool-" + suffix,
			}
			m.from, m.to = migrations(t, m.src.d), migrations(t, m.dst.d)
			m.q = m.src.queue("moving")
			m.dst.queue("moving")
			defer m.teardown()
			tc.fn(m)
		})
	}
}

var migrationCases = []testCase2{
	{"Migration/SealRefusesPostsOnly", testSeal},
	{"Migration/SealRacesPosts", testSealRace},
	{"Migration/UnsealBeforeTakeOnly", testUnseal},
	{"Migration/StorageIDNamesTheDatabase", testStorageID},
	{"Migration/TransitAnswersMoving", testTransit},
	{"Migration/ClaimsBesideTransit", testClaimsBesideTransit},
	{"Migration/ClaimsRaceTake", testClaimsRaceTake},
	{"Migration/ListsRaceMove", testListsRaceMove},
	{"Migration/SettledAnswersMoved", testSettled},
	{"Migration/ImportIdempotent", testImportIdempotent},
	{"Migration/ResumeAfterCrash", testResume},
	{"Migration/FinishLeavesTombstone", testTombstone},
	{"Migration/MoveBack", testMoveBack},
	{"Migration/DeadLetterIntoMoved", testDeadLetterIntoMoved},
	{"Migration/GeneratedMoves", testGeneratedMoves},
	{"Migration/WritesRaceTake", testWritesRaceTake},
	{"Migration/DeliveriesMove", testDeliveriesMove},
	{"Migration/DeliveryCountsMove", testDeliveryCountsMove},
	{"Migration/DeliveryCountsRaceErrors", testDeliveryCountsRaceErrors},
}

// testCase2 is a migration case: it works with two backends.
type testCase2 struct {
	name string
	fn   func(m *menv)
}

// tombstoneTTL is what the cases pass to Finish; teardown waits it out.
const tombstoneTTL = time.Hour

// menv is what a migration case works with: the queue q on a source and a
// target backend sharing one clock.
type menv struct {
	t        *testing.T
	ctx      context.Context
	clock    *Clock
	src, dst *env
	from, to storage.MigrationStore
	q        storage.QueueRef
	target   string
}

func migrations(t *testing.T, d storage.Driver) storage.MigrationStore {
	mg, ok := d.(storage.Migrator)
	if !ok {
		t.Fatalf("driver %T does not implement storage.Migrator (or the wrapper hides it)", d)
	}
	return mg.Migrations()
}

// teardown lets any tombstone lapse, then deletes the queues on both sides
// and checks that nothing is left, migration records included.
func (m *menv) teardown() {
	m.clock.Advance(tombstoneTTL + time.Minute)
	m.src.teardown()
	m.dst.teardown()
}

// wantMoved fails unless err is Conflict with Moved(target) in its chain.
func (m *menv) wantMoved(what string, err error) {
	m.t.Helper()
	if to, ok := storage.MovedTo(err); !ok || to != m.target || !storage.Is(err, storage.Conflict) {
		m.t.Errorf("%s: got %v, want Conflict Moved(%s)", what, err, m.target)
	}
}

// wantMoving fails unless err is Unavailable with ErrMoving in its chain.
func (m *menv) wantMoving(what string, err error) {
	m.t.Helper()
	if !storage.Is(err, storage.Unavailable) || !errors.Is(err, storage.ErrMoving) {
		m.t.Errorf("%s: got %v, want Unavailable ErrMoving", what, err)
	}
}

func (m *menv) must(what string, err error) {
	m.t.Helper()
	if err != nil {
		m.t.Fatalf("%s: %v", what, err)
	}
}

// seal seals the source and prepares the target as the mover does.
func (m *menv) seal() storage.Sealed {
	m.t.Helper()
	s, err := m.from.Seal(m.ctx, m.q, m.target)
	m.must("seal", err)
	m.must("prepare", m.to.Prepare(m.ctx, m.q, s.Metadata, s.Seq))
	return s
}

// take takes a batch and fails on error.
func (m *menv) take(limit int) storage.Batch {
	m.t.Helper()
	b, err := m.from.Take(m.ctx, m.q, limit)
	m.must("take", err)
	return b
}

// step moves one batch (take, import, settle) and returns it.
func (m *menv) step(limit int) storage.Batch {
	m.t.Helper()
	b := m.take(limit)
	m.must("import", m.to.Import(m.ctx, m.q, b))
	m.must("settle", m.from.Settle(m.ctx, m.q, b))
	return b
}

// moveAll moves batches of limit until the source is empty.
func (m *menv) moveAll(limit int) {
	m.t.Helper()
	for i := 0; ; i++ {
		if i > 10000 {
			m.t.Fatal("move did not end after 10000 batches")
		}
		if m.step(limit).Empty() {
			return
		}
	}
}

// listAll lists every live message of q on e, oldest first, everything
// included.
func listAll(e *env, q storage.QueueRef) []storage.Message {
	e.t.Helper()
	return listPaged(e, q, func() int { return 100 })
}

// listPaged is listAll in pages of limit() messages each.
func listPaged(e *env, q storage.QueueRef, limit func() int) []storage.Message {
	e.t.Helper()
	var out []storage.Message
	marker := ""
	for i := 0; i < 10000; i++ {
		page, next, err := e.d.Messages().List(e.ctx, q, storage.ListMessagesOptions{
			Marker: marker, Limit: limit(), Echo: true, IncludeClaimed: true, IncludeDelayed: true,
		})
		if err != nil {
			e.t.Fatalf("list %v: %v", q, err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		marker = next
	}
	e.t.Fatalf("list %v: no end after 10000 pages", q)
	return nil
}

// view is the queue as a client sees it while it moves: what is left on
// the source, then what is on the target, in order.
func (m *menv) view() []storage.Message {
	m.t.Helper()
	return append(listAll(m.src, m.q), listAll(m.dst, m.q)...)
}

// pagedView is view with the source listed in pages of 1-4 messages, so
// that pages end anywhere, the batch in transit included.
func (m *menv) pagedView(rng *rand.Rand) []storage.Message {
	m.t.Helper()
	return append(listPaged(m.src, m.q, func() int { return 1 + rng.Intn(4) }), listAll(m.dst, m.q)...)
}

// sameCounts fails the case unless the source's and the target's stats
// add up to the messages of want, claimed ones apart.
func (m *menv) sameCounts(what string, want []storage.Message) {
	m.t.Helper()
	now := m.clock.Now()
	claimed, edgeClaimed, edgeFree := 0, 0, 0
	for _, msg := range want {
		if msg.ClaimID != "" {
			claimed++
		}
		if onEdge(msg, now) {
			if msg.ClaimID != "" {
				edgeClaimed++
			} else {
				edgeFree++
			}
		}
	}
	a, b := m.src.stats(m.q), m.dst.stats(m.q)
	within := func(got, want, edge int) bool { return got <= want && got >= want-edge }
	if !within(a.Total+b.Total, len(want), edgeClaimed+edgeFree) || !within(a.Claimed+b.Claimed, claimed, edgeClaimed) ||
		!within(a.Free+b.Free, len(want)-claimed, edgeFree) {
		m.t.Fatalf("%s: stats %+v and %+v, want %d messages of which %d claimed (%d of them within %v of expiry)",
			what, a, b, len(want), claimed, edgeClaimed+edgeFree, expiryEdge)
	}
}

// expiryEdge: a message this close to its expiry (in simulated time) may
// be present or gone. A backend that also keeps a wall-clock TTL (Redis
// PEXPIRE of the time left) can drop it while the simulated clock, which
// the test advances by hand, still has it alive: the test's own real time
// passes between the write and the check. A run under -race on a loaded
// machine took a message with 2 ms left.
const expiryEdge = time.Second

// Messages already expired in simulated time are not on the edge: every
// driver must hide them, whatever its wall-clock TTL says.
func onEdge(msg storage.Message, now time.Time) bool {
	left := timeLeft(msg, now)
	return left > 0 && left < expiryEdge
}

// timeLeft is how long msg has to live at now.
func timeLeft(msg storage.Message, now time.Time) time.Duration {
	return msg.Created.Add(msg.TTL).Sub(now)
}

// offEdge drops the messages on the expiry edge.
func offEdge(msgs []storage.Message, now time.Time) []storage.Message {
	var out []storage.Message
	for _, msg := range msgs {
		if !onEdge(msg, now) {
			out = append(out, msg)
		}
	}
	return out
}

// alive is what of a view is still alive at now: expired messages gone,
// lapsed claims released.
func alive(msgs []storage.Message, now time.Time) []storage.Message {
	var out []storage.Message
	for _, msg := range msgs {
		if !msg.Created.Add(msg.TTL).After(now) {
			continue
		}
		if msg.ClaimID != "" && !msg.ClaimExpires.After(now) {
			msg.ClaimID, msg.ClaimExpires = "", time.Time{}
		}
		out = append(out, msg)
	}
	return out
}

// sameMessages fails the case unless got and want hold the same messages,
// in the same order, with every attribute equal, apart from messages on
// the expiry edge.
func (m *menv) sameMessages(what string, got, want []storage.Message) {
	m.t.Helper()
	got, want = offEdge(got, m.clock.Now()), offEdge(want, m.clock.Now())
	if len(got) != len(want) {
		m.t.Fatalf("%s: %d messages %v, want %d %v (expiring in %v of simulated time)", what, len(got), messageIDs(got),
			len(want), messageIDs(want), expiringIn(want, m.clock.Now()))
	}
	for i := range want {
		if d := diffMessage(got[i], want[i]); d != "" {
			m.t.Fatalf("%s: message %d (%s): %s", what, i, want[i].ID, d)
		}
	}
}

// expiringIn lists how long each message has left at now.
func expiringIn(msgs []storage.Message, now time.Time) []time.Duration {
	out := make([]time.Duration, len(msgs))
	for i, msg := range msgs {
		out[i] = timeLeft(msg, now)
	}
	return out
}

// diffMessage names the first attribute in which a and b differ.
func diffMessage(a, b storage.Message) string {
	switch {
	case a.ID != b.ID:
		return fmt.Sprintf("id %s, want %s", a.ID, b.ID)
	case string(a.Body) != string(b.Body):
		return fmt.Sprintf("body %s, want %s", a.Body, b.Body)
	case a.TTL != b.TTL:
		return fmt.Sprintf("ttl %v, want %v", a.TTL, b.TTL)
	case !a.Created.Equal(b.Created):
		return fmt.Sprintf("created %v, want %v", a.Created, b.Created)
	case a.ClientID != b.ClientID:
		return fmt.Sprintf("client %q, want %q", a.ClientID, b.ClientID)
	case !a.DelayUntil.Equal(b.DelayUntil):
		return fmt.Sprintf("delay until %v, want %v", a.DelayUntil, b.DelayUntil)
	case a.ClaimID != b.ClaimID:
		return fmt.Sprintf("claim %q, want %q", a.ClaimID, b.ClaimID)
	case !a.ClaimExpires.Equal(b.ClaimExpires):
		return fmt.Sprintf("claim expires %v, want %v", a.ClaimExpires, b.ClaimExpires)
	case a.ClaimCount != b.ClaimCount:
		return fmt.Sprintf("claim count %d, want %d", a.ClaimCount, b.ClaimCount)
	}
	return ""
}

// batchIDs lists a batch's message ids and claim ids.
func batchIDs(b storage.Batch) (msgs, claims []string) {
	for _, mm := range b.Messages {
		msgs = append(msgs, mm.ID)
	}
	for _, c := range b.Claims {
		claims = append(claims, c.ID)
	}
	return msgs, claims
}

// sameBatch fails unless a and b move the same messages and claims.
func (m *menv) sameBatch(what string, a, b storage.Batch) {
	m.t.Helper()
	// Order within a batch carries no meaning (each message has its Seq).
	am, ac := batchIDs(a)
	bm, bc := batchIDs(b)
	for _, l := range [][]string{am, ac, bm, bc} {
		sort.Strings(l)
	}
	if !equalStrings(am, bm) || !equalStrings(ac, bc) {
		m.t.Fatalf("%s: batch %v %v, want %v %v", what, am, ac, bm, bc)
	}
}
