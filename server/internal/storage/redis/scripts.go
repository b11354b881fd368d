package redis

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"errors"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lib.lua
var libSrc string

// Every script runs as a Redis 7 function of one library that holds the
// shared prelude (lib.lua) once and every script as a function of it. The
// library is compiled when loaded, not per call: an EVALSHA of prelude plus
// script re-ran the whole prelude (two dozen closures, the key names) on
// every call. A function without the no-writes flag is refused up front
// when Redis is out of memory, instead of failing at some write halfway
// through, as the "#!lua" shebang did for scripts: a script that stopped
// halfway would break the all-or-nothing promise of a batch post, since
// Redis does not roll scripts back.
//
// The library's name carries a hash of its code, so servers of different
// versions sharing one Redis (a rolling upgrade) each call their own
// functions. Functions are replicated and persisted like data; a Redis
// that lost them (restarted without persistence, a fresh replica promoted)
// answers "Function not found", and the call loads the library and runs
// again: nothing ran the first time, so the retry cannot apply twice.

// script is one function of the library.
type script struct {
	name string // the .lua file's base name
	src  string
	fn   string // the function's name in Redis, set by buildLibrary
	// shared > 0: calls on the same keys may run as one call, their first
	// shared arguments common (groupCommit.FCallMerging).
	shared int
	// split: the function replies with an array of one reply per request
	// (its arguments may hold several even when called alone).
	split bool
}

// allScripts is filled by the files that declare scripts (package
// initialisation), before the library is first built.
var allScripts []*script

func register(name, src string) *script {
	s := &script{name: name, src: src}
	allScripts = append(allScripts, s)
	return s
}

// registerMergeable registers a script whose concurrent calls on the same
// keys may run as one: its arguments are shared common ones followed by
// any number of requests. Its reply answers each request, or with split
// is an array of one reply per request.
func registerMergeable(name, src string, shared int, split bool) *script {
	s := register(name, src)
	s.shared, s.split = shared, split
	return s
}

var library struct {
	once sync.Once
	code string
}

// libraryCode returns the FUNCTION LOAD text, built once.
func libraryCode() string {
	library.once.Do(func() { library.code = buildLibrary(allScripts) })
	return library.code
}

// buildLibrary names the library and its functions after a hash of all the
// code and wraps each script in a function that first binds the queue's key
// names (lib.lua's bind) to its KEYS.
func buildLibrary(scripts []*script) string {
	h := sha1.New()
	h.Write([]byte(libSrc))
	for _, s := range scripts {
		h.Write([]byte{0})
		h.Write([]byte(s.name))
		h.Write([]byte{0})
		h.Write([]byte(s.src))
	}
	name := "sluice_" + hex.EncodeToString(h.Sum(nil))[:12]
	// Joined once, so the library (kept for reloads) is one allocation
	// instead of a builder's doublings.
	parts := []string{"#!lua name=" + name + "\n", libSrc}
	for _, s := range scripts {
		s.fn = name + "_" + s.name
		flags := "{}"
		if runsWhenFull[s.name] {
			flags = "{'allow-oom'}"
		}
		parts = append(parts, "\nredis.register_function{function_name='"+s.fn+"', flags="+flags+
			", callback=function(KEYS, ARGV)\nbind(KEYS)\n", s.src, "\nend}\n")
	}
	return strings.Join(parts, "")
}

// runsWhenFull names the functions a Redis at its maxmemory still runs
// (the allow-oom flag): everything that reads, and everything by which
// consumers and the mover drain a full shard (claims, deletes, pops,
// deliveries, and the source side of a move). Their writes are bounded by
// what they take away, or are a claim's few fields. The functions that
// grow the data (posts, new queues, metadata, subscriptions, the target
// side of a move) are refused up front with OOM, before any write, which
// the driver answers as storage.Full.
var runsWhenFull = map[string]bool{
	"get": true, "list": true, "pop": true, "delete": true, "delete_many": true,
	"claim_create": true, "claim_get": true, "claim_update": true, "claim_release": true,
	"queue_stats": true, "queue_list": true, "queue_delete": true, "queue_wipe": true,
	"sub_list": true, "sub_delete": true, "sub_wipe": true,
	"dlv_lease": true, "dlv_settle": true, "dlv_stats": true,
	"mig_seal": true, "mig_unseal": true, "mig_take": true, "mig_transit": true, "mig_settle": true,
	"mig_settle_take": true, "mig_finish": true, "mig_dlv_read": true, "mig_dlv_counts": true,
}

// functionCaller is what scripts need of a client (*goredis.Client).
type functionCaller interface {
	FCall(ctx context.Context, function string, keys []string, args ...any) *goredis.Cmd
	FunctionLoadReplace(ctx context.Context, code string) *goredis.StringCmd
}

// mergingCaller is a functionCaller that can merge calls (*groupCommit).
type mergingCaller interface {
	FCallMerging(ctx context.Context, function string, keys []string, shared int, split bool, args ...any) *goredis.Cmd
}

// Run calls the script's function, loading the library first when Redis
// does not have it.
func (s *script) Run(ctx context.Context, c functionCaller, keys []string, args ...any) *goredis.Cmd {
	code := libraryCode()
	cmd := s.call(ctx, c, keys, args)
	if missingFunction(cmd.Err()) {
		if err := c.FunctionLoadReplace(ctx, code).Err(); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		cmd = s.call(ctx, c, keys, args)
	}
	return cmd
}

func (s *script) call(ctx context.Context, c functionCaller, keys []string, args []any) *goredis.Cmd {
	if m, ok := c.(mergingCaller); ok && s.shared > 0 {
		return m.FCallMerging(ctx, s.fn, keys, s.shared, s.split, args...)
	}
	cmd := c.FCall(ctx, s.fn, keys, args...)
	if s.split {
		unwrap(cmd)
	}
	return cmd
}

// missingFunction recognises FCALL's answer for a function Redis does not
// have (Redis 7: "ERR Function not found").
func missingFunction(err error) bool {
	if err == nil {
		return false // most calls: errors.As would allocate its target
	}
	var rerr goredis.Error
	return errors.As(err, &rerr) && strings.Contains(rerr.Error(), "Function not found")
}

// preload loads the library so the first requests need no retry. An
// unreachable Redis is not an error here (the first call loads it).
func preload(ctx context.Context, c functionCaller) {
	_ = c.FunctionLoadReplace(ctx, libraryCode()).Err()
}
