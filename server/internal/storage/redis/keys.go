package redis

import (
	"strconv"
	"strings"

	"sluice.dev/server/internal/storage"
)

// Key layout. Every key of one queue starts with its scope
//
//	s:{<len(project)>:<project><len(queue)>:<queue>}
//
// Length prefixes make the mapping from (project, queue) to scope
// injective whatever bytes the names hold, so no project can reach another
// project's keys by choosing names with separators in them. The braces make
// the scope a Redis Cluster hash tag, keeping a queue's keys in one slot.
// Under the scope (see lib.lua): :q :ids :exp :rdy :dly :cl :ch :held,
// the stream area :x :xe :k, and :m:<message id>; while the queue moves
// (migrate.go) :ti :tc
// :t:<message id> :tc:<claim id> (the batch in transit), :mv (ids
// settled) and, on a target, :im (ids imported).
const registryKey = "s:queues" // set of every queue scope, for scrape-time depth

// storageIDKey holds the database's StorageID (migrate.go).
const storageIDKey = "s:storage-id"

// lp length-prefixes s.
func lp(b *strings.Builder, s string) {
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// projectPrefix is the start shared by every scope of a project.
func projectPrefix(project string) string {
	var b strings.Builder
	b.Grow(len(project) + 8)
	b.WriteString("s:{")
	lp(&b, project)
	return b.String()
}

// scope is the key prefix of one queue.
func scope(q storage.QueueRef) string {
	var b strings.Builder
	b.Grow(len(q.Project) + len(q.Name) + 12)
	b.WriteString("s:{")
	lp(&b, q.Project)
	lp(&b, q.Name)
	b.WriteByte('}')
	return b.String()
}

// indexKey is the sorted set of a project's queue names.
func indexKey(project string) string {
	var b strings.Builder
	b.WriteString("s:p:")
	lp(&b, project)
	return b.String()
}

// escapeGlob quotes the characters SCAN MATCH treats specially.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\', '^', '-':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
