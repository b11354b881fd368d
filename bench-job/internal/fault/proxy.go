package fault

import (
	"errors"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyConfig is a delaying TCP proxy.
type ProxyConfig struct {
	// Listen is the address accepted connections arrive on (":16379").
	Listen string
	// Upstream is where each accepted connection is forwarded.
	Upstream string
	// Delay ± Jitter (uniform) is how long every chunk is held, in each
	// direction. Jitter must not exceed Delay.
	Delay, Jitter time.Duration
	// MaxConns bounds the connections relayed at once; more are closed as
	// soon as accepted, which clients see as a reset and retry.
	MaxConns int
	// MaxHeld bounds the bytes held per direction of a connection; beyond
	// it the proxy stops reading that direction, so the sender sees TCP
	// backpressure instead of the proxy growing without bound.
	MaxHeld int
}

// ProxyStats counts what a proxy relayed.
type ProxyStats struct {
	Accepted   int64 `json:"connections"`
	Refused    int64 `json:"refusedOverLimit"`
	DialFailed int64 `json:"upstreamDialFailed"`
	Peak       int64 `json:"peakConnections"`
	BytesUp    int64 `json:"bytesToRedis"`
	BytesDown  int64 `json:"bytesToClients"`
}

// Proxy relays connections to Upstream, holding every chunk it relays for
// Delay ± Jitter while keeping each direction's bytes in order.
type Proxy struct {
	cfg      ProxyConfig
	ln       net.Listener
	accepted sync.WaitGroup // the accept loop
	pairs    sync.WaitGroup // connections being relayed

	mu     sync.Mutex
	active map[*pair]struct{}
	closed bool

	accepts, refused, dialFailed, peak, bytesUp, bytesDown atomic.Int64
}

// readChunk is the most a relay reads at once; each read is one chunk.
const readChunk = 32 << 10

// dialTimeout bounds the connection to the upstream.
const dialTimeout = 5 * time.Second

// ListenProxy starts a proxy accepting on cfg.Listen.
func ListenProxy(cfg ProxyConfig) (*Proxy, error) {
	if cfg.Jitter < 0 || cfg.Jitter > cfg.Delay {
		return nil, errors.New("proxy: jitter must be within [0, delay]")
	}
	if cfg.MaxConns <= 0 || cfg.MaxHeld <= 0 {
		return nil, errors.New("proxy: MaxConns and MaxHeld must be positive")
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{cfg: cfg, ln: ln, active: map[*pair]struct{}{}}
	p.accepted.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr is the address the proxy listens on.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

func (p *Proxy) acceptLoop() {
	defer p.accepted.Done()
	backoff := 5 * time.Millisecond
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait and try again
			// rather than end the fault.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		p.accepts.Add(1)
		pr := &pair{down: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed || len(p.active) >= p.cfg.MaxConns {
			p.mu.Unlock()
			p.refused.Add(1)
			_ = c.Close()
			continue
		}
		p.active[pr] = struct{}{}
		if n := int64(len(p.active)); n > p.peak.Load() {
			p.peak.Store(n)
		}
		p.pairs.Add(1)
		p.mu.Unlock()
		go p.relayPair(pr)
	}
}

// pair is one client connection and its upstream connection.
type pair struct {
	down, up  net.Conn
	done      chan struct{} // closed when both connections are closed
	closeOnce sync.Once
	mu        sync.Mutex
	queues    [2]*delayQueue
}

func (pr *pair) close() {
	pr.closeOnce.Do(func() {
		close(pr.done)
		_ = pr.down.Close()
		pr.mu.Lock()
		if pr.up != nil {
			_ = pr.up.Close()
		}
		for _, q := range pr.queues {
			if q != nil {
				q.abort()
			}
		}
		pr.mu.Unlock()
	})
}

func (p *Proxy) relayPair(pr *pair) {
	defer p.pairs.Done()
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.active, pr)
		p.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", p.cfg.Upstream, dialTimeout)
	if err != nil {
		p.dialFailed.Add(1)
		return
	}
	toUp, toDown := newDelayQueue(p.cfg.MaxHeld), newDelayQueue(p.cfg.MaxHeld)
	pr.mu.Lock()
	pr.up, pr.queues = up, [2]*delayQueue{toUp, toDown}
	select {
	case <-pr.done: // the proxy shut down while dialing
		pr.mu.Unlock()
		_ = up.Close()
		return
	default:
	}
	pr.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	// A client may half-close and still wait for answers, so its end of
	// stream is passed on as such; Redis closing is the end of the pair
	// (it reads nothing more), which lets clients notice promptly.
	go func() { defer wg.Done(); p.relay(pr, pr.down, up, toUp, &p.bytesUp, false) }()
	go func() { defer wg.Done(); p.relay(pr, up, pr.down, toDown, &p.bytesDown, true) }()
	wg.Wait()
}

// relay copies src to dst through q: this goroutine reads and stamps each
// chunk with its release time, another writes it once that time comes.
// Once src has ended and its bytes are written, dst is half-closed, or
// the pair closed when closeAtEnd.
func (p *Proxy) relay(pr *pair, src, dst net.Conn, q *delayQueue, counter *atomic.Int64, closeAtEnd bool) {
	written := make(chan bool, 1) // true: src ended cleanly and everything was written
	go func() { written <- p.writeReleased(pr, dst, q, counter) }()
	buf := make([]byte, readChunk)
	for {
		room, ok := q.room()
		if !ok {
			break
		}
		n, err := src.Read(buf[:min(room, len(buf))])
		if n > 0 {
			q.push(append([]byte(nil), buf[:n]...), time.Now().Add(p.holdFor()))
		}
		if err != nil {
			q.closeInput()
			break
		}
	}
	if clean := <-written; clean && !closeAtEnd {
		// Pass the end of stream on after the held bytes; the other
		// direction may still be talking.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
			return
		}
	}
	pr.close()
}

// writeReleased writes q's chunks to dst as their times come. It reports
// whether the input ended and every chunk was written.
func (p *Proxy) writeReleased(pr *pair, dst net.Conn, q *delayQueue, counter *atomic.Int64) bool {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		c, ok := q.pop()
		if !ok {
			return !q.aborted()
		}
		if wait := time.Until(c.at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-pr.done:
				return false
			}
		}
		n, err := dst.Write(c.data)
		counter.Add(int64(n))
		q.release(len(c.data))
		if err != nil {
			// dst is gone: nothing more can be relayed on this pair.
			pr.close()
			return false
		}
	}
}

// holdFor is one chunk's delay: Delay plus a uniform draw in ±Jitter.
func (p *Proxy) holdFor() time.Duration {
	d := p.cfg.Delay
	if j := p.cfg.Jitter; j > 0 {
		d += time.Duration(rand.Int64N(int64(2*j)+1)) - j
	}
	return d
}

// Shutdown stops accepting, gives the connections being relayed up to
// grace to end on their own (their held bytes delivered), then closes the
// rest and waits for every goroutine.
func (p *Proxy) Shutdown(grace time.Duration) {
	_ = p.ln.Close()
	p.accepted.Wait()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	ended := make(chan struct{})
	go func() { p.pairs.Wait(); close(ended) }()
	select {
	case <-ended:
		return
	case <-time.After(grace):
	}
	p.mu.Lock()
	for pr := range p.active {
		pr.close()
	}
	p.mu.Unlock()
	<-ended
}

// Active is the number of connections being relayed.
func (p *Proxy) Active() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.active)
}

// Stats counts what the proxy relayed so far.
func (p *Proxy) Stats() ProxyStats {
	return ProxyStats{
		Accepted: p.accepts.Load(), Refused: p.refused.Load(), DialFailed: p.dialFailed.Load(),
		Peak: p.peak.Load(), BytesUp: p.bytesUp.Load(), BytesDown: p.bytesDown.Load(),
	}
}

// chunk is bytes read at one time and the time they may be written.
type chunk struct {
	data []byte
	at   time.Time
}

// delayQueue is one direction's held chunks, in read order, and the bytes
// they hold (counted until written, so MaxHeld bounds memory).
type delayQueue struct {
	mu      sync.Mutex
	cond    sync.Cond
	items   []chunk
	held    int
	max     int
	last    time.Time
	eof     bool
	stopped bool
}

func newDelayQueue(max int) *delayQueue {
	q := &delayQueue{max: max}
	q.cond.L = &q.mu
	return q
}

// room waits until the queue holds less than max and returns how many
// more bytes it may take; false once the queue is aborted.
func (q *delayQueue) room() (int, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.held >= q.max && !q.stopped {
		q.cond.Wait()
	}
	return q.max - q.held, !q.stopped
}

// push appends data to be written at at, or at the previous chunk's time
// if that is later: jitter never reorders a stream.
func (q *delayQueue) push(data []byte, at time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if at.Before(q.last) {
		at = q.last
	}
	q.last = at
	q.items = append(q.items, chunk{data: data, at: at})
	q.held += len(data)
	q.cond.Broadcast()
}

// pop waits for the oldest chunk; false when the input ended and every
// chunk was taken, or the queue was aborted.
func (q *delayQueue) pop() (chunk, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.items) == 0 && !q.eof && !q.stopped {
		q.cond.Wait()
	}
	if q.stopped || len(q.items) == 0 {
		return chunk{}, false
	}
	c := q.items[0]
	q.items[0] = chunk{}
	q.items = q.items[1:]
	return c, true
}

// release returns n written bytes to the budget.
func (q *delayQueue) release(n int) {
	q.mu.Lock()
	q.held -= n
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *delayQueue) closeInput() {
	q.mu.Lock()
	q.eof = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *delayQueue) abort() {
	q.mu.Lock()
	q.stopped = true
	q.items = nil
	q.cond.Broadcast()
	q.mu.Unlock()
}

func (q *delayQueue) aborted() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.stopped
}

// heldBytes is the bytes the queue holds now.
func (q *delayQueue) heldBytes() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held
}
