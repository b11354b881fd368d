package testutil

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

//go:embed smtp.py
var smtpScript string

// SMTPPythonEnv names the Python interpreter that has aiosmtpd installed;
// mk/server.mk builds that venv and exports it.
const SMTPPythonEnv = "SLUICE_SMTP_PYTHON"

// Mail is one message an SMTP server received.
type Mail struct {
	From string   `json:"from"`
	To   []string `json:"to"`
	Data string   `json:"data"`
}

// SMTPServer is a real SMTP server process (aiosmtpd, or the smtpd module
// of Python <= 3.11) on a free loopback port.
type SMTPServer struct {
	Addr string

	mu   sync.Mutex
	mail []Mail
}

// smtpPythons lists interpreters to try, best first.
func smtpPythons() []string {
	var out []string
	if p := os.Getenv(SMTPPythonEnv); p != "" {
		out = append(out, p)
	}
	cache := os.Getenv("SLUICE_CACHE")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache", "sluice")
	}
	found, _ := filepath.Glob(filepath.Join(cache, "venv-smtp-*", "bin", "python"))
	sort.Sort(sort.Reverse(sort.StringSlice(found)))
	out = append(out, found...)
	if p, err := exec.LookPath("python3"); err == nil {
		out = append(out, p)
	}
	return out
}

// StartSMTP starts an SMTP server for the test and stops it at cleanup.
// Without a Python that can run one the test fails under CI=true and is
// skipped otherwise.
func StartSMTP(t testing.TB) *SMTPServer {
	t.Helper()
	script := filepath.Join(t.TempDir(), "smtp.py")
	if err := os.WriteFile(script, []byte(smtpScript), 0o600); err != nil {
		t.Fatal(err)
	}
	var errs []string
	for _, py := range smtpPythons() {
		for attempt := 0; attempt < 3; attempt++ {
			s, err := startSMTP(t, py, script)
			if err == nil {
				return s
			}
			errs = append(errs, fmt.Sprintf("%s: %v", py, err))
		}
	}
	msg := fmt.Sprintf("no SMTP server could be started (run `make venv-smtp` or set %s): %v", SMTPPythonEnv, errs)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg + " (this test fails under CI=true)")
	return nil
}

func startSMTP(t testing.TB, python, script string) (*SMTPServer, error) {
	port := FreePort(t)
	cmd := exec.Command(python, "-W", "ignore", script, strconv.Itoa(port))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &SMTPServer{Addr: "127.0.0.1:" + strconv.Itoa(port)}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		first := true
		for sc.Scan() {
			if first {
				first = false
				var r struct {
					Ready int `json:"ready"`
				}
				if json.Unmarshal(sc.Bytes(), &r) != nil || r.Ready != port {
					ready <- fmt.Errorf("unexpected first line %q", sc.Text())
					return
				}
				ready <- nil
				continue
			}
			var m Mail
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				s.mu.Lock()
				s.mail = append(s.mail, m)
				s.mu.Unlock()
			}
		}
		if first {
			ready <- fmt.Errorf("exited before listening")
		}
	}()
	stop := func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	select {
	case err := <-ready:
		if err != nil {
			stop()
			return nil, err
		}
	case <-time.After(15 * time.Second):
		stop()
		return nil, fmt.Errorf("not ready in 15s")
	}
	t.Cleanup(stop)
	return s, nil
}

// Mail returns the messages received so far.
func (s *SMTPServer) Mail() []Mail {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Mail(nil), s.mail...)
}
