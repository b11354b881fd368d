package notify

import (
	"context"
	"encoding/json"
	"time"

	"sluice.dev/server/internal/signedurl"
	"sluice.dev/server/internal/storage"
)

// Confirmation requests are what Zaqar sends a new subscriber when
// require_confirmation is on. They are not messages and are not stored:
// one is attempted a few times right after the subscription is created
// (and again whenever the same subscriber is posted again while still
// unconfirmed), so a subscriber that missed it can ask for another.
const confirmAttempts = 5

// confirmation is the request body, with Zaqar's fields. The URL-* fields
// carry a pre-signed URL (PUT on the confirm path, for a day, as Zaqar's
// notifier signs it) with which the subscriber confirms without other
// credentials; without a key for pre-signed URLs they are left empty.
func confirmation(q storage.QueueRef, sub storage.Subscription, key []byte, now time.Time) []byte {
	project, coll := q.Project, "/v2/queues/"
	if p, ok := storage.IsTopic(q); ok {
		project, coll = p, "/v2/topics/"
	}
	path := coll + q.Name + "/subscriptions/" + sub.ID + "/confirm"
	signature, expires := "", ""
	if signed, err := signedurl.Sign(key, []string{path}, []string{"PUT"}, project, time.Time{}, now); err == nil {
		signature, expires = signed.Signature, signed.Expires
	}
	doc := map[string]any{
		"UnsubscribeBody": map[string]any{"confirmed": false},
		"URL-Signature":   signature,
		"URL-Methods":     "PUT",
		"URL-Paths":       path,
		"X-Project-ID":    project,
		"URL-Expires":     expires,
		"SubscribeBody":   map[string]any{"confirmed": true},
		"SubscriptionId":  sub.ID,
		"Message_Type":    "SubscriptionConfirmation",
		"Message":         "You have chosen to subscribe to the queue: " + q.Name,
		"queue_name":      q.Name,
	}
	b, _ := json.Marshal(doc)
	return b
}

// Subscribed is told of a subscription just created (or posted again).
// When it still awaits confirmation, a confirmation request is sent in
// the background; the call never blocks the API request.
func (e *Engine) Subscribed(q storage.QueueRef, sub storage.Subscription) {
	select {
	case e.confs <- struct{}{}:
	default:
		e.log.Warn("too many confirmation requests in flight; the subscriber may post the subscription again",
			"subscription", sub.ID)
		return
	}
	e.sends.Add(1)
	go func() {
		defer e.sends.Done()
		defer func() { <-e.confs }()
		ctx := context.Background()
		gctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
		cur, err := e.drv.Subscriptions().Get(gctx, q, sub.ID)
		cancel()
		if err != nil || cur.Confirmed || !cur.NeedsConfirmation {
			return
		}
		body := confirmation(q, cur, e.opts.SignKey, time.Now())
		for attempt := 0; attempt < confirmAttempts; attempt++ {
			sctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
			if scheme(cur.Subscriber) == "mailto" {
				err = e.mail.send(sctx, cur, q.Name, body)
			} else {
				// As Zaqar, through the subscription's post_data template.
				err = e.web.post(sctx, q, cur, "", webhookBody(cur, body))
			}
			cancel()
			if err == nil {
				return
			}
			time.Sleep(e.backoff(attempt))
		}
		e.log.Warn("confirmation request not delivered", "subscription", cur.ID, "error", err.Error())
	}()
}
