package mongo

import (
	"net/url"
	"testing"
	"time"
)

// TestClientOptions: what a mongodb:// URI leaves unsaid gets sluice's
// defaults (w=majority, 3 s server selection and connect), what it says is
// kept; the catalog and the driver both connect with these.
func TestClientOptions(t *testing.T) {
	cases := []struct {
		uri             string
		w               any
		select_, connec time.Duration
	}{
		{"mongodb://127.0.0.1:1/q", "majority", 3 * time.Second, 3 * time.Second},
		{"mongodb://u:p@h1,h2/q?replicaSet=rs0&authSource=admin", "majority", 3 * time.Second, 3 * time.Second},
		{"mongodb://h/q?w=1", 1, 3 * time.Second, 3 * time.Second},
		{"mongodb://h/q?serverSelectionTimeoutMS=500&connectTimeoutMS=250", "majority", 500 * time.Millisecond, 250 * time.Millisecond},
	}
	for _, tc := range cases {
		u, err := url.Parse(tc.uri)
		if err != nil {
			t.Fatal(err)
		}
		co, err := ClientOptions(u)
		if err != nil {
			t.Errorf("%s: %v", tc.uri, err)
			continue
		}
		if co.WriteConcern == nil || co.WriteConcern.W != tc.w {
			t.Errorf("%s: write concern %+v, want w=%v", tc.uri, co.WriteConcern, tc.w)
		}
		if co.ServerSelectionTimeout == nil || *co.ServerSelectionTimeout != tc.select_ {
			t.Errorf("%s: server selection timeout %v, want %v", tc.uri, co.ServerSelectionTimeout, tc.select_)
		}
		if co.ConnectTimeout == nil || *co.ConnectTimeout != tc.connec {
			t.Errorf("%s: connect timeout %v, want %v", tc.uri, co.ConnectTimeout, tc.connec)
		}
	}
	for _, bad := range []string{"mongodb://h/q?w=majority&journal=maybe", "mongodb://h/q?connect=sideways", "mongodb://h:notaport/q"} {
		u, err := url.Parse(bad)
		if err != nil {
			continue // refused before it gets here, which is as good
		}
		if _, err := ClientOptions(u); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
