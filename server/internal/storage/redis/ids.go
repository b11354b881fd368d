package redis

import "github.com/google/uuid"

// Message ids. A message posted here is named by its queue's incarnation
// (16 hex digits, chosen by the first post to the queue and kept in its
// hash) and its sequence number, in UUID form:
//
//	iiiiiiii-iiii-iiii-ssss-ssssssssssss
//
// so an entry of the stream area needs no index from id to entry (lib.lua,
// "The stream area"): the script that reads an id finds the entry from
// the id alone. The form is a UUID, which is what clients, markers and
// pooling (storage.IsMessageID) accept; messages moved in from another
// queue keep their ids, whatever their form.

// newIncarnation returns 8 random bytes, which the post script writes in
// hex as the queue's incarnation only when the queue has none yet: most
// posts pass them unused, so they go raw, not formatted. They come from
// uuid's buffered random pool (storage.NewID's), not a syscall per post.
func newIncarnation() [8]byte {
	u := uuid.New()
	return [8]byte(u[:8])
}

// messageID is the id of message seq of incarnation inc (lib.lua's xid).
func messageID(inc string, seq int64) string {
	var b [36]byte
	copy(b[0:8], inc[0:8])
	b[8] = '-'
	copy(b[9:13], inc[8:12])
	b[13] = '-'
	copy(b[14:18], inc[12:16])
	b[18], b[23] = '-', '-'
	const digits = "0123456789abcdef"
	for i := 35; i >= 19; i-- {
		if i == 23 {
			continue
		}
		b[i] = digits[seq&0xf]
		seq >>= 4
	}
	return string(b[:])
}
