package config

import (
	"bytes"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEncryptionKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1 := bytes.Repeat([]byte{1}, 32)
	k2 := bytes.Repeat([]byte{2}, 32)
	b1 := base64.StdEncoding.EncodeToString(k1)
	b2 := base64.RawStdEncoding.EncodeToString(k2)
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, text string
		ids        []string
		wantErr    string
	}{
		{"one key", "k1:" + b1 + "\n", []string{"k1"}, ""},
		{"rotation order, comments, blanks, CRLF, no padding",
			"# newest first\r\n\r\n2025-b : " + b2 + "\r\n  k1:" + b1, []string{"2025-b", "k1"}, ""},
		{"empty file", "", nil, "holds no key"},
		{"only comments", "# nothing\n\n", nil, "holds no key"},
		{"no colon", b1 + "\n", nil, "line 1 is not KEYID:BASE64"},
		{"empty id", ":" + b1, nil, "line 1: the key id is not"},
		{"bad id", "k/1:" + b1, nil, "the key id is not"},
		{"long id", strings.Repeat("a", 33) + ":" + b1, nil, "the key id is not"},
		{"duplicate id", "k1:" + b1 + "\nk1:" + b2, nil, `line 2: key id "k1" appears twice`},
		{"bad base64", "k1:not*base64", nil, `the key of "k1" is not standard base64`},
		{"short key", "k1:" + base64.StdEncoding.EncodeToString(k1[:16]), nil, "is 16 bytes, want 32"},
		{"long key", "k1:" + base64.StdEncoding.EncodeToString(append(k1, 0)), nil, "is 33 bytes, want 32"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := file(strings.ReplaceAll(tc.name, " ", "_"), tc.text)
			l, err := Load([]string{"--encryption-key-file", path}, env(nil), io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			verr := l.Options.Validate()
			if tc.wantErr != "" {
				if verr == nil || !strings.Contains(verr.Error(), tc.wantErr) || !strings.Contains(verr.Error(), path) {
					t.Fatalf("Validate: %v, want %q naming the file", verr, tc.wantErr)
				}
				if strings.Contains(verr.Error(), b1) || strings.Contains(verr.Error(), b2) {
					t.Errorf("the error shows a key: %v", verr)
				}
				return
			}
			if verr != nil {
				t.Fatal(verr)
			}
			keys, _ := l.Options.EncryptionKeys()
			var ids []string
			for _, k := range keys {
				ids = append(ids, k.ID)
				if len(k.Key) != 32 {
					t.Errorf("key %s has %d bytes", k.ID, len(k.Key))
				}
			}
			if strings.Join(ids, ",") != strings.Join(tc.ids, ",") {
				t.Errorf("ids %v, want %v", ids, tc.ids)
			}
			if !bytes.Equal(keys[len(keys)-1].Key, k1) {
				t.Errorf("last key decoded wrong")
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		o := Defaults()
		o.EncryptionKeyFile = filepath.Join(dir, "missing")
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "encryption-key-file") {
			t.Fatalf("Validate: %v", err)
		}
	})
	t.Run("env and yaml", func(t *testing.T) {
		path := file("env", "e:"+b1)
		l, err := Load(nil, env(map[string]string{"SLUICE_ENCRYPTION_KEY_FILE": path}), io.Discard)
		if err != nil || l.Options.EncryptionKeyFile != path {
			t.Fatalf("env: %v %q", err, l.Options.EncryptionKeyFile)
		}
		yml := file("conf.yaml", "encryption-key-file: "+path+"\n")
		l, err = Load([]string{"--config", yml}, env(nil), io.Discard)
		if err != nil || l.Options.EncryptionKeyFile != path {
			t.Fatalf("yaml: %v %q", err, l.Options.EncryptionKeyFile)
		}
		var dump bytes.Buffer
		Dump(&l.Options, &dump)
		if strings.Contains(dump.String(), b1) {
			t.Errorf("--check-config prints a key:\n%s", dump.String())
		}
	})
}
