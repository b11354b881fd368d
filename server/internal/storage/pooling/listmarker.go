package pooling

import (
	"hash/fnv"
	"strconv"
	"strings"

	"sluice.dev/server/internal/storage"
)

// The markers of a listing. The queue may move to another pool between two
// pages (a Pool scale-down, a Queue moved), so each marker names the pool
// whose backend made it (its poolTag), the id of the last message listed
// so far, and that backend's own marker. On the pool that made it, the
// backend's marker goes on; on any other, the listing resumes after the
// last message listed. Take moves the newest messages, so what has moved
// is always the queue's tail: once that message is on the target, so is
// everything after it.
const poolMarker = "pool~"

// The markers of earlier versions, still read: a client may page across an
// upgrade. The first has poolMarker's fields; the second is the marker of
// a move's target, which made it.
const (
	legacyPoolMarker   = "moving~"
	legacyTargetMarker = "moved~"
)

// listMarker is a listing's position, parsed.
type listMarker struct {
	inTarget bool   // legacyTargetMarker: made by the target of a move
	pool     string // poolTag of the pool that made it ("" for a backend's or client's marker)
	lastID   string // the last message listed ("" when none)
	marker   string // the backend's own marker
}

// parseListMarker reads a marker this package or a backend made. Anything
// else is passed to the backend as it came, which judges it.
func parseListMarker(s string) listMarker {
	if rest, ok := strings.CutPrefix(s, legacyTargetMarker); ok {
		return listMarker{inTarget: true, marker: rest}
	}
	rest, ok := strings.CutPrefix(s, poolMarker)
	if !ok {
		rest, ok = strings.CutPrefix(s, legacyPoolMarker)
	}
	if ok {
		pool, rest, ok1 := strings.Cut(rest, "~")
		lastID, marker, ok2 := strings.Cut(rest, "~")
		if ok1 && ok2 && pool != "" && (lastID == "" || storage.IsMessageID(lastID)) {
			return listMarker{pool: pool, lastID: lastID, marker: marker}
		}
	}
	m := listMarker{marker: s}
	if storage.IsMessageID(s) {
		// Zaqar's own marker form: the last message listed.
		m.lastID = s
	}
	return m
}

// poolListMarker is the marker of a page that pool's backend ended with
// marker, lastID being the last message listed so far.
func poolListMarker(pool, lastID, marker string) string {
	return poolMarker + poolTag(pool) + "~" + lastID + "~" + marker
}

// madeBy reports whether pool made the marker.
func (m listMarker) madeBy(pool string) bool { return m.pool != "" && m.pool == poolTag(pool) }

// on is the marker to give pool's backend: a marker made by another pool,
// whose queue has since moved here, becomes the last message listed (the
// backend resumes after it, or from the start when it is not there).
func (m listMarker) on(pool string) string {
	if m.pool != "" && m.pool != poolTag(pool) {
		return m.lastID
	}
	return m.marker
}

// poolTag names a pool in markers, which clients see: a hash, since pool
// names are the operator's business, not the tenant's.
func poolTag(pool string) string {
	h := fnv.New32a()
	h.Write([]byte(pool))
	return strconv.FormatUint(uint64(h.Sum32()), 36)
}
