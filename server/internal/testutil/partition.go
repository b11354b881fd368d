package testutil

import (
	"net"
	"sync"
	"testing"
)

// Partition is a TCP relay on 127.0.0.1 in front of a backend that can
// be cut the way a network partition cuts it: bytes stop flowing both
// ways and nothing is closed or refused, so a client waits for its own
// timeouts, as behind a link that drops packets. Healing lets bytes flow
// again on the connections that survived their clients' timeouts.
type Partition struct {
	Addr string // host:port to dial instead of the backend
	ln     net.Listener
	to     string
	mu     sync.Mutex
	cut    bool
	closed bool
	heal   *sync.Cond
	wg     sync.WaitGroup
}

// StartPartition relays to target until the test ends.
func StartPartition(t testing.TB, target string) *Partition {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Partition{Addr: ln.Addr().String(), ln: ln, to: target}
	p.heal = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Cut stops every byte; Heal lets them flow again.
func (p *Partition) Cut()  { p.set(true) }
func (p *Partition) Heal() { p.set(false) }

func (p *Partition) set(cut bool) {
	p.mu.Lock()
	p.cut = cut
	p.mu.Unlock()
	p.heal.Broadcast()
}

// wait blocks while the link is cut; false once the relay is closed.
func (p *Partition) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.cut && !p.closed {
		p.heal.Wait()
	}
	return !p.closed
}

func (p *Partition) accept() {
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
func (p *Partition) pipe(src, dst net.Conn) {
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

func (p *Partition) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.heal.Broadcast()
	p.ln.Close()
	p.wg.Wait()
}
