package pooling

import (
	"hash/fnv"
	"strconv"
	"strings"

	"sluice.dev/server/internal/storage"
)

// The markers of a listing that spans a move. Take moves the newest
// messages, so what has moved is always the queue's tail. A page that ends
// on the source carries the source's own marker, the source pool (its
// poolTag) and the id of the last message listed: when the rest of the queue moves before the
// next page, that page resumes on the target after that message, rather
// than at the target's start, which would list again what moved. A page
// that ends on the target carries the target's marker.
const (
	targetMarker = "moved~"
	sourceMarker = "moving~"
)

// listMarker is a listing's position, parsed.
type listMarker struct {
	inTarget bool
	pool     string // source markers: poolTag of the pool that made it
	lastID   string // source markers: the last message listed ("" when none)
	marker   string // the backend's own marker
}

// parseListMarker reads a marker this package or a backend made. Anything
// else is passed to the backend as it came, which judges it.
func parseListMarker(s string) listMarker {
	if rest, ok := strings.CutPrefix(s, targetMarker); ok {
		return listMarker{inTarget: true, marker: rest}
	}
	if rest, ok := strings.CutPrefix(s, sourceMarker); ok {
		pool, rest, ok1 := strings.Cut(rest, "~")
		lastID, marker, ok2 := strings.Cut(rest, "~")
		if ok1 && ok2 && (lastID == "" || storage.IsMessageID(lastID)) {
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

// String is the marker handed to the client.
func (m listMarker) String() string {
	if m.inTarget {
		return targetMarker + m.marker
	}
	return sourceMarker + m.pool + "~" + m.lastID + "~" + m.marker
}

// on is the marker to give pool's backend: a source marker made by another
// pool, whose queue has since moved here, becomes the last message listed
// (the backend resumes after it, or from the start when it is not there).
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
