// Package load drives a Zaqar v2 endpoint: zaqar-bench's producer,
// consumer and observer workers, the seed scenarios built from them, and a
// raw HTTP baseline. It records into package metrics and returns a
// result.Result.
package load

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/url"
	"time"

	"sluice.dev/bench/internal/result"
)

// Kind selects the driver loop of a scenario.
type Kind string

// Kinds of scenario.
const (
	KindZaqar    Kind = "zaqar"    // producers / consumers / observers for a duration
	KindFlood    Kind = "flood"    // sweep of connections pushing messages through an empty queue
	KindPacking  Kind = "packing"  // flood throughput as the backlog grows
	KindFairness Kind = "fairness" // small posts measured while large ones go through
	KindHTTP     Kind = "http"     // raw GET against any endpoint: the path's ceiling
	KindNotify   Kind = "notify"   // producers posting to queues a built-in webhook receiver subscribes to
)

// Config is everything a run needs.
type Config struct {
	Scenario string
	Kind     Kind
	Params   result.Params

	Target    string
	ProjectID string
	Token     string
	TokenFile string // instead of Token: re-read as it rotates
	ClientID  string // fixed Client-ID for every worker (default: one per process)
	Timeout   time.Duration

	Docs      []Doc // messages to post (zaqar-bench -m file, or sized)
	Verify    bool  // tag messages and account for every one of them
	SkipReset bool  // do not delete the queues first
	StartAt   time.Time
	Drain     time.Duration // how long consumers may keep draining after the run
	Notify    Notify        // the notifications scenario's webhook receiver
	Move      Move          // a queue move during the load (Move.Pool set)

	Progress io.Writer // live progress line; nil = quiet
	ErrorLog io.Writer // the first requests that got no status, in full (zaqar.Options.ErrorLog)
	Samples  io.Writer // raw per-request samples (CSV); nil = off
}

// Validate rejects parameters that cannot run.
func (c *Config) Validate() error {
	p := &c.Params
	if u, err := url.Parse(c.Target); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("server URL %q must be http(s)://host[:port]", c.Target)
	}
	for _, v := range []int{p.Producer.Processes, p.Producer.Workers, p.Consumer.Processes, p.Consumer.Workers, p.Observer.Processes, p.Observer.Workers} {
		if v < 0 {
			return fmt.Errorf("process and worker counts must be >= 0")
		}
	}
	if p.Time <= 0 {
		return fmt.Errorf("time must be > 0 seconds")
	}
	if p.NumQueues < 1 {
		return fmt.Errorf("num_queues must be >= 1")
	}
	if p.MessagesPerClaim < 1 || p.MessagesPerClaim > 20 || p.MessagesPerList < 1 || p.MessagesPerList > 20 {
		return fmt.Errorf("messages per claim and per list must be 1..20 (the API's limit)")
	}
	if p.Rate < 0 {
		return fmt.Errorf("rate must be >= 0")
	}
	if p.Producer.Total()+p.Consumer.Total()+p.Observer.Total() == 0 && c.Kind == KindZaqar {
		return fmt.Errorf("no workers: set -pw, -cw or -ow")
	}
	if c.Kind == KindNotify {
		if p.Producer.Total() == 0 || p.Consumer.Total()+p.Observer.Total() > 0 {
			return fmt.Errorf("notifications: producers only (-pw >= 1, no -cw/-ow): the webhook receiver is the consumer")
		}
		if c.Notify.Subscribe && !c.Verify {
			return fmt.Errorf("notifications: the receiver accounts for tagged messages; do not combine --no-verify with subscribing")
		}
		if c.Notify.Subscribe && c.Notify.Listen == "" {
			return fmt.Errorf("notifications: --receiver-listen is empty")
		}
	}
	if err := c.Move.validate(c); err != nil {
		return err
	}
	for _, v := range p.Sweep {
		if v < 0 || (c.Kind == KindFlood && v == 0) {
			return fmt.Errorf("sweep values must be positive")
		}
	}
	return nil
}

// NewUUID returns a random RFC 4122 version 4 UUID, for Client-IDs.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// newOrigin names this process in delivery tags.
func newOrigin() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
