// Package encrypt keeps the message bodies of queues with
// _enable_encrypt_messages encrypted at rest. Its wrapper sits in front of
// the driver the API and the delivery engine call (above pooling), so a
// body is encrypted before any driver, pool or Lua script sees it, and
// every body read back (get, list, claim, pop, stats, deliveries) passes
// through it once.
//
// An encrypted body is stored as an envelope, text that can never be a
// JSON document (every body the API stores is one), so the wrapper knows
// an envelope by its shape alone: not by the queue's current flag, so a
// queue whose flag was turned off, a dead-letter queue without the flag
// and a queue moved to another pool all read what they hold.
//
//	~v1~<key id>~<base64url, unpadded: nonce (12) | ciphertext | tag (16)>
//
// AES-256-GCM with a fresh random 96-bit nonce per message; the additional
// data is "sluice-message-v1", the key id and the queue's project, each
// followed by a zero byte. Binding the project keeps an envelope copied
// into another tenant's queue from opening there; the queue name is not
// bound, since dead-lettering moves bodies between queues of a project
// inside the backend (a Redis script) where nothing re-encrypts them.
// Moves between pools keep project and name, so envelopes move as they are.
// The envelope is ASCII, so it is a valid BSON string for MongoDB.
package encrypt

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"sluice.dev/server/internal/storage"
)

// Key is one encryption key: ID is stored in every envelope it seals,
// Secret is 32 bytes.
type Key struct {
	ID     string
	Secret []byte
}

// Keyring holds the server's keys; the first seals, every one opens.
type Keyring struct {
	keys []*key
}

type key struct {
	id     string
	aead   cipher.AEAD
	prefix string // "~v1~<id>~"
}

const (
	version = "~v1~"
	// overhead is what GCM adds with its random nonce: 12 + 16 bytes.
	overhead = 28
	aadLabel = "sluice-message-v1\x00"
)

// b64 refuses non-canonical trailing bits, so every changed character of
// an envelope changes the bytes GCM authenticates.
var b64 = base64.RawURLEncoding.Strict()

// NewKeyring builds a keyring from keys, the first of which seals. The key
// file's syntax is checked by the config package; this only refuses what
// would make an envelope ambiguous (an empty id or one with '~') or is not
// an AES-256 key.
func NewKeyring(keys []Key) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("encrypt: no key")
	}
	r := &Keyring{}
	for _, k := range keys {
		if k.ID == "" || strings.ContainsRune(k.ID, '~') {
			return nil, fmt.Errorf("encrypt: key id %q", k.ID)
		}
		if len(k.Secret) != 32 {
			return nil, fmt.Errorf("encrypt: key %s is %d bytes, want 32", k.ID, len(k.Secret))
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, err
		}
		aead, err := cipher.NewGCMWithRandomNonce(block)
		if err != nil {
			return nil, err
		}
		r.keys = append(r.keys, &key{id: k.ID, aead: aead, prefix: version + k.ID + "~"})
	}
	return r, nil
}

// IsEnvelope reports whether a stored body is an envelope. No JSON text
// starts with '~', whitespace or not.
func IsEnvelope(body []byte) bool { return len(body) > 0 && body[0] == '~' }

// aad is the additional data of an envelope of key k in project.
func aad(buf []byte, k *key, project string) []byte {
	buf = append(buf, aadLabel...)
	buf = append(buf, k.id...)
	buf = append(buf, 0)
	buf = append(buf, project...)
	return append(buf, 0)
}

// scratch holds the sealed bytes between GCM and base64.
var scratch = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// Seal returns the envelope of body for a queue of project, under the
// first key.
func (r *Keyring) Seal(project string, body []byte) []byte {
	k := r.keys[0]
	bp := scratch.Get().(*[]byte)
	var ad [128]byte
	sealed := k.aead.Seal((*bp)[:0], nil, body, aad(ad[:0], k, project))
	out := make([]byte, len(k.prefix)+b64.EncodedLen(len(sealed)))
	copy(out, k.prefix)
	b64.Encode(out[len(k.prefix):], sealed)
	if cap(sealed) <= 1<<20 {
		*bp = sealed[:0]
		scratch.Put(bp)
	}
	return out
}

// errOpen covers every way an envelope fails to open; which one is not
// told (nor logged with the bytes).
var errOpen = errors.New("envelope does not open")

// Open returns the body an envelope of a queue of project holds, or an
// error when the envelope is malformed, names no key of the ring, or does
// not authenticate (changed bytes, another project).
func (r *Keyring) Open(project string, env []byte) ([]byte, error) {
	if r == nil || len(env) < len(version) || string(env[:len(version)]) != version {
		return nil, errOpen
	}
	rest := env[len(version):]
	i := bytes.IndexByte(rest, '~')
	if i < 0 {
		return nil, errOpen
	}
	id, text := rest[:i], rest[i+1:]
	var k *key
	for _, c := range r.keys {
		if c.id == string(id) {
			k = c
			break
		}
	}
	if k == nil {
		return nil, errOpen
	}
	sealed := make([]byte, b64.DecodedLen(len(text)))
	n, err := b64.Decode(sealed, text)
	if err != nil || n < overhead {
		return nil, errOpen
	}
	var ad [128]byte
	// Decrypted in place: the body is a slice of the one allocation.
	body, err := k.aead.Open(sealed[:0], nil, sealed[:n], aad(ad[:0], k, project))
	if err != nil {
		return nil, errOpen
	}
	return body, nil
}

// open replaces an envelope body by what it holds, or marks the message
// unreadable; other bodies are left as they are.
func (r *Keyring) open(project string, m *storage.Message) {
	if !IsEnvelope(m.Body) {
		return
	}
	body, err := r.Open(project, m.Body)
	m.Body, m.Unreadable = body, err != nil
}
