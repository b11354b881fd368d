// Package catalog keeps the pooling state shared by every server replica:
// the pools (backend shards), the flavors that group them and the queue ->
// pool placement. It lives in a management store of its own (redis:// or
// mongodb://), separate from the message pools.
//
// Placement is recorded with a set-if-absent (HSETNX / insert-unique), so of
// several replicas placing the same queue at once exactly one record wins and
// all of them route to it; it changes only when the queue is deleted.
// Replicas cache pools, flavors and placements in memory and drop the cache
// whenever the store's version token changes.
package catalog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"sluice.dev/server/internal/storage"
)

// DefaultPool is the placement of a queue that lives on the server's
// configured default store: it existed there before pools were registered.
const DefaultPool = "_default"

// Pool is one backend shard.
type Pool struct {
	Name    string         `json:"name"`
	URI     string         `json:"uri"`
	Weight  int            `json:"weight"`
	Flavor  string         `json:"flavor,omitempty"`
	Options map[string]any `json:"options,omitempty"`
}

// Flavor groups pools; a queue with `_flavor` metadata is placed on one of
// its pools. Pools is derived from the pools' Flavor fields, as in Zaqar: a
// pool belongs to at most one flavor.
type Flavor struct {
	Name         string         `json:"name"`
	Pools        []string       `json:"pool_list"`
	Capabilities map[string]any `json:"capabilities,omitempty"`
}

// Store is a management store backend.
type Store interface {
	// PutPool creates or replaces a pool (flavor membership included);
	// Conflict if another pool has its URI.
	PutPool(ctx context.Context, p Pool) (created bool, err error)
	// ReplacePool is PutPool for a pool that must exist: NotFound, and
	// nothing written, when it does not (a patch must not bring back a
	// pool deleted since it was read).
	ReplacePool(ctx context.Context, p Pool) error
	// GetPool returns a pool or NotFound.
	GetPool(ctx context.Context, name string) (Pool, error)
	// ListPools returns every pool sorted by name.
	ListPools(ctx context.Context) ([]Pool, error)
	// DeletePool removes a pool that holds no queue; otherwise Conflict.
	DeletePool(ctx context.Context, name string) error
	// PutFlavor creates or replaces a flavor and makes exactly f.Pools its
	// members; every listed pool must exist (else Invalid).
	PutFlavor(ctx context.Context, f Flavor) (created bool, err error)
	// ReplaceFlavor is PutFlavor for a flavor that must exist: NotFound,
	// and nothing written, when it does not.
	ReplaceFlavor(ctx context.Context, f Flavor) error
	// GetFlavor returns a flavor with its pool list, or NotFound.
	GetFlavor(ctx context.Context, name string) (Flavor, error)
	// ListFlavors returns every flavor sorted by name.
	ListFlavors(ctx context.Context) ([]Flavor, error)
	// DeleteFlavor removes a flavor; its pools stay, without a flavor.
	DeleteFlavor(ctx context.Context, name string) error
	// Place records q on pool unless q is placed already, and returns the
	// recorded pool either way. Placing on a pool that is not registered
	// (DefaultPool excepted) is Invalid.
	Place(ctx context.Context, q storage.QueueRef, pool string) (string, error)
	// Lookup returns q's pool, or "" when q is not placed.
	Lookup(ctx context.Context, q storage.QueueRef) (string, error)
	// Unplace forgets q's placement if it is still on pool.
	Unplace(ctx context.Context, q storage.QueueRef, pool string) error
	// Placements lists the project's placed queues as "queue -> pool".
	Placements(ctx context.Context, project string) ([]string, error)
	// QueueCount counts the queues placed on pool.
	QueueCount(ctx context.Context, pool string) (int, error)
	// Migrations records queues moving between pools.
	Migrations
	// Version returns a token that changes whenever pools, flavors or the
	// state of a move do.
	Version(ctx context.Context) (string, error)
	// Ping checks the management store answers.
	Ping(ctx context.Context) error
	// Close releases connections.
	Close() error
}

// OpenStore opens the management store at uri (redis:// or mongodb://).
func OpenStore(ctx context.Context, uri string) (Store, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, storage.E("catalog.open", storage.Invalid, fmt.Errorf("bad catalog URI: %w", err))
	}
	switch u.Scheme {
	case "redis", "rediss":
		return openRedis(ctx, u)
	case "mongodb", "mongodb+srv":
		return openMongo(ctx, u)
	}
	return nil, storage.E("catalog.open", storage.Invalid, fmt.Sprintf("catalog URI %q: scheme must be redis:// or mongodb://", uri))
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// ValidName reports whether s can name a pool or flavor (Zaqar's rule for
// queue names).
func ValidName(s string) bool { return nameRE.MatchString(s) && s != DefaultPool }

// validURI checks a pool URI's scheme; reachability is checked separately.
func validURI(uri string) error {
	u, err := url.Parse(uri)
	if err != nil {
		return fmt.Errorf("pool uri %q is not a URI: %v", uri, err)
	}
	switch u.Scheme {
	case "redis", "rediss", "mongodb", "mongodb+srv":
	default:
		return fmt.Errorf("pool uri %q: scheme must be redis://, rediss:// or mongodb://", uri)
	}
	if u.Host == "" {
		return fmt.Errorf("pool uri %q names no host", uri)
	}
	return nil
}

// placementKey is a queue's key in the management store. Project ids come
// from a header and queue names are [a-zA-Z0-9_.-], so neither holds "\n".
func placementKey(q storage.QueueRef) string { return q.Project + "\n" + q.Name }

func marshal(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// uriTaken refuses a second pool on a database: the two would hold each
// other's queues' keys, and moving a queue between them would delete what
// it copies. Zaqar refuses it too.
func uriTaken(op, other, uri string) error {
	return storage.E(op, storage.Conflict, fmt.Sprintf("pool %s already uses %s: a pool is a storage of its own", other, uri))
}

// noFlavor refuses a pool in, or a queue placed by, a flavor that does
// not exist.
func noFlavor(op, name string) error {
	return storage.E(op, storage.Invalid, storage.Public(fmt.Sprintf("Flavor %s does not exist", name)))
}

func notFound(op, what, name string) error {
	return storage.E(op, storage.NotFound, fmt.Sprintf("%s %s does not exist", what, name))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func joinQuoted(list []string) string { return strings.Join(list, ", ") }

func decodeJSON(s string, v any) error {
	if s == "" || s == "null" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

// inUse is the Conflict of deleting a pool that still holds queues.
func inUse(op, pool string, n int) error {
	return storage.E(op, storage.Conflict, fmt.Sprintf("pool %s still holds %d queue(s); delete those queues first (weight 0 only stops new ones landing there)", pool, n))
}
