package testutil

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisOptions tune a test redis-server.
type RedisOptions struct {
	// Persistent turns on the append-only file with fsync on every write,
	// so a Kill followed by Restart loses nothing acknowledged.
	Persistent bool
	// Args are extra redis-server arguments ("--maxmemory", "10mb", ...).
	Args []string
}

// Redis is a redis-server child process on 127.0.0.1 with its own temporary
// directory. It is stopped when the test that started it ends.
type Redis struct {
	Port int
	Addr string // 127.0.0.1:port
	URL  string // redis://127.0.0.1:port/0
	Dir  string

	bin  string
	opts RedisOptions
	argv func() []string // the command line, built anew for each (re)start
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs *SyncBuffer
}

// SyncBuffer is a bytes.Buffer one goroutine (a process, a logger) writes
// while a test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// StartRedis starts a redis-server from the system's packages (Debian:
// redis-server) on a free port and waits until it answers PING. It is
// stopped when the test ends. Without redis-server the test fails under
// CI=true and is skipped otherwise.
func StartRedis(t testing.TB, opts RedisOptions) *Redis {
	t.Helper()
	bin := RequireBinary(t, "redis-server", redisHint)
	r, err := newRedis(bin, t.TempDir(), opts)
	if err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(r.Stop)
	return r
}

const redisHint = "the Debian package redis-server (make deps-apt)"

// newRedis starts a server in dir, retrying on another port if the chosen
// one was taken meanwhile.
func newRedis(bin, dir string, opts RedisOptions) (*Redis, error) {
	r := &Redis{bin: bin, Dir: dir, opts: opts}
	r.argv = r.args
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if r.Port, err = freePort(); err != nil {
			return nil, err
		}
		if err = r.start(); err == nil {
			r.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port))
			r.URL = "redis://" + r.Addr + "/0"
			return r, nil
		}
	}
	return nil, err
}

// RunWithRedis is a TestMain body for packages whose tests share one
// redis-server: it starts the server into *r, runs the tests, stops the
// server and exits. Without redis-server it exits with failure under
// CI=true; otherwise it leaves *r nil, and tests call NoRedis to skip.
func RunWithRedis(m *testing.M, r **Redis) {
	os.Exit(runWithRedis(m, r))
}

func runWithRedis(m *testing.M, r **Redis) int {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if InCI() {
			fmt.Fprintf(os.Stderr, "redis-server not found (%v); install %s\n", err, redisHint)
			return 1
		}
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "sluice-redis-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	srv, err := newRedis(bin, dir, RedisOptions{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "starting redis-server: %v\n", err)
		return 1
	}
	defer srv.Stop()
	*r = srv
	return m.Run()
}

// NoRedis ends a test that needed the RunWithRedis server but has none:
// skipped, saying why (RunWithRedis already failed the run under CI).
func NoRedis(t testing.TB) {
	t.Helper()
	if InCI() {
		t.Fatal("redis-server is required under CI=true")
	}
	t.Skipf("redis-server not found; install %s to run this test", redisHint)
}

func (r *Redis) args() []string {
	args := []string{
		"--port", strconv.Itoa(r.Port),
		"--bind", "127.0.0.1",
		"--dir", r.Dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--save", "",
		"--logfile", "",
	}
	if r.opts.Persistent {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	return append(args, r.opts.Args...)
}

// start launches the process on r.Port and waits for PING to answer.
func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.launch(r.bin, r.argv())
}

func (r *Redis) launch(bin string, args []string) error {
	cmd := exec.Command(bin, args...)
	r.logs = &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = r.logs, r.logs
	// Own process group: a signal to the test binary's group (Ctrl-C) must
	// not race with our orderly shutdown, and we never signal anyone else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(r.Port))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			return fmt.Errorf("%s exited at start: %s", filepath.Base(bin), strings.TrimSpace(r.logs.String()))
		default:
		}
		if err := ping(addr); err == nil {
			r.cmd, r.done = cmd, done
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("%s did not answer PING on %s within 10s: %s", filepath.Base(bin), addr, r.logs.String())
}

// ping sends one RESP PING and expects +PONG, or NOAUTH from a server that
// requires a password (it answers, which is all start-up waits for).
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" && !strings.HasPrefix(line, "-NOAUTH") {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// Stop shuts the server down (SIGTERM, then SIGKILL after 5 s). Stopping a
// stopped server does nothing.
func (r *Redis) Stop() { r.signal(syscall.SIGTERM) }

// Kill ends the server at once with SIGKILL, as a crash would.
func (r *Redis) Kill() { r.signal(syscall.SIGKILL) }

func (r *Redis) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

// Pause stops the process (SIGSTOP) without ending it: its clients' calls
// wait, as on a server that hangs, until Resume.
func (r *Redis) Pause() { r.stopOrContinue(syscall.SIGSTOP) }

// Resume lets a paused server go on (SIGCONT).
func (r *Redis) Resume() { r.stopOrContinue(syscall.SIGCONT) }

func (r *Redis) stopOrContinue(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

// Restart starts a stopped or killed server again on the same port and
// directory (with Persistent, its data comes back from the AOF).
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		t.Fatalf("restarting redis-server on %s: %v", r.Addr, err)
	}
}

// Running reports whether the process is up.
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// Logs returns what the server printed so far (for failure messages).
func (r *Redis) Logs() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.logs == nil {
		return ""
	}
	return r.logs.String()
}

// writeFile writes a config file into the server's directory.
func writeFile(dir, name, text string) (string, error) {
	p := filepath.Join(dir, name)
	return p, os.WriteFile(p, []byte(text), 0o600)
}
