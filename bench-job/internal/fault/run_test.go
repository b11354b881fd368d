package fault

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeFault records what the runner asks of it.
type fakeFault struct {
	injectErr, holdErr, undoErr error
	injected, undone            int
}

func (f *fakeFault) Kind() string { return "fake" }
func (f *fakeFault) Inject(context.Context) (any, error) {
	if f.injectErr != nil {
		return nil, f.injectErr
	}
	f.injected++
	return map[string]int{"n": 1}, nil
}
func (f *fakeFault) Hold(ctx context.Context) error {
	if f.holdErr != nil {
		return f.holdErr
	}
	<-ctx.Done()
	return nil
}
func (f *fakeFault) Undo(context.Context) (any, error) {
	f.undone++
	return map[string]int{"m": 2}, f.undoErr
}
func (f *fakeFault) Summary(held time.Duration, stoppedBy string) string {
	return "faked for " + roundHeld(held) + stoppedSuffix(stoppedBy)
}

// lines parses the JSON lines a run printed.
func lines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var d map[string]any
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		docs = append(docs, d)
	}
	return docs
}

// termLog is a termination log that exists, as Kubernetes makes it.
func termLog(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRunHoldsForTheDurationThenUndoes(t *testing.T) {
	var out bytes.Buffer
	f := &fakeFault{}
	tl := termLog(t)
	start := time.Now()
	if err := Run(context.Background(), f, Options{Duration: 200 * time.Millisecond, Stdout: &out, TerminationLog: tl}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 200*time.Millisecond || took > 2*time.Second {
		t.Fatalf("run took %v for a 200ms fault", took)
	}
	if f.injected != 1 || f.undone != 1 {
		t.Fatalf("injected %d undone %d, want 1 and 1", f.injected, f.undone)
	}
	docs := lines(t, out.String())
	if len(docs) != 2 {
		t.Fatalf("want an injected and an undone line, got:\n%s", out.String())
	}
	if docs[0]["fault"] != "fake" || docs[0]["n"] != 1.0 || docs[1]["m"] != 2.0 || docs[1]["stoppedBy"] != "duration" {
		t.Fatalf("lines %v", docs)
	}
	for i, key := range []string{"injected", "undone"} {
		if _, err := time.Parse(time.RFC3339Nano, docs[i][key].(string)); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	if got := readFile(t, tl); !strings.HasPrefix(got, "faked for ") || strings.Count(got, "\n") != 1 {
		t.Fatalf("termination log %q", got)
	}
}

func TestRunStopsOnSignal(t *testing.T) {
	var out bytes.Buffer
	f := &fakeFault{}
	sigs := make(chan os.Signal, 1)
	sigs <- syscall.SIGTERM
	start := time.Now()
	if err := Run(context.Background(), f, Options{Duration: time.Minute, Signals: sigs, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a signalled run took %v", took)
	}
	docs := lines(t, out.String())
	if f.undone != 1 || len(docs) != 2 || docs[1]["stoppedBy"] != "SIGTERM" {
		t.Fatalf("undone %d, lines %v", f.undone, docs)
	}
}

func TestRunFailures(t *testing.T) {
	t.Run("inject", func(t *testing.T) {
		var out bytes.Buffer
		f := &fakeFault{injectErr: errors.New("no such thing")}
		tl := termLog(t)
		err := Run(context.Background(), f, Options{Duration: time.Second, Stdout: &out, TerminationLog: tl})
		if err == nil || err.Error() != "fake: no such thing" {
			t.Fatalf("err %v", err)
		}
		if f.undone != 0 || out.Len() != 0 {
			t.Fatalf("undo called %d times, output %q: nothing was injected", f.undone, out.String())
		}
		if got := readFile(t, tl); got != "fault fake: no such thing\n" {
			t.Fatalf("termination log %q", got)
		}
	})
	t.Run("hold and undo", func(t *testing.T) {
		var out bytes.Buffer
		f := &fakeFault{holdErr: errors.New("lost it"), undoErr: errors.New("stuck")}
		err := Run(context.Background(), f, Options{Duration: time.Minute, Stdout: &out})
		if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "lost it") || !strings.Contains(err.Error(), "undo: stuck") {
			t.Fatalf("err %q, want both failures on one line", err)
		}
		docs := lines(t, out.String())
		if f.undone != 1 || len(docs) != 2 || docs[1]["error"] == nil || docs[1]["stoppedBy"] != "error" {
			t.Fatalf("undone %d, lines %v", f.undone, docs)
		}
	})
}

func TestTerminationLogOnlyWhenItExists(t *testing.T) {
	p := filepath.Join(t.TempDir(), "absent")
	writeTerminationLog(p, "x")
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("a termination log was created: %v", err)
	}
}
