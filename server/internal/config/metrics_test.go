package config

import (
	"io"
	"strings"
	"testing"
)

func TestMetricsListenValidated(t *testing.T) {
	for _, c := range []struct {
		listen, metrics string
		off             bool // --metrics=false
		ok              bool
	}{
		{":8888", "", false, true},
		{":8888", ":9464", false, true},
		{"127.0.0.1:8888", "127.0.0.1:9464", false, true},
		{"127.0.0.1:8888", "10.0.0.5:8888", false, true}, // other host, same port
		{"127.0.0.1:0", "127.0.0.1:0", false, true},      // free ports, never the same
		{":8888", ":9464", true, false},                  // metrics off
		{":8888", ":8888", false, false},
		{"127.0.0.1:8888", ":8888", false, false},
		{"0.0.0.0:8888", "127.0.0.1:8888", false, false},
		{":8888", "9464", false, false}, // no host:port
	} {
		o := Defaults()
		o.Listen, o.MetricsListen, o.Metrics = c.listen, c.metrics, !c.off
		err := o.Validate()
		if c.ok && err != nil {
			t.Errorf("listen %q metrics-listen %q metrics %v refused: %v", c.listen, c.metrics, !c.off, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "metrics-listen")) {
			t.Errorf("listen %q metrics-listen %q metrics %v accepted (err %v)", c.listen, c.metrics, !c.off, err)
		}
	}
}

func TestMetricsListenFlagAndEnv(t *testing.T) {
	env := func(k string) string {
		if k == "SLUICE_METRICS_LISTEN" {
			return ":9464"
		}
		return ""
	}
	l, err := Load(nil, env, io.Discard)
	if err != nil || l.Options.MetricsListen != ":9464" {
		t.Fatalf("env: %v %q", err, l.Options.MetricsListen)
	}
	l, err = Load([]string{"--metrics-listen", "127.0.0.1:9465"}, env, io.Discard)
	if err != nil || l.Options.MetricsListen != "127.0.0.1:9465" {
		t.Fatalf("flag over env: %v %q", err, l.Options.MetricsListen)
	}
	if d := Defaults(); d.MetricsListen != "" {
		t.Fatalf("metrics have a listener of their own by default: %q", d.MetricsListen)
	}
}
