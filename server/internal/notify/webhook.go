package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"sluice.dev/server/internal/storage"
)

// Headers sluice adds to every webhook request.
const (
	// HeaderDelivery carries the delivery's stable id (the same on every
	// attempt), so that a receiver can drop duplicates.
	HeaderDelivery = "X-Sluice-Delivery"
	// HeaderSignature carries "sha256=<hex HMAC-SHA256(secret, body)>" when
	// the subscription's options hold a "secret".
	HeaderSignature = "X-Sluice-Signature"
)

// webhook posts notifications over HTTP.
type webhook struct {
	client *http.Client
	trusts Trusts // nil: trust+ subscribers cannot be notified
}

func newWebhook(timeout time.Duration, perSubscriber int, trusts Trusts) *webhook {
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: perSubscriber,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: timeout,
	}
	return &webhook{client: &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: keepToken}, trusts: trusts}
}

// keepToken follows redirects as net/http does, except that a request
// carrying X-Auth-Token (a trust's, or one from post_headers) is not
// redirected to another host or scheme: net/http would send the token
// along, as it does every header but Authorization and Cookie. The
// redirect answer is then the subscriber's, and a failed attempt.
func keepToken(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	first := via[0].URL
	if req.Header.Get("X-Auth-Token") != "" && (req.URL.Host != first.Host || req.URL.Scheme != first.Scheme) {
		return http.ErrUseLastResponse
	}
	return nil
}

// scheme is the subscriber's URI scheme, lower case.
func scheme(subscriber string) string {
	s, _, _ := strings.Cut(subscriber, ":")
	return strings.ToLower(s)
}

// target is the URL to post to: a trust+http(s) subscriber's without the
// prefix (it is posted to with its trust's token).
func target(subscriber string) string {
	if IsTrust(subscriber) {
		return subscriber[len("trust+"):]
	}
	return subscriber
}

// notification is the message as Zaqar's notifier sends it, keys in its
// order and with Python's separators:
// {"ttl": 300, "body": ..., "Message_Type": "Notification", "queue_name": "q"}.
func notification(d storage.Delivery) []byte {
	b := make([]byte, 0, len(d.Body)+96+len(d.Queue.Name))
	b = append(b, `{"ttl": `...)
	b = strconv.AppendInt(b, int64(d.TTL/time.Second), 10)
	b = append(b, `, "body": `...)
	b = append(b, d.Body...)
	b = append(b, `, "Message_Type": "Notification", "queue_name": `...)
	b = strconv.AppendQuote(b, d.Queue.Name)
	return append(b, '}')
}

// webhookBody applies Zaqar's "post_data" option: a template in which
// every "$zaqar_message$", quotes included, is replaced by the
// notification; a template without it is sent as it is.
func webhookBody(sub storage.Subscription, msg []byte) []byte {
	tmpl, ok := sub.Options["post_data"].(string)
	if !ok {
		return msg
	}
	return []byte(strings.ReplaceAll(tmpl, `"$zaqar_message$"`, string(msg)))
}

// Sign returns the X-Sluice-Signature value of body under secret.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// post sends one request for a subscription of q; any answer but 2xx is
// an error. A trust+ subscriber is never posted to without its trust's
// token.
func (w *webhook) post(ctx context.Context, q storage.QueueRef, sub storage.Subscription, deliveryID string, body []byte) error {
	token, trustID, err := w.trustToken(ctx, q, sub)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target(sub.Subscriber), bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("bad subscriber URL: %w", err)
	}
	h := req.Header
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "*/*")
	h.Set("User-Agent", "sluice-server")
	// Zaqar's "post_headers" option adds headers to every request (the
	// API refuses reserved ones; those stored before are skipped).
	if extra, ok := sub.Options["post_headers"].(map[string]any); ok {
		for k, v := range extra {
			if s, ok := v.(string); ok && !ReservedHeader(k, token != "") {
				h.Set(k, s)
			}
		}
	}
	if token != "" {
		h.Set("X-Auth-Token", token)
	}
	if deliveryID != "" {
		h.Set(HeaderDelivery, deliveryID)
	}
	if secret, ok := sub.Options["secret"].(string); ok && secret != "" {
		h.Set(HeaderSignature, Sign(secret, body))
	}
	res, err := w.client.Do(req)
	if err != nil {
		return err
	}
	// Drain a little so the connection can be reused, never a lot.
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 64<<10))
	res.Body.Close()
	if res.StatusCode == http.StatusUnauthorized && token != "" {
		// Revoked before it expired: the next attempt gets a new one.
		w.trusts.Refused(trustID, token)
	}
	if res.StatusCode < 200 || res.StatusCode > 299 {
		return fmt.Errorf("subscriber answered %s", res.Status)
	}
	return nil
}
