package config

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
)

// EncryptionKey is one line of the encryption key file: ID names the key
// in every message body it encrypts, Key is its 32 bytes (AES-256).
type EncryptionKey struct {
	ID  string
	Key []byte
}

// MaxKeyIDLen bounds a key id: it is stored with every encrypted message.
const MaxKeyIDLen = 32

// EncryptionKeys reads EncryptionKeyFile: one KEYID:BASE64 a line, blank
// lines and lines starting with # ignored. The first key encrypts, every
// key decrypts, so a key rotates by prepending its successor and, once
// nothing written under it is wanted any more, dropping it. Key ids are 1
// to 32 of A-Z a-z 0-9 . _ - and unique; keys are 32 bytes in standard
// base64 (padding optional: `openssl rand -base64 32`). nil: no file set.
// Errors name the file and line, never a key.
func (o *Options) EncryptionKeys() ([]EncryptionKey, error) {
	if o.EncryptionKeyFile == "" {
		return nil, nil
	}
	data, err := os.ReadFile(o.EncryptionKeyFile)
	if err != nil {
		return nil, fmt.Errorf("encryption-key-file: %w", err)
	}
	keys, err := parseEncryptionKeys(data)
	if err != nil {
		return nil, fmt.Errorf("encryption-key-file %s: %w", o.EncryptionKeyFile, err)
	}
	return keys, nil
}

func parseEncryptionKeys(data []byte) ([]EncryptionKey, error) {
	var keys []EncryptionKey
	seen := map[string]bool{}
	for n, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		id, b64, ok := bytes.Cut(line, []byte(":"))
		id, b64 = bytes.TrimSpace(id), bytes.TrimSpace(b64)
		switch {
		case !ok:
			return nil, fmt.Errorf("line %d is not KEYID:BASE64", n+1)
		case !validKeyID(id):
			// Not echoed: a line pasted the wrong way round starts with a key.
			return nil, fmt.Errorf("line %d: the key id is not 1 to %d of A-Z a-z 0-9 . _ -", n+1, MaxKeyIDLen)
		case seen[string(id)]:
			return nil, fmt.Errorf("line %d: key id %q appears twice", n+1, id)
		}
		seen[string(id)] = true
		enc := base64.StdEncoding
		if len(b64)%4 != 0 {
			enc = base64.RawStdEncoding
		}
		key, err := enc.DecodeString(string(b64))
		switch {
		case err != nil:
			return nil, fmt.Errorf("line %d: the key of %q is not standard base64", n+1, id)
		case len(key) != 32:
			return nil, fmt.Errorf("line %d: the key of %q is %d bytes, want 32 (openssl rand -base64 32)", n+1, id, len(key))
		}
		keys = append(keys, EncryptionKey{ID: string(id), Key: key})
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("holds no key (want KEYID:BASE64 lines)")
	}
	return keys, nil
}

func validKeyID(id []byte) bool {
	if len(id) == 0 || len(id) > MaxKeyIDLen {
		return false
	}
	for _, c := range id {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
