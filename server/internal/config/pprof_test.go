package config

import (
	"io"
	"strings"
	"testing"
)

func TestPprofAddrMustBeLoopback(t *testing.T) {
	for addr, ok := range map[string]bool{
		"":               true, // off
		"127.0.0.1:6060": true,
		"[::1]:6060":     true,
		"localhost:6060": true,
		"127.0.0.2:0":    true,
		"0.0.0.0:6060":   false,
		":6060":          false,
		"10.0.0.5:6060":  false,
		"example.com:80": false,
		"127.0.0.1":      false, // no port
	} {
		o := Defaults()
		o.PprofAddr = addr
		err := o.Validate()
		if ok && err != nil {
			t.Errorf("%q refused: %v", addr, err)
		}
		if !ok && (err == nil || !strings.Contains(err.Error(), "pprof-addr")) {
			t.Errorf("%q accepted (err %v)", addr, err)
		}
	}
}

func TestPprofAddrFlagAndEnv(t *testing.T) {
	l, err := Load([]string{"--pprof-addr", "127.0.0.1:6061"}, func(string) string { return "" }, io.Discard)
	if err != nil || l.Options.PprofAddr != "127.0.0.1:6061" {
		t.Fatalf("flag: %v %q", err, l.Options.PprofAddr)
	}
	env := func(k string) string {
		if k == "SLUICE_PPROF_ADDR" {
			return "127.0.0.1:6062"
		}
		return ""
	}
	l, err = Load(nil, env, io.Discard)
	if err != nil || l.Options.PprofAddr != "127.0.0.1:6062" {
		t.Fatalf("env: %v %q", err, l.Options.PprofAddr)
	}
	if d := Defaults(); d.PprofAddr != "" {
		t.Fatalf("pprof is on by default: %q", d.PprofAddr)
	}
}
