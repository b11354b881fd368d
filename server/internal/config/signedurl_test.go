package config

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSignedURLSecret(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "key")
	if err := os.WriteFile(file, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		args    []string
		env     map[string]string
		key     string
		wantErr string
	}{
		{"off by default", nil, nil, "", ""},
		{"flag", []string{"--signed-url-secret", "s3"}, nil, "s3", ""},
		{"env", nil, map[string]string{"SLUICE_SIGNED_URL_SECRET": "e"}, "e", ""},
		{"file, newline dropped", []string{"--signed-url-secret-file", file}, nil, "from-file", ""},
		{"file from env", nil, map[string]string{"SLUICE_SIGNED_URL_SECRET_FILE": file}, "from-file", ""},
		{"both", []string{"--signed-url-secret", "s3", "--signed-url-secret-file", file}, nil, "", "set one, not both"},
		{"missing file", []string{"--signed-url-secret-file", filepath.Join(dir, "nope")}, nil, "", "no such file"},
		{"empty file", []string{"--signed-url-secret-file", empty}, nil, "", "is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Load(tc.args, env(tc.env), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			verr := l.Options.Validate()
			if tc.wantErr != "" {
				if verr == nil || !strings.Contains(verr.Error(), tc.wantErr) {
					t.Fatalf("Validate: %v, want %q", verr, tc.wantErr)
				}
				return
			}
			if verr != nil {
				t.Fatal(verr)
			}
			key, _ := l.Options.SignedURLKey()
			if string(key) != tc.key {
				t.Errorf("key %q, want %q", key, tc.key)
			}
			var dump bytes.Buffer
			Dump(&l.Options, &dump)
			if tc.key != "" && strings.Contains(dump.String(), "="+tc.key+"\n") {
				t.Errorf("--check-config prints the secret:\n%s", dump.String())
			}
		})
	}
}
