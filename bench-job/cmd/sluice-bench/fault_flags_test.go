package main

import (
	"strings"
	"testing"
)

// Every one of these is refused before anything is touched.
func TestFaultFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "which fault?"},
		{[]string{"flood", "--duration", "1s"}, `unknown kind "flood"`},
		{[]string{"partition"}, "--duration is required"},
		{[]string{"partition", "--duration", "0s"}, "--duration 0s must be > 0"},
		{[]string{"partition", "--duration", "-5s"}, "--duration -5s must be > 0"},
		{[]string{"partition", "--duration", "2h"}, "--duration 2h0m0s is over the limit of 1h0m0s"},
		{[]string{"partition", "--duration", "soon"}, `invalid value "soon" for flag -duration`},
		{[]string{"partition", "--duration", "1s", "--port", "0"}, "--port 0 is not a port"},
		{[]string{"partition", "--duration", "1s", "--port", "65536"}, "--port 65536 is not a port"},
		{[]string{"partition", "--duration", "1s", "--port", "redis"}, `invalid value "redis" for flag -port`},
		{[]string{"partition", "--duration", "1s", "now"}, `unexpected argument "now"`},
		{[]string{"partition", "--duration", "1s", "--delay", "1s"}, "flag provided but not defined: -delay"},
		{[]string{"fill", "--duration", "1s", "--jitter", "1ms"}, "flag provided but not defined: -jitter"},
		{[]string{"delay", "--duration", "1s"}, "--delay is required"},
		{[]string{"delay", "--duration", "1s", "--delay", "0s"}, "--delay 0s is not in (0, 30s]"},
		{[]string{"delay", "--duration", "1s", "--delay", "1m"}, "--delay 1m0s is not in (0, 30s]"},
		{[]string{"delay", "--duration", "1s", "--delay", "10ms", "--jitter", "20ms"}, "--jitter 20ms exceeds --delay 10ms"},
		{[]string{"delay", "--duration", "1s", "--delay", "10ms", "--jitter", "-1ms"}, "--jitter -1ms must not be negative"},
		{[]string{"delay", "--duration", "1s", "--delay", "10ms", "--port", "60000"}, "--port 60000 + 10000 is not a port: give --proxy-port"},
		{[]string{"delay", "--duration", "1s", "--delay", "10ms", "--proxy-port", "6379"}, "--proxy-port must differ from --port"},
		{[]string{"delay", "--duration", "1s", "--delay", "10ms", "--proxy-port", "0"}, "--proxy-port 0 is not a port"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errs := cli(t, append([]string{"fault"}, tc.args...)...)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d (usage)\nstderr: %s", code, exitUsage, errs)
			}
			if !strings.Contains(errs, tc.want) {
				t.Fatalf("stderr %q lacks %q", errs, tc.want)
			}
			if out != "" {
				t.Fatalf("stdout %q: a refused fault prints no JSON line", out)
			}
		})
	}
}

func TestFaultHelp(t *testing.T) {
	code, out, _ := cli(t, "fault", "help")
	if code != exitOK || !strings.Contains(out, "sluice-bench fault delay --port PORT --delay D") {
		t.Fatalf("exit %d, usage %q", code, out)
	}
}
