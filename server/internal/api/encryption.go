package api

import (
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage/encrypt"
)

// keyring builds the encryption keys of --encryption-key-file (nil when
// none is set). Validate has read and checked the file already; a file
// that changed since and no longer reads leaves the server without keys,
// which refuses encrypted posts rather than store them in the clear.
func keyring(opts config.Options) *encrypt.Keyring {
	keys, err := opts.EncryptionKeys()
	if err != nil || len(keys) == 0 {
		return nil
	}
	ks := make([]encrypt.Key, len(keys))
	for i, k := range keys {
		ks[i] = encrypt.Key{ID: k.ID, Secret: k.Key}
	}
	r, err := encrypt.NewKeyring(ks)
	if err != nil {
		return nil
	}
	return r
}
