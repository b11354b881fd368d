package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAuthModes(t *testing.T) {
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "password")
	os.WriteFile(pwFile, []byte("from-secret\n"), 0o600)
	keystone := []string{"--auth", "keystone", "--keystone-url", "http://127.0.0.1:5000", "--keystone-username", "sluice", "--keystone-project", "service"}
	cases := []struct {
		name string
		args []string
		env  map[string]string
		mode string
		want string // substring of the validation error; "" = valid
	}{
		{"default is none", nil, nil, AuthNone, ""},
		{"tokens implied", []string{"--auth-tokens", "t=p"}, nil, AuthTokens, ""},
		{"tokens without any", []string{"--auth", "tokens"}, nil, AuthTokens, "needs auth-tokens"},
		{"unknown mode", []string{"--auth", "ldap"}, nil, "ldap", "not one of"},
		{"keystone, password in env", keystone, map[string]string{"SLUICE_KEYSTONE_PASSWORD": "pw"}, AuthKeystone, ""},
		{"keystone, password file", append(keystone, "--keystone-password-file", pwFile), nil, AuthKeystone, ""},
		{"keystone, no password", keystone, nil, AuthKeystone, "keystone-password"},
		{"keystone, both passwords", append(keystone, "--keystone-password", "x", "--keystone-password-file", pwFile), nil, AuthKeystone, "not both"},
		{"keystone, missing file", append(keystone, "--keystone-password-file", filepath.Join(dir, "none")), nil, AuthKeystone, "keystone-password-file"},
		{"keystone and static tokens", append(keystone, "--keystone-password", "x", "--auth-tokens", "t=p"), nil, AuthKeystone, "auth-tokens"},
		{"keystone, bad url", []string{"--auth", "keystone", "--keystone-url", "keystone:5000", "--keystone-username", "u", "--keystone-project", "p", "--keystone-password", "x"}, nil, AuthKeystone, "keystone-url"},
		{"keystone, zero revalidate", append(keystone, "--keystone-password", "x", "--keystone-revalidate", "0"), nil, AuthKeystone, "keystone-revalidate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Load(tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			o := l.Options
			if o.AuthMode() != tc.mode {
				t.Errorf("mode %q, want %q", o.AuthMode(), tc.mode)
			}
			err = o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate: %v, want %q", err, tc.want)
			}
		})
	}
	l, _ := Load(append(keystone, "--keystone-password-file", pwFile), env(nil), io.Discard)
	if pw, err := l.Options.KeystonePassword(); pw != "from-secret" || err != nil {
		t.Errorf("password from file: %q %v", pw, err)
	}
}

func TestDumpRedactsKeystonePassword(t *testing.T) {
	o := Defaults()
	o.Keystone.Password = "ks-s3cret"
	var b strings.Builder
	Dump(&o, &b)
	if strings.Contains(b.String(), "ks-s3cret") || !strings.Contains(b.String(), "keystone-password=<redacted>") {
		t.Errorf("dump:\n%s", b.String())
	}
}
