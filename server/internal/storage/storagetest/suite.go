// Package storagetest is the one conformance suite every storage driver runs
// (memory, redis, mongo, pooled), plus shared benchmarks. A driver package
// calls it from a test:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t testing.TB, clock storage.Clock) storage.Driver {
//			d, err := mydriver.Open(ctx, uri, storagetest.Options(clock))
//			if err != nil { t.Fatal(err) }
//			t.Cleanup(func() { d.Close() })
//			return d
//		})
//	}
//
// Each case gets a fresh driver from open (behind the instrumentation
// wrapper, which checks arguments for every driver), its own simulated clock and its
// own random project names, so cases never see each other's data even on a
// shared backend. After a case the suite deletes every queue the case used
// and, when the driver implements storage.Inspector, fails the case if
// anything of its projects is left behind.
package storagetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/instrument"
)

// Opener returns a driver for one test case, using clock for time (pass
// Options(clock) to the driver). It registers any cleanup with t.Cleanup.
type Opener func(t testing.TB, clock storage.Clock) storage.Driver

type testCase struct {
	name string
	fn   func(e *env)
}

// Run runs the conformance suite against the drivers open returns.
func Run(t *testing.T, open Opener) {
	var cases []testCase
	cases = append(cases, queueCases...)
	cases = append(cases, messageCases...)
	cases = append(cases, claimCases...)
	cases = append(cases, deadLetterCases...)
	cases = append(cases, isolationCases...)
	cases = append(cases, concurrencyCases...)
	cases = append(cases, metadataCases...)
	cases = append(cases, listingCases...)
	cases = append(cases, lifetimeCases...)
	cases = append(cases, errorKindCases...)
	cases = append(cases, validationCases...)
	cases = append(cases, subscriptionCases...)
	cases = append(cases, deliveryCases...)
	cases = append(cases, topicCases...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := NewClock()
			raw := open(t, clock)
			e := newEnv(t, context.Background(), clock, raw, randomHex(4))
			defer e.teardown()
			tc.fn(e)
		})
	}
}

// wrap puts the driver behind the instrumentation wrapper, as the server
// does: that wrapper is where arguments are checked for every driver.
func wrap(t *testing.T, d storage.Driver) storage.Driver {
	w, err := instrument.Wrap(d, "conformance", prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// env is what a case works with.
type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *Clock
	d      storage.Driver
	raw    storage.Driver // d without the instrumentation wrapper
	suffix string
	used   []storage.QueueRef
}

// newEnv is the env of one case over the driver raw, instrumented.
func newEnv(t *testing.T, ctx context.Context, clock *Clock, raw storage.Driver, suffix string) *env {
	return &env{t: t, ctx: ctx, clock: clock, d: wrap(t, raw), raw: raw, suffix: suffix}
}

// project returns the case's project named n (unique per case run).
func (e *env) project(n string) string {
	return fmt.Sprintf("st-%s-%s", n, e.suffix)
}

// queue returns a queue ref in project "a" and records it for teardown.
func (e *env) queue(name string) storage.QueueRef { return e.queueIn("a", name) }

// queueIn returns a queue ref in the named project and records it.
func (e *env) queueIn(project, name string) storage.QueueRef {
	return e.rawQueue(e.project(project), name)
}

// rawQueue returns a queue ref with exactly the given project and records it.
func (e *env) rawQueue(project, name string) storage.QueueRef {
	ref := storage.QueueRef{Project: project, Name: name}
	for _, u := range e.used {
		if u == ref {
			return ref
		}
	}
	e.used = append(e.used, ref)
	return ref
}

// teardown deletes every queue the case used and checks nothing remains.
func (e *env) teardown() {
	projects := map[string]bool{}
	for _, ref := range e.used {
		projects[ref.Project] = true
		if err := e.d.Queues().Delete(e.ctx, ref); err != nil {
			e.t.Errorf("teardown: delete %v: %v", ref, err)
		}
	}
	insp, ok := e.d.(storage.Inspector)
	if !ok {
		return
	}
	for p := range projects {
		left, err := insp.Leftovers(e.ctx, p)
		if err != nil {
			e.t.Errorf("teardown: leftovers of %s: %v", p, err)
		} else if len(left) > 0 {
			e.t.Errorf("teardown: project %s still holds after deleting its queues: %s", p, strings.Join(left, ", "))
		}
	}
}

// post posts bodies 0..n-1 (JSON numbers) with ttl and returns their ids.
func (e *env) post(q storage.QueueRef, client string, n int, ttl time.Duration) []string {
	e.t.Helper()
	msgs := make([]storage.NewMessage, n)
	for i := range msgs {
		msgs[i] = storage.NewMessage{TTL: ttl, Body: json.RawMessage(fmt.Sprint(i))}
	}
	ids, err := e.d.Messages().Post(e.ctx, q, client, msgs)
	if err != nil {
		e.t.Fatalf("post %d to %v: %v", n, q, err)
	}
	if len(ids) != n {
		e.t.Fatalf("post %d returned %d ids", n, len(ids))
	}
	return ids
}

// claim creates a claim and fails the test on error.
func (e *env) claim(q storage.QueueRef, limit int, ttl, grace time.Duration) storage.Claim {
	e.t.Helper()
	c, err := e.d.Claims().Create(e.ctx, q, storage.ClaimOptions{TTL: ttl, Grace: grace, Limit: limit})
	if err != nil {
		e.t.Fatalf("claim %v: %v", q, err)
	}
	return c
}

// stats returns queue stats and fails the test on error.
func (e *env) stats(q storage.QueueRef) storage.QueueStats {
	e.t.Helper()
	st, err := e.d.Queues().Stats(e.ctx, q)
	if err != nil {
		e.t.Fatalf("stats %v: %v", q, err)
	}
	return st
}

// wantKind fails the test unless err has the kind (nil kind: no error).
func (e *env) wantKind(what string, err error, kind *storage.Kind) {
	e.t.Helper()
	switch {
	case kind == nil && err != nil:
		e.t.Errorf("%s: unexpected error %v", what, err)
	case kind != nil && !storage.Is(err, *kind):
		e.t.Errorf("%s: got error %v, want kind %v", what, err, *kind)
	}
}

func kind(k storage.Kind) *storage.Kind { return &k }

func messageIDs(msgs []storage.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.ID
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
