package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTrustKeystone issues numbered tokens that live for life, and
// records the calls.
type fakeTrustKeystone struct {
	mu      sync.Mutex
	life    time.Duration
	now     func() time.Time
	issued  atomic.Int32
	userIDs atomic.Int32
	fail    error         // TrustToken answers this when set
	gate    chan struct{} // TrustToken waits on it when set
	deleted []string      // "trust:token" per DeleteTrust
	refuse  map[string]bool
}

func (f *fakeTrustKeystone) ServiceUserID(context.Context) (string, error) {
	f.userIDs.Add(1)
	return "svc-user", nil
}

func (f *fakeTrustKeystone) Trustor(_ context.Context, tok string) (Trustor, error) {
	if tok == "" {
		return Trustor{}, ErrInvalid
	}
	return Trustor{UserID: "u-" + tok, Project: "p", RoleIDs: []string{"r1"}}, nil
}

func (f *fakeTrustKeystone) CreateTrust(_ context.Context, tok string, who Trustor, trustee string, _ time.Time) (string, error) {
	return fmt.Sprintf("trust(%s->%s)", who.UserID, trustee), nil
}

func (f *fakeTrustKeystone) DeleteTrust(_ context.Context, id, tok string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id+":"+tok)
	if f.refuse[tok] {
		return &RefusedError{Status: 403, Message: "no"}
	}
	return nil
}

func (f *fakeTrustKeystone) TrustToken(_ context.Context, id string) (TrustToken, error) {
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	err := f.fail
	f.mu.Unlock()
	if err != nil {
		return TrustToken{}, err
	}
	n := f.issued.Add(1)
	return TrustToken{Token: fmt.Sprintf("%s#%d", id, n), Project: "p", Expires: f.now().Add(f.life)}, nil
}

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newFakeTrusts(life time.Duration, size int) (*Trusts, *fakeTrustKeystone, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f := &fakeTrustKeystone{life: life, now: c.now, refuse: map[string]bool{}}
	t := newTrusts(f, size)
	t.now = c.now
	return t, f, c
}

func mustToken(t *testing.T, tr *Trusts, id string) string {
	t.Helper()
	tok, project, err := tr.Token(context.Background(), id)
	if err != nil || project != "p" {
		t.Fatalf("token %q %q %v", tok, project, err)
	}
	return tok
}

// TestTrustTokenReusedUntilShortlyBeforeExpiry: a token is handed out
// again until a minute (or a quarter of its life, if shorter) before it
// expires, then a new one is issued.
func TestTrustTokenReusedUntilShortlyBeforeExpiry(t *testing.T) {
	cases := []struct {
		life, margin time.Duration
	}{
		{time.Hour, time.Minute},
		{4 * time.Minute, time.Minute},
		{40 * time.Second, 10 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.life.String(), func(t *testing.T) {
			tr, f, c := newFakeTrusts(tc.life, 10)
			first := mustToken(t, tr, "t1")
			c.advance(tc.life - tc.margin - time.Second)
			if got := mustToken(t, tr, "t1"); got != first || f.issued.Load() != 1 {
				t.Fatalf("a second before the margin: %q (issued %d), want the cached %q", got, f.issued.Load(), first)
			}
			c.advance(time.Second)
			if got := mustToken(t, tr, "t1"); got == first || f.issued.Load() != 2 {
				t.Fatalf("at the margin: %q (issued %d), want a new token", got, f.issued.Load())
			}
		})
	}
}

// TestTrustTokenOneCallForConcurrentDeliveries: deliveries waiting for the
// same trust share one Keystone call; another trust gets its own token.
func TestTrustTokenOneCallForConcurrentDeliveries(t *testing.T) {
	tr, f, _ := newFakeTrusts(time.Hour, 10)
	f.gate = make(chan struct{})
	var wg sync.WaitGroup
	got := make([]string, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, _ = tr.Token(context.Background(), "t1")
		}()
	}
	time.Sleep(50 * time.Millisecond) // let them all wait on the one call
	close(f.gate)
	wg.Wait()
	for _, g := range got {
		if g != got[0] || g == "" {
			t.Fatalf("tokens %v", got)
		}
	}
	if n := f.issued.Load(); n != 1 {
		t.Errorf("%d Keystone calls for one trust, want 1", n)
	}
	if other := mustToken(t, tr, "t2"); other == got[0] {
		t.Errorf("another trust got the same token %q", other)
	}
}

// TestTrustTokenErrorsNotCached: a failure is not remembered, so the next
// attempt (the delivery's retry) asks Keystone again.
func TestTrustTokenErrorsNotCached(t *testing.T) {
	tr, f, _ := newFakeTrusts(time.Hour, 10)
	f.fail = &UnavailableError{errors.New("down")}
	if tok, _, err := tr.Token(context.Background(), "t1"); err == nil || tok != "" {
		t.Fatalf("token %q err %v, want an error and no token", tok, err)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	mustToken(t, tr, "t1")
	if tr.Len() != 1 {
		t.Errorf("%d tokens cached, want 1", tr.Len())
	}
}

// TestTrustTokenRefused: a token a receiver refused is dropped, and only
// that one.
func TestTrustTokenRefused(t *testing.T) {
	tr, f, _ := newFakeTrusts(time.Hour, 10)
	first := mustToken(t, tr, "t1")
	tr.Refused("t1", "some other token")
	if mustToken(t, tr, "t1") != first {
		t.Fatal("refusing another token dropped the cached one")
	}
	tr.Refused("t1", first)
	if second := mustToken(t, tr, "t1"); second == first || f.issued.Load() != 2 {
		t.Errorf("after a refusal got %q again (issued %d)", second, f.issued.Load())
	}
}

// TestTrustTokenCacheBounded: past size, inserting drops expired tokens
// first, then others.
func TestTrustTokenCacheBounded(t *testing.T) {
	tr, _, c := newFakeTrusts(time.Hour, 3)
	for i := range 3 {
		mustToken(t, tr, fmt.Sprint("old", i))
	}
	c.advance(2 * time.Hour)
	mustToken(t, tr, "new")
	if tr.Len() != 1 {
		t.Errorf("%d tokens after the expired ones made room, want 1", tr.Len())
	}
	for i := range 10 {
		mustToken(t, tr, fmt.Sprint("more", i))
		if tr.Len() > 3 {
			t.Fatalf("%d tokens, bound 3", tr.Len())
		}
	}
}

// TestTrustCreateAndDelete: the trustee id is asked once; a trust is
// deleted with its own token, and with the caller's when Keystone refuses
// that; a trust that can no longer be redeemed counts as gone.
func TestTrustCreateAndDelete(t *testing.T) {
	tr, f, _ := newFakeTrusts(time.Hour, 10)
	ctx := context.Background()
	for _, user := range []string{"alice", "bob"} {
		id, err := tr.Create(ctx, user, time.Now().Add(time.Hour))
		if want := "trust(u-" + user + "->svc-user)"; err != nil || id != want {
			t.Fatalf("create %q %v, want %q", id, err, want)
		}
	}
	if _, err := tr.Create(ctx, "", time.Now()); !errors.Is(err, ErrInvalid) {
		t.Errorf("create without a token: %v", err)
	}
	if n := f.userIDs.Load(); n != 1 {
		t.Errorf("service user id asked %d times, want 1", n)
	}

	tok := mustToken(t, tr, "t1")
	if err := tr.Delete(ctx, "t1", "caller"); err != nil {
		t.Fatal(err)
	}
	f.refuse[tok] = false
	second := mustToken(t, tr, "t1")
	if second == tok {
		t.Error("a deleted trust's token is still cached")
	}
	f.refuse[second] = true
	if err := tr.Delete(ctx, "t1", "caller"); err != nil {
		t.Fatal(err)
	}
	want := []string{"t1:" + tok, "t1:" + second, "t1:caller"}
	if fmt.Sprint(f.deleted) != fmt.Sprint(want) {
		t.Errorf("deletes %v, want %v", f.deleted, want)
	}

	f.fail = &RefusedError{Status: 404, Message: "Could not find trust"}
	f.deleted = nil
	if err := tr.Delete(ctx, "gone", "caller"); err != nil || len(f.deleted) != 0 {
		t.Errorf("deleting a trust that is gone: %v, deletes %v", err, f.deleted)
	}
}
