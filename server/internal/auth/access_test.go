package auth

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"sluice.dev/server/internal/testutil"
)

// lockedBuffer is a log sink tests can read while the code writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

func TestParseGrants(t *testing.T) {
	cases := []struct {
		name, doc string
		grants    int // -1: rejected
	}{
		{"two accounts", `{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/x","b/y"]}]}`, 2},
		{"no grants", `{"grants":[]}`, 0},
		{"empty object", `{}`, 0},
		{"unknown keys are ignored", `{"version":2,"grants":[{"project":"p","queue":"q","serviceAccounts":["a/x"],"note":"n"}]}`, 1},
		{"grant with no accounts", `{"grants":[{"project":"p","queue":"q"}]}`, 0},
		{"empty file", ``, -1},
		{"not JSON", `grants: []`, -1},
		{"truncated", `{"grants":[{"project":"p"`, -1},
		{"no project", `{"grants":[{"queue":"q","serviceAccounts":["a/x"]}]}`, -1},
		{"no queue", `{"grants":[{"project":"p","serviceAccounts":["a/x"]}]}`, -1},
		{"queue with a slash", `{"grants":[{"project":"p","queue":"q/messages","serviceAccounts":["a/x"]}]}`, -1},
		{"account without namespace", `{"grants":[{"project":"p","queue":"q","serviceAccounts":["x"]}]}`, -1},
		{"account with two slashes", `{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/b/c"]}]}`, -1},
		{"account as an object", `{"grants":[{"project":"p","queue":"q","serviceAccounts":[{"name":"x"}]}]}`, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set, err := parseGrants([]byte(tc.doc))
			if tc.grants < 0 {
				if err == nil {
					t.Fatalf("accepted: %v", set)
				}
				return
			}
			if err != nil || len(set) != tc.grants {
				t.Fatalf("%d grants, %v; want %d", len(set), err, tc.grants)
			}
		})
	}
}

// TestGrantsReload: the file is stat'ed at most every accessRecheck; a
// change takes effect at the next stat, a bad file keeps the last good
// grants and is logged once, a missing file means none.
func TestGrantsReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.json")
	var logs lockedBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	write := func(doc string) { testutil.WriteFileAtomic(t, path, []byte(doc)) }

	g := NewGrants(path, log) // missing at start: no grants, no error
	clk := newTestClock()     // not before NewGrants' own first stat
	g.now = clk.now
	if g.Allows("p", "q", "a/x") || logs.count("level=ERROR") != 0 {
		t.Fatal("missing file")
	}
	write(`{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/x"]}]}`)
	if g.Allows("p", "q", "a/x") {
		t.Fatal("read before the recheck interval")
	}
	clk.add(accessRecheck)
	if !g.Allows("p", "q", "a/x") {
		t.Fatal("grant added: not in force after the recheck")
	}
	for _, other := range [][3]string{{"p", "r", "a/x"}, {"o", "q", "a/x"}, {"p", "q", "a/y"}, {"p", "q", "b/x"}} {
		if g.Allows(other[0], other[1], other[2]) {
			t.Errorf("%v allowed", other)
		}
	}
	write(`{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/x"]}`)
	for range 3 {
		clk.add(accessRecheck)
		if !g.Allows("p", "q", "a/x") {
			t.Fatal("a malformed file dropped the last good grants")
		}
	}
	if n := logs.count("access file rejected"); n != 1 {
		t.Errorf("malformed file logged %d times, want once", n)
	}
	write(`{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/y"]}]}`)
	clk.add(accessRecheck)
	if g.Allows("p", "q", "a/x") || !g.Allows("p", "q", "a/y") {
		t.Fatal("grant changed: not in force")
	}
	write(`{"grants":[]}`)
	clk.add(accessRecheck)
	if g.Allows("p", "q", "a/y") || g.Len() != 0 {
		t.Fatal("grant removed: still in force")
	}
	write(`{"grants":[{"project":"p","queue":"q","serviceAccounts":["a/x"]}]}`)
	clk.add(accessRecheck)
	if !g.Allows("p", "q", "a/x") {
		t.Fatal("grant back")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	clk.add(accessRecheck)
	if g.Allows("p", "q", "a/x") {
		t.Fatal("file removed: grants still in force")
	}
	var none *Grants
	if none.Allows("p", "q", "a/x") || NewGrants("", nil).Allows("p", "q", "a/x") {
		t.Fatal("no access file")
	}
}
