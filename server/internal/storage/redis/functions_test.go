package redis

import (
	"context"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestFunctionsReloadWhenMissing removes the library behind a running
// driver (FUNCTION FLUSH, what a restart without persistence or a promoted
// fresh replica looks like): the next call of each kind loads it again and
// runs exactly once.
func TestFunctionsReloadWhenMissing(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	q := queueRef("p", "reload")
	if _, err := post(t, d, q, 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		if err := d.c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := post(t, d, q, 1, time.Minute); err != nil {
			t.Fatalf("post after FUNCTION FLUSH: %v", err)
		}
		if err := d.c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		// A read-only script takes the same path.
		st, err := d.Queues().Stats(ctx, q)
		if err != nil {
			t.Fatalf("stats after FUNCTION FLUSH: %v", err)
		}
		if want := 3 + round; st.Total != want {
			t.Fatalf("round %d: %d messages, want %d: a retried post ran twice or not at all", round, st.Total, want)
		}
	}
	libs, err := d.c.FunctionList(ctx, goredis.FunctionListQuery{}).Result()
	if err != nil || len(libs) != 1 || !strings.HasPrefix(libs[0].Name, "sluice_") {
		t.Fatalf("libraries after reload: %+v, %v", libs, err)
	}
	if got, want := len(libs[0].Functions), len(allScripts); got != want {
		t.Errorf("library has %d functions, want one per script (%d)", got, want)
	}
}

// TestLibraryNameFollowsCode: servers of two versions on one Redis must not
// replace each other's functions, so any change of the prelude or of one
// script gives another library name, and the same code the same name.
func TestLibraryNameFollowsCode(t *testing.T) {
	name := func(scripts []*script) string {
		code := buildLibrary(scripts)
		first, _, _ := strings.Cut(code, "\n")
		return strings.TrimPrefix(first, "#!lua name=")
	}
	mk := func(srcs ...string) []*script {
		out := make([]*script, len(srcs))
		for i, s := range srcs {
			out[i] = &script{name: "s" + string(rune('a'+i)), src: s}
		}
		return out
	}
	a := name(mk("return 1", "return 2"))
	if b := name(mk("return 1", "return 2")); a != b {
		t.Errorf("same code, names %q and %q", a, b)
	}
	for _, other := range [][]*script{mk("return 1", "return 3"), mk("return 1"), mk("return 2", "return 1")} {
		if b := name(other); a == b {
			t.Errorf("different code, same library name %q", a)
		}
	}
	s := mk("return 1")
	if n := name(s); s[0].fn != n+"_sa" {
		t.Errorf("function name %q in library %q", s[0].fn, n)
	}
}
