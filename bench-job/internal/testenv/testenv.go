// Package testenv starts the real processes sluice-bench's tests run
// against: a sluice-server binary (memory or Redis store) and a Debian
// redis-server, each on a free loopback port, stopped when the test ends.
// A test that cannot get them fails under CI (InCI) and skips otherwise.
package testenv

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// InCI reports whether the tests run under CI: CI set to anything but
// empty, 0 or false (GitHub and GitLab set CI=true, others CI=1), the one
// definition every suite of the repository uses.
func InCI() bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv("CI"))) {
	case "", "0", "false":
		return false
	}
	return true
}

// Unavailable fails the test under CI and skips it otherwise.
func Unavailable(t testing.TB, format string, a ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, a...)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (set CI=true to make this a failure)")
}

// FreePort returns a loopback port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// ServerBin locates sluice-server: $SLUICE_SERVER_BIN, else the repo's
// build/bin/sluice-server (built by `make build-server`).
func ServerBin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SLUICE_SERVER_BIN"); p != "" {
		return p
	}
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "..", "build", "bin", "sluice-server")
	if _, err := os.Stat(p); err != nil {
		Unavailable(t, "sluice-server binary not found at %s: run `make build-server` or set SLUICE_SERVER_BIN", p)
	}
	return p
}

// proc is a started process; done closes when it exits.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func start(t testing.TB, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(name, args...)
	logf, err := os.CreateTemp(t.TempDir(), filepath.Base(name)+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		Unavailable(t, "cannot start %s: %v", name, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			if b, err := os.ReadFile(logf.Name()); err == nil && len(b) > 0 {
				t.Logf("%s log (tail):\n%s", name, tail(b, 2000))
			}
		}
		logf.Close()
	})
	return p
}

// exited reports whether the process has already stopped.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// Redis starts redis-server without persistence and returns its address.
func Redis(t testing.TB) string {
	t.Helper()
	addr, _ := redis(t)
	return addr
}

// RedisStoppable is Redis with a stop that kills it (SIGKILL, as a fault
// does) and returns once it has exited; it may be called more than once.
func RedisStoppable(t testing.TB) (addr string, stop func()) {
	t.Helper()
	addr, p := redis(t)
	return addr, func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func redis(t testing.TB) (string, *proc) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		Unavailable(t, "redis-server not installed (apt-get install redis-server)")
	}
	port := FreePort(t)
	p := start(t, bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("redis-server did not listen on %s", addr)
	return "", nil
}

// Server starts sluice-server with the given store URI ("memory" or
// "redis://host:port/0") and extra flags, and returns its base URL once it
// answers.
func Server(t testing.TB, store string, extra ...string) string {
	t.Helper()
	bin := ServerBin(t)
	port := FreePort(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := start(t, bin, append([]string{"--listen", addr, "--store", store, "--access-log=false", "--log-level", "warn"}, extra...)...)
	url := "http://" + addr
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !p.exited() {
		req, _ := http.NewRequest("GET", url+"/v2/ping", nil)
		req.Header.Set("Client-ID", "3381af92-2b9e-11e3-b191-71861300734c")
		req.Header.Set("X-Project-ID", "probe")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 204 || resp.StatusCode == 401 { // 401: up, with auth
				return url
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("sluice-server (%s) did not become ready on %s", store, addr)
	return ""
}

// Stores returns the stores every integration test runs against: the
// memory store and a real Redis.
func Stores(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"memory": func(t *testing.T) string { return Server(t, "memory") },
		"redis":  func(t *testing.T) string { return Server(t, "redis://"+Redis(t)+"/0") },
	}
}
