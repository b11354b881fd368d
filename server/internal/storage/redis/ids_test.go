package redis

import (
	"context"
	"strconv"
	"testing"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestMessageIDMatchesScripts: the id Go gives a poster and the id the
// scripts give that message (lib.lua's xid) are one string, and the
// scripts read the sequence back from it (xseq), for any incarnation and
// any sequence a Lua number holds exactly, MongoDB's large ones included.
func TestMessageIDMatchesScripts(t *testing.T) {
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	d := openAt(t, r.URL, storage.SystemClock{})
	ctx := context.Background()
	// A library of its own: lib.lua's locals are reached through a function
	// defined after them.
	code := "#!lua name=idprobe\n" + libSrc + `
redis.register_function('idprobe', function(KEYS, ARGV)
  INC = ARGV[1]
  local id = xid(ARGV[1], tonumber(ARGV[2]))
  local other = xseq(ARGV[3])
  return {id, digits(xseq(id)), other and digits(other) or ''}
end)
`
	if err := d.c.FunctionLoadReplace(ctx, code).Err(); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		inc := rapid.StringMatching(`[0-9a-f]{16}`).Draw(rt, "inc")
		seq := rapid.Int64Range(1, 1<<53).Draw(rt, "seq")
		// The id with one byte changed: read back only while it still
		// names a seq of this incarnation.
		want := messageID(inc, seq)
		at := rapid.IntRange(0, len(want)-1).Draw(rt, "at")
		other := want[:at] + rapid.SampledFrom([]string{"0", "f", "A", "-", "g", " ", "+"}).Draw(rt, "byte") + want[at+1:]
		res, err := d.c.FCall(ctx, "idprobe", nil, inc, seq, other).StringSlice()
		if err != nil {
			rt.Fatal(err)
		}
		if res[0] != want {
			rt.Fatalf("script id %s, Go id %s", res[0], want)
		}
		if !storage.IsMessageID(want) {
			rt.Fatalf("%s is not a message id", want)
		}
		var back int64
		for _, c := range []byte(res[1]) {
			back = back*10 + int64(c-'0')
		}
		if back != seq {
			rt.Fatalf("xseq(%s) = %s, want %d", want, res[1], seq)
		}
		if wantOther := seqOf(inc, other); res[2] != wantOther {
			rt.Fatalf("xseq(%s) = %q, want %q", other, res[2], wantOther)
		}
	})
}

// seqOf is the seq id names in decimal when id is of incarnation inc and of
// the form iiiiiiii-iiii-iiii-ssss-ssssssssssss (hex digits of either case
// in the seq) with a seq up to 2^53, else "".
func seqOf(inc, id string) string {
	if len(id) != 36 || id[:19] != inc[:8]+"-"+inc[8:12]+"-"+inc[12:16]+"-" || id[23] != '-' {
		return ""
	}
	v, err := strconv.ParseUint(id[19:23]+id[24:], 16, 64)
	if err != nil || v > 1<<53 {
		return ""
	}
	return strconv.FormatUint(v, 10)
}
