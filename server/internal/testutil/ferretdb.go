package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// FerretDBEnv names the environment variable holding the FerretDB binary that
// mk/pooling.mk builds from the Go module proxy and exports.
const FerretDBEnv = "SLUICE_FERRETDB_BIN"

// FerretDB is a FerretDB process (MongoDB wire protocol over SQLite) started
// on a free loopback port with its data in a temporary directory.
type FerretDB struct {
	Addr string // host:port
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// FerretDBBinary finds the FerretDB binary: $SLUICE_FERRETDB_BIN, else the
// newest build in the make cache. It returns "" when there is none.
func FerretDBBinary() string {
	if p := os.Getenv(FerretDBEnv); p != "" {
		return p
	}
	cache := os.Getenv("SLUICE_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "sluice")
	}
	found, _ := filepath.Glob(filepath.Join(cache, "ferretdb-*", "ferretdb"))
	sort.Strings(found)
	if len(found) == 0 {
		return ""
	}
	return found[len(found)-1]
}

// StartFerretDB starts FerretDB for the test and stops it at cleanup. When
// the binary is missing the test fails under CI=true and is skipped otherwise.
func StartFerretDB(t testing.TB) *FerretDB {
	t.Helper()
	bin := FerretDBBinary()
	if bin == "" {
		ferretMissing(t, "FerretDB binary not found: run `make ferretdb` or set "+FerretDBEnv)
	}
	if _, err := os.Stat(bin); err != nil {
		ferretMissing(t, fmt.Sprintf("FerretDB binary %s: %v", bin, err))
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		f, err := startFerretDB(bin, t.TempDir())
		if err == nil {
			t.Cleanup(f.Stop)
			return f
		}
		lastErr = err
	}
	t.Fatalf("start FerretDB: %v", lastErr)
	return nil
}

func startFerretDB(bin, dir string) (*FerretDB, error) {
	port, err := ferretFreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "ferretdb.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--listen-addr="+addr,
		// WAL with synchronous=NORMAL: a test database need not survive
		// power loss, and one fsync per write makes FerretDB crawl.
		"--sqlite-url=file:"+data+"/?_pragma=synchronous(normal)",
		"--log-level=warn",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	ferretDieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &FerretDB{Addr: addr, cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); close(f.done) }()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-f.done:
			out, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("ferretdb exited: %s", ferretTail(string(out)))
		default:
		}
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return f, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.Stop()
	return nil, fmt.Errorf("ferretdb did not listen on %s within 15s", addr)
}

// URI returns a mongodb:// URI for database db on this FerretDB.
func (f *FerretDB) URI(db string) string {
	return "mongodb://" + f.Addr + "/" + db
}

// Stop kills the process (it was started by this harness) and waits for it.
func (f *FerretDB) Stop() {
	if f.cmd.Process == nil {
		return
	}
	select {
	case <-f.done:
		return
	default:
	}
	_ = f.cmd.Process.Kill()
	<-f.done
}

func ferretFreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func ferretTail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	return strings.Join(lines, "\n")
}

// ferretMissing fails the test under CI=true (a dependency CI must have) and
// skips it elsewhere, saying why.
func ferretMissing(t testing.TB, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI is set: required)", why)
	}
	t.Skipf("skipping: %s", why)
}
