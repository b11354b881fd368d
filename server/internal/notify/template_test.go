package notify

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"sluice.dev/server/internal/storage"
)

const placeholder = "$zaqar_message$"

// jsonTree draws a JSON value (as encoding/json decodes one) in which some
// strings are the placeholder; other strings never hold a '$'.
func jsonTree(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 6
		if depth <= 0 {
			kinds = 4
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return placeholder
		case 1:
			return rapid.StringMatching(`[^$]{0,12}`).Draw(t, "string")
		case 2:
			return json.Number(rapid.StringMatching(`-?(0|[1-9][0-9]{0,6})(\.[0-9]{1,3})?`).Draw(t, "number"))
		case 3:
			return rapid.SampledFrom([]any{true, false, nil}).Draw(t, "literal")
		case 4:
			return rapid.SliceOfN(jsonTree(depth-1), 0, 4).Draw(t, "array")
		default:
			m := map[string]any{}
			for i, n := 0, rapid.IntRange(0, 4).Draw(t, "keys"); i < n; i++ {
				m[rapid.StringMatching(`[a-zA-Z_][^$"]{0,8}`).Draw(t, "key")] = jsonTree(depth-1).Draw(t, "value")
			}
			return m
		}
	})
}

// substitute is tree with every placeholder replaced by v.
func substitute(tree, v any) any {
	switch x := tree.(type) {
	case string:
		if x == placeholder {
			return v
		}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = substitute(e, v)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = substitute(e, v)
		}
		return out
	}
	return tree
}

func decode(t interface{ Fatalf(string, ...any) }, b []byte) any {
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// TestPostDataTemplate: for any JSON template, the body is the template
// with each "$zaqar_message$" string replaced by the notification, still
// JSON; the notification is Zaqar's, whatever the message body.
func TestPostDataTemplate(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tree := jsonTree(3).Draw(t, "template")
		tmpl, err := json.Marshal(tree)
		if err != nil {
			t.Fatal(err)
		}
		msgBody, _ := json.Marshal(jsonTree(2).Draw(t, "message body"))
		d := storage.Delivery{Queue: storage.QueueRef{Project: "p", Name: rapid.StringMatching(`[a-zA-Z0-9_.-]{1,64}`).Draw(t, "queue")},
			Body: msgBody, TTL: time.Duration(rapid.IntRange(60, 1209600).Draw(t, "ttl")) * time.Second}
		msg := notification(d)
		sub := storage.Subscription{Options: storage.Metadata{"post_data": string(tmpl)}}
		got := decode(t, webhookBody(sub, msg))
		want := substitute(decode(t, tmpl), decode(t, msg))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("body %v\nwant %v", got, want)
		}
		n := decode(t, msg).(map[string]any)
		if n["Message_Type"] != "Notification" || n["queue_name"] != d.Queue.Name || !reflect.DeepEqual(n["body"], decode(t, msgBody)) {
			t.Fatalf("notification %s", msg)
		}
	})
}

// TestPostDataTemplateAsZaqar: the replacement is textual, as Zaqar's
// str.replace: the placeholder with its quotes, every occurrence; a
// template without it is sent verbatim, and no template sends the
// notification itself.
func TestPostDataTemplateAsZaqar(t *testing.T) {
	msg := []byte(`{"ttl": 60, "body": 1, "Message_Type": "Notification", "queue_name": "q"}`)
	cases := []struct {
		name string
		opts storage.Metadata
		want string
	}{
		{"no template", storage.Metadata{}, string(msg)},
		{"not a string", storage.Metadata{"post_data": map[string]any{"a": 1}}, string(msg)},
		{"tempest's", storage.Metadata{"post_data": `{"messages": [{"body": "$zaqar_message$", "ttl": 60}]}`},
			`{"messages": [{"body": ` + string(msg) + `, "ttl": 60}]}`},
		{"twice", storage.Metadata{"post_data": `["$zaqar_message$","$zaqar_message$"]`}, "[" + string(msg) + "," + string(msg) + "]"},
		{"without placeholder", storage.Metadata{"post_data": `{"ping": true}`}, `{"ping": true}`},
		{"unquoted is left", storage.Metadata{"post_data": `msg=$zaqar_message$`}, `msg=$zaqar_message$`},
		{"not JSON", storage.Metadata{"post_data": `event: "$zaqar_message$"`}, `event: ` + string(msg)},
	}
	for _, tc := range cases {
		if got := string(webhookBody(storage.Subscription{Options: tc.opts}, msg)); got != tc.want {
			t.Errorf("%s: %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestReservedHeaders: what post_headers may not set, for any spelling.
func TestReservedHeaders(t *testing.T) {
	for _, h := range []string{"connection", "Keep-Alive", "PROXY-CONNECTION", "proxy-authorization", "Proxy-Authenticate",
		"te", "Trailer", "transfer-encoding", "Upgrade", "content-length", "host", "x-sluice-delivery", "X-Sluice-Signature"} {
		if !ReservedHeader(h, false) || !ReservedHeader(h, true) {
			t.Errorf("%s is not reserved", h)
		}
	}
	for _, h := range []string{"X-Project-ID", "Client-ID", "Content-Type", "Authorization", "Accept", "User-Agent"} {
		if ReservedHeader(h, false) || ReservedHeader(h, true) {
			t.Errorf("%s is reserved", h)
		}
	}
	if ReservedHeader("x-auth-token", false) || !ReservedHeader("x-auth-token", true) {
		t.Error("X-Auth-Token is the trust's only for trust+ subscribers")
	}
	if http.CanonicalHeaderKey("TE") != "Te" {
		t.Error("the table's spelling of TE")
	}
}
