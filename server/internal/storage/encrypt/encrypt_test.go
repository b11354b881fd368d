package encrypt

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/storagetest"
)

func testKey(id string, b byte) Key { return Key{ID: id, Secret: bytes.Repeat([]byte{b}, 32)} }

func ring(t testing.TB, keys ...Key) *Keyring {
	t.Helper()
	r, err := NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEnvelope: for generated bodies and projects, an envelope is never a
// JSON document, holds none of the body in the clear, opens back under any
// ring holding its key and its project only, and fails to open after any
// change to any byte past the first.
func TestEnvelope(t *testing.T) {
	a, b := testKey("a", 1), testKey("key-b.2", 2)
	seal := ring(t, a)
	rings := map[string]*Keyring{"same": seal, "rotated": ring(t, b, a)}
	without := ring(t, b)
	rapid.Check(t, func(rt *rapid.T) {
		marker := "marker-" + rapid.StringMatching(`[a-z0-9]{8}`).Draw(rt, "marker")
		body := []byte(`{"m":"` + marker + `","pad":"` + rapid.StringMatching(`[ -~]{0,300}`).Draw(rt, "pad") + `"}`)
		if !json.Valid(body) {
			body = []byte(`"` + marker + `"`)
		}
		project := rapid.StringMatching(`.{0,40}`).Draw(rt, "project")
		env := seal.Seal(project, body)
		if json.Valid(env) || !IsEnvelope(env) || !strings.HasPrefix(string(env), "~v1~a~") {
			rt.Fatalf("envelope %q", env)
		}
		if bytes.Contains(env, []byte(marker)) {
			rt.Fatalf("envelope %q shows the body", env)
		}
		if again := seal.Seal(project, body); bytes.Equal(again, env) {
			rt.Fatalf("two envelopes of one body are equal: the nonce repeats")
		}
		for name, r := range rings {
			got, err := r.Open(project, env)
			if err != nil || !bytes.Equal(got, body) {
				rt.Fatalf("%s ring: %q, %v", name, got, err)
			}
		}
		if _, err := without.Open(project, env); err == nil {
			rt.Fatalf("a ring without the key opened it")
		}
		if _, err := seal.Open(project+"x", env); err == nil {
			rt.Fatalf("opened in another project")
		}
		i := rapid.IntRange(1, len(env)-1).Draw(rt, "at")
		changed := bytes.Clone(env)
		changed[i] ^= byte(rapid.IntRange(1, 255).Draw(rt, "xor"))
		if got, err := seal.Open(project, changed); err == nil {
			rt.Fatalf("tampered at %d (%q) still opens: %q", i, changed, got)
		}
		if _, err := seal.Open(project, env[:rapid.IntRange(0, len(env)-1).Draw(rt, "cut")]); err == nil {
			rt.Fatalf("a truncated envelope opens")
		}
	})
}

func TestNewKeyringRefuses(t *testing.T) {
	for _, keys := range [][]Key{nil, {{ID: "", Secret: make([]byte, 32)}}, {{ID: "a~b", Secret: make([]byte, 32)}},
		{{ID: "a", Secret: make([]byte, 16)}}} {
		if _, err := NewKeyring(keys); err == nil {
			t.Errorf("NewKeyring(%v) accepted", keys)
		}
	}
}

var ctx = context.Background()

func post(t *testing.T, d storage.Driver, q storage.QueueRef, encrypt bool, bodies ...string) []string {
	t.Helper()
	msgs := make([]storage.NewMessage, len(bodies))
	for i, b := range bodies {
		msgs[i] = storage.NewMessage{TTL: time.Hour, Body: json.RawMessage(b), Encrypt: encrypt}
	}
	ids, err := d.Messages().Post(ctx, q, "c", msgs)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// readable lists q and returns its bodies by id ("!" for an unreadable one).
func readable(t *testing.T, d storage.Driver, q storage.QueueRef) map[string]string {
	t.Helper()
	l, _, err := d.Messages().List(ctx, q, storage.ListMessagesOptions{Limit: 100, Echo: true, IncludeClaimed: true})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range l {
		switch {
		case m.Unreadable && m.Body == nil:
			out[m.ID] = "!"
		case m.Unreadable:
			t.Errorf("unreadable %s with a body", m.ID)
		default:
			out[m.ID] = string(m.Body)
		}
	}
	return out
}

// TestRotation: messages sealed under key a still read once b is put in
// front of it (a server restarted with the new file), new ones are sealed
// under b, and once a is dropped a's messages read as unreadable, each
// alone, next to everything else.
func TestRotation(t *testing.T) {
	raw := memory.New(storage.Options{})
	q := storage.QueueRef{Project: "p", Name: "q"}
	a, b := testKey("a", 1), testKey("b", 2)

	d1 := Wrap(raw, ring(t, a))
	old := post(t, d1, q, true, `"under a"`)[0]
	plain := post(t, d1, q, false, `"plain"`)[0]

	d2 := Wrap(raw, ring(t, b, a))
	fresh := post(t, d2, q, true, `"under b"`)[0]
	want := map[string]string{old: `"under a"`, plain: `"plain"`, fresh: `"under b"`}
	if got := readable(t, d2, q); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after prepending b: %v, want %v", got, want)
	}
	stored, err := raw.Messages().Get(ctx, q, fresh)
	if err != nil || !strings.HasPrefix(string(stored.Body), "~v1~b~") {
		t.Errorf("a new message is stored as %q (%v), want under b", stored.Body, err)
	}

	d3 := Wrap(raw, ring(t, b))
	want[old] = "!"
	if got := readable(t, d3, q); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after dropping a: %v, want %v", got, want)
	}
	if m, err := d3.Messages().Get(ctx, q, old); err != nil || !m.Unreadable || m.Body != nil {
		t.Errorf("get of a's message after dropping a: %+v, %v", m, err)
	}
	// Claims and pops hand the unreadable message out too: it is not lost
	// or stuck, and it can be deleted.
	c, err := d3.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 10})
	if err != nil || len(c.Messages) != 3 {
		t.Fatalf("claim: %+v, %v", c, err)
	}
	for _, m := range c.Messages {
		if (m.ID == old) != m.Unreadable {
			t.Errorf("claimed %s: unreadable %v", m.ID, m.Unreadable)
		}
		if err := d3.Messages().Delete(ctx, q, m.ID, c.ID); err != nil {
			t.Error(err)
		}
	}

	// Without any key: a post asking for encryption is refused, with
	// nothing stored, and envelopes read as unreadable.
	none := Wrap(raw, nil)
	post(t, d1, q, true, `"again under a"`)
	if _, err := none.Messages().Post(ctx, q, "c", []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`1`), Encrypt: true}}); !storage.Is(err, storage.Conflict) {
		t.Errorf("post asking for encryption without a key: %v", err)
	}
	for id, body := range readable(t, none, q) {
		if body != "!" {
			t.Errorf("%s reads %s without a key", id, body)
		}
	}
	if st, _ := none.Queues().Stats(ctx, q); st.Total != 1 {
		t.Errorf("stats after the refused post: %+v", st)
	}
}

// TestCopiesAreNotChanged: Post seals a copy; the caller's messages keep
// their bodies and flags.
func TestCopiesAreNotChanged(t *testing.T) {
	d := Wrap(memory.New(storage.Options{}), ring(t, testKey("a", 1)))
	msgs := []storage.NewMessage{{TTL: time.Hour, Body: json.RawMessage(`{"x":1}`), Encrypt: true}, {TTL: time.Hour, Body: json.RawMessage(`2`)}}
	if _, err := d.Messages().Post(ctx, storage.QueueRef{Project: "p", Name: "q"}, "c", msgs); err != nil {
		t.Fatal(err)
	}
	if string(msgs[0].Body) != `{"x":1}` || !msgs[0].Encrypt || string(msgs[1].Body) != "2" {
		t.Errorf("the caller's messages changed: %+v", msgs)
	}
}

// TestDeliveriesOpen: a leased delivery of an encrypted message carries
// the plaintext, or is unreadable when no key opens it.
func TestDeliveriesOpen(t *testing.T) {
	raw := memory.New(storage.Options{})
	q := storage.QueueRef{Project: "p", Name: "q"}
	if _, _, err := raw.Subscriptions().Create(ctx, q, storage.Subscription{Subscriber: "http://127.0.0.1:1/x", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	post(t, Wrap(raw, ring(t, testKey("a", 1))), q, true, `"secret"`)
	ds, _, err := Wrap(raw, ring(t, testKey("a", 1))).Deliveries().Lease(ctx, 10, time.Millisecond)
	if err != nil || len(ds) != 1 || string(ds[0].Body) != `"secret"` || ds[0].Unreadable {
		t.Fatalf("lease: %+v, %v", ds, err)
	}
	time.Sleep(5 * time.Millisecond)
	ds, _, err = Wrap(raw, ring(t, testKey("b", 2))).Deliveries().Lease(ctx, 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].Body != nil || !ds[0].Unreadable {
		t.Fatalf("lease without the key: %+v, %v", ds, err)
	}
}

var sealAll, _ = NewKeyring([]Key{testKey("c", 3)})

func openSealed(_ testing.TB, clock storage.Clock) storage.Driver {
	return wrap(memory.New(storagetest.Options(clock)), sealAll, true)
}

// TestConformance runs the whole conformance suite with every body posted
// encrypted (dead letters, deliveries, stats included): what a
// client reads is what it would read without encryption.
func TestConformance(t *testing.T) { storagetest.Run(t, openSealed) }

// TestModel runs the reference model over a driver that encrypts every
// post.
func TestModel(t *testing.T) {
	storagetest.RunModel(t, openSealed, storagetest.ModelOptions{Checks: 50})
}

// BenchmarkSealOpen1KiB: what one 1 KiB body costs to seal and open.
func BenchmarkSealOpen1KiB(b *testing.B) {
	body := []byte(`{"data":"` + strings.Repeat("x", 1010) + `"}`)
	r := sealAll
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		env := r.Seal("bench-project", body)
		if _, err := r.Open("bench-project", env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDriver runs the shared driver benchmarks on the memory driver
// with every post encrypted; compare with the memory driver's own.
func BenchmarkDriver(b *testing.B) { storagetest.Bench(b, openSealed) }
