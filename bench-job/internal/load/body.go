package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Doc is one entry of a zaqar-bench message file: {"weight": w, "doc": {...}}.
type Doc struct {
	Weight float64         `json:"weight"`
	Doc    json.RawMessage `json:"doc"`
}

// DefaultDocs is zaqar-bench's built-in message when no file is given.
var DefaultDocs = []Doc{{Weight: 1, Doc: json.RawMessage(`{"ttl": 60, "body": {"id": "7FA23C90-62F7-40D2-9360-FBD5D7D61CD1", "evt": "Single"}}`)}}

// LoadDocs reads a zaqar-bench message file, sorted by weight as
// zaqar-bench sorts it.
func LoadDocs(path string) ([]Doc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var docs []Doc
	if err := json.Unmarshal(data, &docs); err != nil {
		return nil, fmt.Errorf("%s: want a JSON list of {\"weight\", \"doc\"}: %w", path, err)
	}
	if len(docs) == 0 {
		return nil, fmt.Errorf("%s: no messages", path)
	}
	for i, d := range docs {
		var probe struct {
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(d.Doc, &probe); err != nil || probe.Body == nil {
			return nil, fmt.Errorf("%s: message %d has no \"body\"", path, i)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].Weight < docs[j].Weight })
	return docs, nil
}

// SizedDoc returns a message whose body is about size bytes (the seeds'
// "~1K sample message (1398 bytes)"), ttl 60 like zaqar-bench's default.
func SizedDoc(size int) []Doc {
	pad := max(size-len(`{"pad":""}`), 0)
	return []Doc{{Weight: 1, Doc: json.RawMessage(`{"ttl": 60, "body": {"pad": "` + strings.Repeat("x", pad) + `"}}`)}}
}

// template is one message pre-rendered around the spot where the delivery
// tag goes, so building a request body is three appends and two integers.
type template struct {
	weight float64
	head   []byte // `{"messages":[{...,"body":{"sb":{"o":"ORIGIN","n":`
	mid    []byte // `,"t":`
	tail   []byte // `}, <rest of body>}]}` (or the whole doc when untagged)
	tagged bool
}

// Bodies renders request bodies for the producers of one process.
type Bodies struct {
	ts []template
}

// NewBodies pre-renders docs. With origin set, every object body gets a
// field "sb": {"o": origin, "n": seq, "t": unix-nanos}; non-object bodies
// are sent unchanged and simply not verified.
func NewBodies(docs []Doc, origin string) (*Bodies, error) {
	b := &Bodies{}
	for _, d := range docs {
		doc := bytes.TrimSpace(d.Doc)
		t := template{weight: d.Weight}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(doc, &fields); err != nil {
			return nil, fmt.Errorf("message doc: %w", err)
		}
		body := bytes.TrimSpace(fields["body"])
		if origin == "" || len(body) < 2 || body[0] != '{' {
			t.tail = append(append([]byte(`{"messages":[`), doc...), "]}"...)
		} else {
			delete(fields, "body")
			rest, _ := json.Marshal(fields) // {"ttl":60} or {}
			inner := bytes.TrimSpace(body[1:])
			sep := ","
			if len(inner) > 0 && inner[0] == '}' {
				sep = ""
			}
			head := append([]byte(`{"messages":[`), rest[:len(rest)-1]...)
			if len(rest) > 2 {
				head = append(head, ',')
			}
			head = append(head, `"body":{"sb":{"o":`...)
			head = strconv.AppendQuote(head, origin)
			t.head = append(head, `,"n":`...)
			t.mid = []byte(`,"t":`)
			t.tail = append(append([]byte("}"+sep), inner...), "}]}"...)
			t.tagged = true
		}
		b.ts = append(b.ts, t)
	}
	return b, nil
}

// pick chooses a template by weight, as zaqar-bench's choose_message does.
func (b *Bodies) pick() *template {
	if len(b.ts) == 1 {
		return &b.ts[0]
	}
	pos, acc := rand.Float64(), 0.0
	for i := range b.ts {
		acc += b.ts[i].weight
		if pos < acc {
			return &b.ts[i]
		}
	}
	return &b.ts[len(b.ts)-1]
}

// Largest is the size of the longest request body Append can write: the
// delivery tag's two numbers at their widest.
func (b *Bodies) Largest() int {
	n := 0
	for _, t := range b.ts {
		size := len(t.head) + len(t.mid) + len(t.tail)
		if t.tagged {
			size += 2 * len("-9223372036854775808")
		}
		n = max(n, size)
	}
	return n
}

// Append writes one request body into dst and reports whether it carries
// the tag for seq.
func (b *Bodies) Append(dst []byte, seq, nanos int64) ([]byte, bool) {
	t := b.pick()
	if !t.tagged {
		return append(dst, t.tail...), false
	}
	dst = append(dst, t.head...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, t.mid...)
	dst = strconv.AppendInt(dst, nanos, 10)
	return append(dst, t.tail...), true
}
