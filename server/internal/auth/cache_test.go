package auth

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// fakeKeystone is a programmable Validator: tokens are valid, revoked or
// unknown; down makes every call fail as an unreachable Keystone would.
type fakeKeystone struct {
	mu      sync.Mutex
	now     *time.Time
	valid   map[string]Identity
	down    bool
	calls   int
	answers map[string]answer // the last definitive answer per token
}

type answer struct {
	valid bool
	at    time.Time
	id    Identity
}

func newFake(now *time.Time) *fakeKeystone {
	return &fakeKeystone{now: now, valid: map[string]Identity{}, answers: map[string]answer{}}
}

func (f *fakeKeystone) Validate(_ context.Context, token string) (Identity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.down {
		return Identity{}, &UnavailableError{errors.New("connection refused")}
	}
	id, ok := f.valid[token]
	if ok && f.now.Before(id.Expires) {
		f.answers[token] = answer{valid: true, at: *f.now, id: id}
		return id, nil
	}
	f.answers[token] = answer{valid: false, at: *f.now}
	return Identity{}, ErrInvalid
}

func newCachedAt(v Validator, size int, revalidate time.Duration, now *time.Time) *Cached {
	c := NewCached(v, size, revalidate)
	c.now = func() time.Time { return *now }
	return c
}

func TestCachedScenarios(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFake(&now)
	c := newCachedAt(f, 100, time.Minute, &now)
	alice := Identity{Project: "pa", Expires: now.Add(time.Hour)}
	f.valid["ta"] = alice

	if id, err := c.Authenticate(ctx, "ta"); err != nil || id != alice {
		t.Fatalf("first use: %v %v", id, err)
	}
	now = now.Add(30 * time.Second)
	if _, err := c.Authenticate(ctx, "ta"); err != nil || f.calls != 1 {
		t.Fatalf("cached use: err %v after %d calls, want 1", err, f.calls)
	}

	// Revoked: still served until the revalidation interval, refused after.
	delete(f.valid, "ta")
	if _, err := c.Authenticate(ctx, "ta"); err != nil {
		t.Fatalf("within the interval the cached answer stands: %v", err)
	}
	now = now.Add(31 * time.Second)
	if _, err := c.Authenticate(ctx, "ta"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("revoked token after the interval: %v", err)
	}
	// The refusal is remembered: a retrying client does not reach Keystone.
	calls := f.calls
	if _, err := c.Authenticate(ctx, "ta"); !errors.Is(err, ErrInvalid) || f.calls != calls {
		t.Fatalf("remembered refusal: %v, %d calls", err, f.calls-calls)
	}

	// Keystone down: a cached token keeps working past the interval, until
	// its own expiry; an unseen one gets unavailable.
	bob := Identity{Project: "pb", Admin: true, Expires: now.Add(10 * time.Minute)}
	f.valid["tb"] = bob
	f.valid["tc"] = bob
	if _, err := c.Authenticate(ctx, "tb"); err != nil {
		t.Fatal(err)
	}
	f.down = true
	now = now.Add(5 * time.Minute)
	if id, err := c.Authenticate(ctx, "tb"); err != nil || id != bob {
		t.Fatalf("cached token with Keystone down: %v %v", id, err)
	}
	var ue *UnavailableError
	if _, err := c.Authenticate(ctx, "tc"); !errors.As(err, &ue) {
		t.Fatalf("unseen token with Keystone down: %v", err)
	}
	now = now.Add(6 * time.Minute)
	if _, err := c.Authenticate(ctx, "tb"); !errors.As(err, &ue) {
		t.Fatalf("expired cached token with Keystone down: %v", err)
	}
}

func TestCachedBound(t *testing.T) {
	now := time.Unix(0, 0)
	f := newFake(&now)
	c := newCachedAt(f, 8, time.Minute, &now)
	for i := range 100 {
		tok := fmt.Sprint("t", i)
		f.valid[tok] = Identity{Project: "p", Expires: now.Add(time.Hour)}
		if _, err := c.Authenticate(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
		if c.Len() > 8 {
			t.Fatalf("%d entries after %d tokens, bound is 8", c.Len(), i+1)
		}
	}
}

// TestCachedNeverOpens drives random sequences of issue, revoke, outage and
// time against the cache and checks, at every step, that an accepted token
// was valid by Keystone's last definitive answer, not expired, and not
// older than the revalidation interval unless Keystone is down now.
func TestCachedNeverOpens(t *testing.T) {
	const revalidate = 10 * time.Second
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		now := time.Unix(1000, 0)
		f := newFake(&now)
		c := newCachedAt(f, 1+r.IntN(6), revalidate, &now)
		tokens := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
		for step := range 300 {
			tok := tokens[r.IntN(len(tokens))]
			switch r.IntN(6) {
			case 0:
				f.valid[tok] = Identity{Project: "p-" + tok, Admin: r.IntN(2) == 0, Expires: now.Add(time.Duration(1+r.IntN(60)) * time.Second)}
			case 1:
				delete(f.valid, tok)
			case 2:
				f.down = !f.down
			case 3:
				now = now.Add(time.Duration(r.IntN(8000)) * time.Millisecond)
			}
			id, err := c.Authenticate(context.Background(), tok)
			where := fmt.Sprintf("seed %d step %d token %s", seed, step, tok)
			if c.Len() > c.size {
				t.Fatalf("%s: %d entries over the bound %d", where, c.Len(), c.size)
			}
			last, seen := f.answers[tok]
			if err != nil {
				var ue *UnavailableError
				if !seen && !errors.As(err, &ue) {
					t.Fatalf("%s: never validated, yet refused with %v", where, err)
				}
				if errors.Is(err, ErrInvalid) && seen && last.valid && now.Before(last.id.Expires) && now.Sub(last.at) < revalidate {
					t.Fatalf("%s: refused though Keystone said valid %v ago", where, now.Sub(last.at))
				}
				continue
			}
			switch {
			case !seen || !last.valid:
				t.Fatalf("%s: accepted, but Keystone's last answer was %+v (seen %v)", where, last, seen)
			case id != last.id:
				t.Fatalf("%s: identity %+v, Keystone said %+v", where, id, last.id)
			case !now.Before(id.Expires):
				t.Fatalf("%s: accepted an expired token", where)
			case now.Sub(last.at) >= revalidate && !f.down:
				t.Fatalf("%s: accepted on a check %v old with Keystone up", where, now.Sub(last.at))
			}
		}
	}
}

// BenchmarkCachedHit is what Keystone auth adds to a request whose token is
// cached: one read-locked map lookup and a clock read.
func BenchmarkCachedHit(b *testing.B) {
	now := time.Now()
	f := newFake(&now)
	f.valid["tok"] = Identity{Project: "p", Expires: now.Add(time.Hour)}
	c := NewCached(f, 10000, time.Hour)
	ctx := context.Background()
	if _, err := c.Authenticate(ctx, "tok"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Authenticate(ctx, "tok"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
