package fault

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every byte it reads, on loopback.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func startProxy(t *testing.T, cfg ProxyConfig) *Proxy {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DelayMaxConns
	}
	if cfg.MaxHeld == 0 {
		cfg.MaxHeld = DelayMaxHeld
	}
	p, err := ListenProxy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Shutdown(0) })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", p.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip sends one byte and waits for its echo.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	return time.Since(start)
}

func TestProxyHoldsEachDirection(t *testing.T) {
	const delay, jitter = 50 * time.Millisecond, 10 * time.Millisecond
	p := startProxy(t, ProxyConfig{Upstream: echoServer(t), Delay: delay, Jitter: jitter})
	c := dial(t, p)
	for i := 0; i < 5; i++ {
		// Held once on the way in and once on the way out.
		if rtt := roundTrip(t, c); rtt < 2*(delay-jitter) || rtt > 2*(delay+jitter)+300*time.Millisecond {
			t.Fatalf("round trip %d took %v, want within [%v, %v + slack]", i, rtt, 2*(delay-jitter), 2*(delay+jitter))
		}
	}
	// The counters move just after each write, so the last one may lag
	// the echo the client read.
	s := p.Stats()
	for deadline := time.Now().Add(2 * time.Second); s.BytesDown != 5 && time.Now().Before(deadline); s = p.Stats() {
		time.Sleep(5 * time.Millisecond)
	}
	if s.Accepted != 1 || s.BytesUp != 5 || s.BytesDown != 5 {
		t.Fatalf("stats %+v, want 1 connection and 5 bytes each way", s)
	}
}

func TestProxyKeepsOrderUnderFullJitter(t *testing.T) {
	// Jitter as large as the delay gives later chunks earlier times than
	// their predecessors often; the stream must still arrive in order.
	p := startProxy(t, ProxyConfig{Upstream: echoServer(t), Delay: 20 * time.Millisecond, Jitter: 20 * time.Millisecond})
	c := dial(t, p)
	var sent bytes.Buffer
	for i := 0; i < 200; i++ {
		sent.WriteString(fmt.Sprintf("%05d\n", i))
	}
	go func() {
		b := sent.Bytes()
		for i := 0; i < len(b); i += 6 {
			_, _ = c.Write(b[i : i+6])
			time.Sleep(500 * time.Microsecond) // separate reads, so separate chunks
		}
	}()
	got := make([]byte, sent.Len())
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, sent.Bytes()) {
		t.Fatalf("stream reordered or altered:\n%q\nwant\n%q", got[:60], sent.Bytes()[:60])
	}
}

func TestProxyBackpressure(t *testing.T) {
	// An upstream that never reads: once the kernel's buffers are full the
	// proxy may hold MaxHeld bytes and no more, and the client's writes
	// block instead.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	const maxHeld = 256 << 10
	p := startProxy(t, ProxyConfig{Upstream: ln.Addr().String(), Delay: time.Millisecond, MaxHeld: maxHeld})
	c := dial(t, p)
	buf := make([]byte, 1<<20)
	written := 0
	_ = c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	for written < 256<<20 {
		n, err := c.Write(buf)
		written += n
		if err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
	}
	if written >= 256<<20 {
		t.Fatalf("wrote %d bytes without blocking", written)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for pr := range p.active {
		pr.mu.Lock()
		for i, q := range pr.queues {
			if h := q.heldBytes(); h > maxHeld {
				t.Errorf("direction %d holds %d bytes, over the bound %d", i, h, maxHeld)
			}
		}
		pr.mu.Unlock()
	}
	t.Logf("client wrote %d bytes before blocking", written)
}

func TestProxyRefusesOverMaxConns(t *testing.T) {
	p := startProxy(t, ProxyConfig{Upstream: echoServer(t), Delay: time.Millisecond, MaxConns: 2})
	for i := 0; i < 2; i++ {
		roundTrip(t, dial(t, p)) // relayed, and counted as active
	}
	extra := dial(t, p)
	_ = extra.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = extra.Write([]byte{'x'})
	if _, err := extra.Read(make([]byte, 1)); err == nil {
		t.Fatal("a connection over the limit was relayed")
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("a connection over the limit was left open instead of closed")
	}
	if s := p.Stats(); s.Refused != 1 || p.Active() != 2 {
		t.Fatalf("stats %+v active %d, want 1 refused and 2 active", s, p.Active())
	}
}

func TestProxyUpstreamDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	p := startProxy(t, ProxyConfig{Upstream: down, Delay: time.Millisecond})
	c := dial(t, p)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from a proxy whose upstream is down: %v, want the connection closed", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.Stats().DialFailed != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := p.Stats(); s.DialFailed != 1 {
		t.Fatalf("stats %+v, want one failed dial", s)
	}
}

func TestProxyShutdownClosesWhatIsLeft(t *testing.T) {
	p, err := ListenProxy(ProxyConfig{Listen: "127.0.0.1:0", Upstream: echoServer(t), Delay: time.Millisecond, MaxConns: 4, MaxHeld: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, p)
	roundTrip(t, c)
	start := time.Now()
	p.Shutdown(100 * time.Millisecond)
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("shutdown took %v", took)
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection still open after shutdown: %v", err)
	}
	if p.Active() != 0 {
		t.Fatalf("%d connections still active", p.Active())
	}
	if _, err := net.DialTimeout("tcp", p.Addr().String(), time.Second); err == nil {
		t.Fatal("proxy still accepts after shutdown")
	}
}

func TestProxyRejectsJitterOverDelay(t *testing.T) {
	if _, err := ListenProxy(ProxyConfig{Listen: "127.0.0.1:0", Delay: time.Millisecond, Jitter: 2 * time.Millisecond, MaxConns: 1, MaxHeld: 1}); err == nil {
		t.Fatal("jitter over delay accepted")
	}
}
