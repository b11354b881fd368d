package load

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"testing"
)

func TestBodiesTagObjectBodies(t *testing.T) {
	docs := append(SizedDoc(200), Doc{Weight: 0, Doc: json.RawMessage(`{"body": "plain"}`)},
		Doc{Weight: 0, Doc: json.RawMessage(`{"ttl": 5, "body": {}}`)})
	for i, d := range docs {
		b, err := NewBodies([]Doc{d}, "origin1")
		if err != nil {
			t.Fatal(err)
		}
		out, tagged := b.Append(nil, 42, 1234)
		var req struct {
			Messages []struct {
				TTL  int             `json:"ttl"`
				Body json.RawMessage `json:"body"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(out, &req); err != nil || len(req.Messages) != 1 {
			t.Fatalf("doc %d: invalid request body %s: %v", i, out, err)
		}
		var tb taggedBody
		_ = json.Unmarshal(req.Messages[0].Body, &tb)
		wantTagged := i != 1
		if tagged != wantTagged || (tb.SB != nil) != wantTagged {
			t.Errorf("doc %d: tagged %v, parsed tag %+v", i, tagged, tb.SB)
		}
		if wantTagged && (tb.SB.O != "origin1" || tb.SB.N != 42 || tb.SB.T != 1234) {
			t.Errorf("doc %d: tag %+v", i, tb.SB)
		}
	}
	if b, _ := NewBodies(SizedDoc(1398), "o"); len(mustAppend(b)) < 1398 {
		t.Error("sized message smaller than asked")
	}
}

func mustAppend(b *Bodies) []byte { out, _ := b.Append(nil, 1, 1); return out }

func TestLoadDocsRejectsBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"notjson": "{", "empty": "[]", "nobody": `[{"weight":1,"doc":{"ttl":1}}]`} {
		p := dir + "/" + name
		if err := writeFile(p, content); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadDocs(p); err == nil {
			t.Errorf("%s accepted", name)
		}
	}
}

// Largest bounds every body Append writes, tagged or not, and is reached by
// the widest tag: checkPostSize relies on it to refuse only what could be
// refused.
func TestLargestBoundsEveryBody(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 200 {
		docs := SizedDoc(1 + rng.IntN(3000))
		if i%3 == 0 {
			docs = append(docs, Doc{Weight: 0.5, Doc: json.RawMessage(`{"ttl": 60, "body": "plain"}`)})
		}
		origin := ""
		if i%2 == 0 {
			origin = newOrigin()
		}
		b, err := NewBodies(docs, origin)
		if err != nil {
			t.Fatal(err)
		}
		longest := 0
		for _, seq := range []int64{0, rng.Int64N(1 << 40), math.MaxInt64, math.MinInt64} {
			body, _ := b.Append(nil, seq, math.MinInt64+rng.Int64N(2))
			longest = max(longest, len(body))
			if len(body) > b.Largest() {
				t.Fatalf("case %d: body of %d bytes over Largest %d", i, len(body), b.Largest())
			}
		}
		if len(b.ts) == 1 && longest != b.Largest() {
			t.Fatalf("case %d: widest body %d, Largest %d", i, longest, b.Largest())
		}
	}
}
