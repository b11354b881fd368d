package testutil

import (
	"net"
	"sync"
	"testing"
	"time"
)

// Link is a TCP relay on 127.0.0.1 in front of a backend, with the
// faults of a network between them: Cut stops bytes both ways the way a
// partition does (nothing is closed or refused, so a client waits for its
// own timeouts, as behind a link that drops packets), Delay holds every
// read for a while (a slow link or a busy backend). Heal lets bytes flow
// again on the connections that survived their clients' timeouts.
type Link struct {
	Addr   string // host:port to dial instead of the backend
	ln     net.Listener
	to     string
	mu     sync.Mutex
	cut    bool
	delay  time.Duration
	closed bool
	heal   *sync.Cond
	wg     sync.WaitGroup
}

// StartLink relays to target until the test ends.
func StartLink(t testing.TB, target string) *Link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Link{Addr: ln.Addr().String(), ln: ln, to: target}
	p.heal = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Cut stops every byte; Heal lets them flow again, undelayed.
func (p *Link) Cut()  { p.set(true) }
func (p *Link) Heal() { p.set(false) }

// Delay holds every chunk read from either side for d before it is
// passed on.
func (p *Link) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

func (p *Link) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	if !cut {
		p.delay = 0
	}
	p.mu.Unlock()
	p.heal.Broadcast()
}

// wait blocks while the link is cut, then for its delay; false once the
// relay is closed.
func (p *Link) wait() bool {
	p.mu.Lock()
	for p.cut && !p.closed {
		p.heal.Wait()
	}
	d, open := p.delay, !p.closed
	p.mu.Unlock()
	if d > 0 && open {
		time.Sleep(d)
	}
	return open
}

func (p *Link) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.to)
		if err != nil {
			c.Close()
			continue
		}
		go p.pipe(c, b)
		go p.pipe(b, c)
	}
}

// pipe copies src to dst a read at a time, holding each read while the
// link is cut.
func (p *Link) pipe(src, dst net.Conn) {
	defer src.Close()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.wait() {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Link) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.heal.Broadcast()
	p.ln.Close()
	p.wg.Wait()
}
