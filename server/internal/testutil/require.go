// Package testutil starts the real dependencies tests need (redis-server,
// redis sentinel) as child processes on free loopback ports, and stops them
// when the test ends.
package testutil

import (
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// InCI reports whether the tests run under CI, where a missing dependency
// is a failure rather than a reason to skip: CI set to a non-empty value
// other than 0 or false (any case), the one meaning of CI across the
// project's test support (Go and Python alike).
func InCI() bool {
	v := strings.ToLower(strings.TrimSpace(os.Getenv("CI")))
	return v != "" && v != "0" && v != "false"
}

// RequireBinary returns the path of an executable, or ends the test: it
// fails under CI and skips elsewhere, saying what to install.
func RequireBinary(t testing.TB, name, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	if InCI() {
		t.Fatalf("%s not found (%v); install %s", name, err, hint)
		return ""
	}
	t.Skipf("%s not found (%v); install %s to run this test (it fails under CI=true)", name, err, hint)
	return ""
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Callers that start a server on it retry with a new port if it was taken
// in between.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	return port
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
