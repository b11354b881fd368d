package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestDefaultsAreValid(t *testing.T) {
	o := Defaults()
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestPrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	yaml := "listen: 127.0.0.1:7000\nstore: redis://file:6379/0\nlog-level: warn\ndrain-delay: 7\nauth-tokens:\n  tok1: projA\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		listen string
		store  string
		drain  time.Duration
		level  string
	}{
		{"defaults", nil, nil, "127.0.0.1:8888", "memory", 5 * time.Second, "info"},
		{"file", []string{"--config", file}, nil, "127.0.0.1:7000", "redis://file:6379/0", 7 * time.Second, "warn"},
		{"env over file", []string{"--config", file}, map[string]string{"SLUICE_LISTEN": "127.0.0.1:7001", "SLUICE_DRAIN_DELAY": "250ms"},
			"127.0.0.1:7001", "redis://file:6379/0", 250 * time.Millisecond, "warn"},
		{"flag over env", []string{"--config", file, "--listen", "127.0.0.1:7002", "--store", "memory"},
			map[string]string{"SLUICE_LISTEN": "127.0.0.1:7001"}, "127.0.0.1:7002", "memory", 7 * time.Second, "warn"},
		{"config from env", nil, map[string]string{"SLUICE_CONFIG": file}, "127.0.0.1:7000", "redis://file:6379/0", 7 * time.Second, "warn"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Load(tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			o := l.Options
			if o.Listen != tc.listen || o.Store != tc.store || o.DrainDelay != tc.drain || o.LogLevel != tc.level {
				t.Errorf("got listen=%s store=%s drain=%v level=%s", o.Listen, o.Store, o.DrainDelay, o.LogLevel)
			}
			if err := o.Validate(); err != nil {
				t.Error(err)
			}
		})
	}
	l, err := Load([]string{"--config", file}, env(nil), io.Discard)
	if err != nil || l.Options.Tokens["tok1"] != "projA" {
		t.Errorf("tokens from YAML: %v %v", l.Options.Tokens, err)
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: x\nno-such-option: 1\n"), 0o600)
	broken := filepath.Join(dir, "broken.yaml")
	os.WriteFile(broken, []byte("listen: [\n"), 0o600)
	cases := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown flag", []string{"--nope"}, nil, "not defined"},
		{"bad duration flag", []string{"--drain-delay", "soon"}, nil, "--drain-delay"},
		{"bad bool env", nil, map[string]string{"SLUICE_ACCESS_LOG": "maybe"}, "SLUICE_ACCESS_LOG"},
		{"bad int env", nil, map[string]string{"SLUICE_MAX_BODY_BYTES": "1MB"}, "SLUICE_MAX_BODY_BYTES"},
		{"unknown yaml key", []string{"--config", bad}, nil, "no-such-option"},
		{"broken yaml", []string{"--config", broken}, nil, "broken.yaml"},
		{"missing file", []string{"--config", filepath.Join(dir, "absent.yaml")}, nil, "config file"},
		{"bad tokens", []string{"--auth-tokens", "justatoken"}, nil, "token=project"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.args, env(tc.env), io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"listen", func(o *Options) { o.Listen = "nonsense" }, "listen"},
		{"store", func(o *Options) { o.Store = " " }, "store"},
		{"log level", func(o *Options) { o.LogLevel = "loud" }, "log-level"},
		{"body cap", func(o *Options) { o.MaxBodyBytes = 10 }, "max-body-bytes"},
		{"post size over body cap", func(o *Options) { o.MaxMessagesPostSize = 2 << 20 }, "max-messages-post-size"},
		{"message ttl", func(o *Options) { o.MaxMessageTTL = time.Second }, "max-message-ttl"},
		{"default ttl above max", func(o *Options) { o.DefaultMessageTTL = 2 * o.MaxMessageTTL }, "default-message-ttl"},
		{"page", func(o *Options) { o.MaxMessagesPerPage = 0 }, "max-messages-per-page"},
		{"negative drain", func(o *Options) { o.DrainDelay = -time.Second }, "drain-delay"},
		{"zero timeout", func(o *Options) { o.StorageTimeout = 0 }, "storage-timeout"},
		{"token equals admin", func(o *Options) { o.Tokens = map[string]string{"t": "p"}; o.AdminToken = "t" }, "admin token"},
	}
	for _, tc := range cases {
		o := Defaults()
		tc.edit(&o)
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

func TestDumpRedactsSecrets(t *testing.T) {
	o := Defaults()
	o.Tokens = map[string]string{"s3cret": "proj"}
	o.AdminToken = "adm1n"
	var b strings.Builder
	Dump(&o, &b)
	out := b.String()
	if strings.Contains(out, "s3cret") || strings.Contains(out, "adm1n") || !strings.Contains(out, "listen=127.0.0.1:8888") {
		t.Errorf("dump:\n%s", out)
	}
}

func TestBareBooleanFlags(t *testing.T) {
	l, err := Load([]string{"--require-confirmation", "--access-log=false", "--smtp-url", "smtp://127.0.0.1:25?from=a@b.c"}, func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Options.RequireConfirmation || l.Options.AccessLog || l.Options.SMTPURL != "smtp://127.0.0.1:25?from=a@b.c" {
		t.Errorf("options %+v", l.Options)
	}
	if err := l.Options.Validate(); err != nil {
		t.Error(err)
	}
	// A bare non-boolean flag still needs its value.
	if _, err := Load([]string{"--listen"}, func(string) string { return "" }, io.Discard); err == nil {
		t.Error("--listen without a value accepted")
	}
	bad := Defaults()
	bad.SMTPURL = "http://x"
	bad.DeliveryPerSubscriber = 0
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "smtp-url") || !strings.Contains(err.Error(), "delivery-per-subscriber") {
		t.Errorf("validate: %v", err)
	}
}
