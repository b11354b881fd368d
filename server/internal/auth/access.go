package auth

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// accessRecheck is how often the access file is stat'ed at most.
const accessRecheck = 2 * time.Second

// Grants are the access grants of an access file: each lets some service
// accounts act in another project, on one queue of it. The operator writes
// the file from the Queues' spec.access into a ConfigMap the server mounts:
//
//	{"grants": [{"project": "P", "queue": "Q", "serviceAccounts": ["NS/NAME"]}]}
//
// The file is stat'ed at most every accessRecheck and read again when it
// changed. A file that does not parse leaves the last good grants in force
// (logged once per change); a missing file means no grants.
type Grants struct {
	path string
	log  *slog.Logger
	now  func() time.Time

	set  atomic.Pointer[grantSet]
	next atomic.Int64 // Unix ns of the next stat

	mu      sync.Mutex // one reload at a time
	seen    os.FileInfo
	missing bool
	statErr string // the last stat error logged
}

type grantKey struct{ project, queue, serviceAccount string }

type grantSet map[grantKey]struct{}

// NewGrants reads the access file at path; "" is a file with no grants.
func NewGrants(path string, log *slog.Logger) *Grants {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Grants{path: path, log: log, now: time.Now}
	g.set.Store(&grantSet{})
	if path != "" {
		g.reload()
		g.next.Store(g.now().Add(accessRecheck).UnixNano())
	}
	return g
}

// Allows reports whether serviceAccount ("namespace/name") may act on
// queue in project.
func (g *Grants) Allows(project, queue, serviceAccount string) bool {
	if g == nil || g.path == "" {
		return false
	}
	if now := g.now(); now.UnixNano() >= g.next.Load() && g.mu.TryLock() {
		g.next.Store(now.Add(accessRecheck).UnixNano())
		g.reloadLocked()
		g.mu.Unlock()
	}
	_, ok := (*g.set.Load())[grantKey{project, queue, serviceAccount}]
	return ok
}

// Len is how many (project, queue, service account) grants are in force.
func (g *Grants) Len() int { return len(*g.set.Load()) }

func (g *Grants) reload() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reloadLocked()
}

func (g *Grants) reloadLocked() {
	fi, err := os.Stat(g.path)
	if errors.Is(err, fs.ErrNotExist) {
		if !g.missing {
			g.log.Info("access file absent: no access grants", "path", g.path)
		}
		g.missing, g.seen = true, nil
		g.set.Store(&grantSet{})
		return
	}
	g.missing = false
	if err != nil {
		if err.Error() != g.statErr {
			g.statErr = err.Error()
			g.log.Error("access file unreadable: the last grants stay in force", "path", g.path, "error", err.Error())
		}
		return
	}
	g.statErr = ""
	if g.seen != nil && os.SameFile(g.seen, fi) && g.seen.ModTime().Equal(fi.ModTime()) && g.seen.Size() == fi.Size() {
		return
	}
	g.seen = fi
	data, err := os.ReadFile(g.path)
	var set grantSet
	if err == nil {
		set, err = parseGrants(data)
	}
	if err != nil {
		g.log.Error("access file rejected: the last grants stay in force", "path", g.path, "error", err.Error())
		return
	}
	g.set.Store(&set)
	g.log.Info("access grants loaded", "path", g.path, "grants", len(set))
}

// parseGrants reads an access file; every grant must name a project, a
// queue and service accounts as namespace/name.
func parseGrants(data []byte) (grantSet, error) {
	var doc struct {
		Grants []struct {
			Project         string   `json:"project"`
			Queue           string   `json:"queue"`
			ServiceAccounts []string `json:"serviceAccounts"`
		} `json:"grants"`
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty")
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	set := grantSet{}
	for i, gr := range doc.Grants {
		if gr.Project == "" || gr.Queue == "" || strings.Contains(gr.Queue, "/") {
			return nil, fmt.Errorf("grant %d: needs a project and a queue name", i)
		}
		for _, sa := range gr.ServiceAccounts {
			ns, name, ok := strings.Cut(sa, "/")
			if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
				return nil, fmt.Errorf("grant %d: service account %q is not namespace/name", i, sa)
			}
			set[grantKey{gr.Project, gr.Queue, sa}] = struct{}{}
		}
	}
	return set, nil
}
