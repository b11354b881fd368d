package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/redis/go-redis/v9"

	"sluice.dev/bench/internal/testenv"
)

// lineBuffer collects a fault's stdout while it runs.
type lineBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lineBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// line returns the first JSON line that has key ("injected", "undone").
func (b *lineBuffer) line(key string) map[string]any {
	for _, l := range strings.Split(b.String(), "\n") {
		var d map[string]any
		if json.Unmarshal([]byte(l), &d) == nil && d[key] != nil {
			return d
		}
	}
	return nil
}

// waitLine waits up to timeout for the line with key; done, when it
// closes first, means the fault exited without printing it.
func (b *lineBuffer) waitLine(t *testing.T, key string, timeout time.Duration, done <-chan struct{}, stderr func() string) map[string]any {
	t.Helper()
	deadline := time.After(timeout)
	for {
		if d := b.line(key); d != nil {
			return d
		}
		select {
		case <-done:
			if d := b.line(key); d != nil {
				return d
			}
			t.Fatalf("the fault exited without a %q line\nstdout: %s\nstderr: %s", key, b.String(), stderr())
		case <-deadline:
			t.Fatalf("no %q line after %v\nstdout: %s\nstderr: %s", key, timeout, b.String(), stderr())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// number reads a JSON number field.
func number(t *testing.T, d map[string]any, key string) float64 {
	t.Helper()
	v, ok := d[key].(float64)
	if !ok {
		t.Fatalf("field %q is %v in %v", key, d[key], d)
	}
	return v
}

// emptyTermLog creates a termination log as Kubernetes does: the fault
// writes only into a file that exists.
func emptyTermLog(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "termination-log")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func checkTermLog(t *testing.T, path, pattern string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(pattern).Match(b) {
		t.Fatalf("termination log %q does not match %s", b, pattern)
	}
}

// startLogged starts a process whose output is shown if the test fails,
// and kills it when the test ends.
func startLogged(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	var log lineBuffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		testenv.Unavailable(t, "cannot start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("%s %s output:\n%s", name, strings.Join(args, " "), log.String())
		}
	})
	return cmd
}

// faultRedis starts redis-server (through prefix, e.g. `ip netns exec NS`)
// listening on bind:port, with the extra arguments, and waits until addr
// (where the test reaches it) accepts connections.
func faultRedis(t *testing.T, prefix []string, bind string, port int, addr string, extra ...string) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		testenv.Unavailable(t, "redis-server not installed (apt-get install redis-server)")
	}
	args := append(append(append([]string{}, prefix...), bin, "--port", strconv.Itoa(port), "--bind", bind,
		"--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", t.TempDir()), extra...)
	startLogged(t, args[0], args[1:]...)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("redis-server did not listen on %s", addr)
}

// redisClient talks to a test's Redis as the test, not through the fault.
func redisClient(t *testing.T, opts *redis.Options) *redis.Client {
	t.Helper()
	opts.Protocol, opts.DisableIdentity = 2, true
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// testNetns is a throwaway network namespace joined to the test's by a
// veth pair: hostIP on the test's side, nsIP inside.
type testNetns struct {
	name, hostIP, nsIP string
}

func ipCmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

func newTestNetns(t *testing.T) *testNetns {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Unavailable(t, "network namespace tests run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		testenv.Unavailable(t, "iproute2's ip is not installed")
	}
	id := fmt.Sprintf("%08d", rand.IntN(100_000_000))
	ns := &testNetns{name: "sluice-fault-" + id}
	host, peer := "sfh"+id, "sfn"+id // at most 15 bytes, as interface names must be
	x, y, err := freeSubnet()
	if err != nil {
		t.Fatal(err)
	}
	ns.hostIP, ns.nsIP = fmt.Sprintf("10.213.%d.%d", x, y+1), fmt.Sprintf("10.213.%d.%d", x, y+2)
	if err := ipCmd("netns", "add", ns.name); err != nil {
		testenv.Unavailable(t, "cannot create a network namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = ipCmd("link", "del", host) // deleting either end deletes the pair
		_ = ipCmd("netns", "del", ns.name)
	})
	for _, args := range [][]string{
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns.name},
		{"addr", "add", ns.hostIP + "/30", "dev", host},
		{"link", "set", host, "up"},
		{"-n", ns.name, "addr", "add", ns.nsIP + "/30", "dev", peer},
		{"-n", ns.name, "link", "set", peer, "up"},
		{"-n", ns.name, "link", "set", "lo", "up"},
	} {
		if err := ipCmd(args...); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// freeSubnet picks a private /30, 10.213.x.y/30, that no interface here
// uses, so that runs at the same time do not collide.
func freeSubnet() (x, y int, err error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output()
	if err != nil {
		return 0, 0, err
	}
	used := map[[2]int]bool{}
	for _, f := range strings.Fields(string(out)) {
		var a, b int
		if n, _ := fmt.Sscanf(f, "10.213.%d.%d/", &a, &b); n == 2 {
			used[[2]int{a, b / 4}] = true
		}
	}
	for i := 0; i < 100; i++ {
		x, y = rand.IntN(256), rand.IntN(64)*4
		if !used[[2]int{x, y / 4}] {
			return x, y, nil
		}
	}
	return 0, 0, fmt.Errorf("no free /30 in 10.213.0.0/16")
}

// nft opens nf_tables inside the namespace, from the test's process.
func (ns *testNetns) nft(t *testing.T) *nftables.Conn {
	t.Helper()
	f, err := os.Open("/run/netns/" + ns.name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	c, err := nftables.New(nftables.WithNetNSFd(int(f.Fd())))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tables lists the namespace's nftables tables whose name starts with prefix.
func (ns *testNetns) tables(t *testing.T, prefix string) []string {
	t.Helper()
	ts, err := ns.nft(t).ListTables()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tb := range ts {
		if strings.HasPrefix(tb.Name, prefix) {
			names = append(names, tb.Name)
		}
	}
	return names
}

// buildBench builds sluice-bench as its image does (static, no cgo).
func buildBench(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		testenv.Unavailable(t, "the go command is not on PATH: %v", err)
	}
	out := filepath.Join(t.TempDir(), "sluice-bench")
	cmd := exec.Command(goBin, "build", "-o", out, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// netnsFault is a sluice-bench fault running inside a test namespace.
type netnsFault struct {
	cmd       *exec.Cmd
	out, errb lineBuffer
	done      chan struct{}
	exitCode  int
}

func startNetnsFault(t *testing.T, ns *testNetns, bin string, args ...string) *netnsFault {
	t.Helper()
	f := &netnsFault{done: make(chan struct{})}
	f.cmd = exec.Command("ip", append([]string{"netns", "exec", ns.name, bin, "fault"}, args...)...)
	f.cmd.Stdout, f.cmd.Stderr = &f.out, &f.errb
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = f.cmd.Wait()
		f.exitCode = f.cmd.ProcessState.ExitCode()
		close(f.done)
	}()
	t.Cleanup(func() {
		// `ip netns exec` execs the command, so this signals the fault
		// itself: it undoes, then exits.
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-f.done:
		case <-time.After(30 * time.Second):
			_ = f.cmd.Process.Kill()
			<-f.done
		}
	})
	return f
}

func (f *netnsFault) waitLine(t *testing.T, key string, timeout time.Duration) map[string]any {
	t.Helper()
	return f.out.waitLine(t, key, timeout, f.done, f.errb.String)
}

// wait waits for the fault to exit and returns its exit code.
func (f *netnsFault) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-f.done:
		return f.exitCode
	case <-time.After(timeout):
		t.Fatalf("the fault still runs after %v\nstdout: %s\nstderr: %s", timeout, f.out.String(), f.errb.String())
	}
	return -1
}
