package api

import (
	"testing"
	"time"
)

// FuzzSubscriptionBody: a POST or PATCH body is refused with a 400 and a
// Zaqar description, or accepted with a supported subscriber, a ttl in
// range and options that are an object.
func FuzzSubscriptionBody(f *testing.F) {
	f.Add([]byte(`{"subscriber":"http://127.0.0.1:8899/hook","ttl":3600,"options":{"note":"a"}}`), true)
	f.Add([]byte(`{"subscriber":"mailto:ops@example.com"}`), true)
	f.Add([]byte(`{"subscriber":"trust+https://h/x","ttl":60,"options":null}`), false)
	f.Add([]byte(`{"ttl":"abc"}`), false)
	f.Add([]byte(`{}`), false)
	f.Add([]byte(`{"subscriber":"email://x","ttl":1e3}`), true)
	f.Add([]byte(`[1]`), false)
	f.Fuzz(func(t *testing.T, body []byte, post bool) {
		d, e := parseSubscription(body, post)
		if e != nil {
			if e.status != 400 || e.title == "" || e.desc == "" {
				t.Fatalf("error %+v", e)
			}
			return
		}
		if post && d.subscriber == nil {
			t.Fatalf("accepted a POST without subscriber: %q", body)
		}
		if !post && d.subscriber == nil && d.ttl == nil && d.options == nil {
			// A PATCH of only unknown keys changes nothing; Zaqar accepts it.
			return
		}
		if d.subscriber != nil && !ValidSubscriber(*d.subscriber) {
			t.Fatalf("accepted subscriber %q", *d.subscriber)
		}
		if d.ttl != nil && (*d.ttl < time.Minute || *d.ttl > maxSubscriptionTTL*time.Second) {
			t.Fatalf("accepted ttl %v", *d.ttl)
		}
	})
}
