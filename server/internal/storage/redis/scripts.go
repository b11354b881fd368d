package redis

import (
	"context"
	_ "embed"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lib.lua
var libSrc string

// script is one Lua script with the shared prelude. go-redis runs it with
// EVALSHA and falls back to EVAL once after a Redis restart flushed the
// script cache, so each call is one round trip in the steady state.
type script struct{ *goredis.Script }

// newScript builds a script from the prelude and src. The "#!lua" shebang
// (Redis 7) makes Redis refuse a writing script up front when it is out of
// memory, instead of failing at some write halfway through: a script that
// stopped halfway would break the all-or-nothing promise of a batch post,
// since Redis does not roll scripts back.
func newScript(src string) script {
	return script{goredis.NewScript("#!lua\n" + libSrc + "\n" + src)}
}

// allScripts is filled by the files that declare scripts, so Open can load
// them ahead of the first request.
var allScripts []script

func register(src string) script {
	s := newScript(src)
	allScripts = append(allScripts, s)
	return s
}

// preload loads every script into the server's cache so the first
// requests need no EVAL fallback. It gives up at the first error (Redis not
// up yet: scripts are loaded on first use anyway), so an unreachable Redis
// costs one dial timeout at start, not one per script.
func preload(ctx context.Context, c goredis.Scripter) {
	for _, s := range allScripts {
		if s.Load(ctx, c).Err() != nil {
			return
		}
	}
}
