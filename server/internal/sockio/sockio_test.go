package sockio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fataler is what pair needs of a *testing.T or *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
}

// pair is a connected loopback TCP pair: a (wrapped by sockio) and b (as
// net gives it), and what closes both.
func pair(t fataler) (*net.TCPConn, *Conn, net.Conn, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			acc <- nil
			return
		}
		acc <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	closeBoth := func() { c.Close(); b.Close() }
	s, ok := New(c)
	if !ok {
		closeBoth()
		t.Fatal("a TCP connection has no raw socket")
	}
	return c.(*net.TCPConn), s, b, closeBoth
}

// Whatever is written through sockio arrives whole and in order, and
// whatever the peer writes is read back whole, for writes of every size
// and reads into buffers of every size (so reads return parts).
func TestBytesArriveWholeBothWays(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, s, b, closeBoth := pair(t)
		defer closeBoth()
		chunks := rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 1<<14), 1, 4).Draw(t, "chunks")
		readBuf := rapid.IntRange(1, 1<<15).Draw(t, "readBuf")
		var want []byte
		for _, c := range chunks {
			want = append(want, c...)
		}

		// sockio writes, net reads.
		got := make(chan []byte, 1)
		go func() {
			all, _ := io.ReadAll(io.LimitReader(b, int64(len(want))))
			got <- all
		}()
		for _, c := range chunks {
			n, err := s.Write(c)
			if err != nil || n != len(c) {
				t.Fatalf("Write(%d bytes) = %d, %v", len(c), n, err)
			}
		}
		if g := <-got; !bytes.Equal(g, want) {
			t.Fatalf("peer read %d bytes, want %d (equal prefix: %v)", len(g), len(want), bytes.HasPrefix(want, g))
		}

		// net writes, sockio reads.
		go func() {
			for _, c := range chunks {
				b.Write(c)
			}
		}()
		var read []byte
		buf := make([]byte, readBuf)
		for len(read) < len(want) {
			n, err := s.Read(buf)
			if n == 0 || err != nil {
				t.Fatalf("Read after %d of %d bytes = %d, %v", len(read), len(want), n, err)
			}
			read = append(read, buf[:n]...)
		}
		if !bytes.Equal(read, want) {
			t.Fatal("bytes read differ from bytes written")
		}
	})
}

// A write larger than the socket's buffers, to a peer that starts reading
// late, waits on the poller (EAGAIN) and then completes whole.
func TestAWriteLargerThanTheBuffersWaits(t *testing.T) {
	_, s, b, closeBoth := pair(t)
	defer closeBoth()
	want := make([]byte, 16<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond)
		all, _ := io.ReadAll(io.LimitReader(b, int64(len(want))))
		got <- all
	}()
	if n, err := s.Write(want); n != len(want) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	if !bytes.Equal(<-got, want) {
		t.Fatal("the peer read other bytes")
	}
}

// A closed peer reads as io.EOF, as from net.Conn.
func TestPeerCloseIsEOF(t *testing.T) {
	_, s, b, closeBoth := pair(t)
	defer closeBoth()
	b.Write([]byte("last"))
	b.Close()
	buf := make([]byte, 16)
	n, err := s.Read(buf)
	if n != 4 || err != nil || string(buf[:n]) != "last" {
		t.Fatalf("first Read = %d, %v", n, err)
	}
	if n, err := s.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("Read after the peer closed = %d, %v; want 0, io.EOF", n, err)
	}
}

// The connection's deadlines still bound a read and a write: they fail as
// net.Conn's do, with a timeout net.Error.
func TestDeadlinesStillApply(t *testing.T) {
	c, s, _, closeBoth := pair(t)
	defer closeBoth()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	start := time.Now()
	n, err := s.Read(make([]byte, 8))
	var ne net.Error
	if n != 0 || !errors.As(err, &ne) || !ne.Timeout() || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline = %d, %v; want a timeout", n, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the read deadline was not kept: %v", d)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("error %v is not a read *net.OpError", err)
	}

	// Nobody reads the peer: a large write fills both buffers and waits
	// until its deadline.
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	n, err = s.Write(make([]byte, 8<<20))
	if !errors.As(err, &ne) || !ne.Timeout() || n >= 8<<20 {
		t.Fatalf("Write past its deadline = %d, %v; want a timeout", n, err)
	}
	if !errors.As(err, &oe) || oe.Op != "write" {
		t.Fatalf("error %v is not a write *net.OpError", err)
	}
}

// A read waiting on the poller ends when another goroutine closes the
// connection, with net.ErrClosed, as net.Conn's does; so does any call
// after.
func TestCloseEndsAWaitingRead(t *testing.T) {
	c, s, _, closeBoth := pair(t)
	defer closeBoth()
	errc := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 8))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read when closed: %v; want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a read waiting on a closed connection did not end")
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Write after close: %v; want net.ErrClosed", err)
	}
}

// What has no socket (a pipe) is not taken: callers use it as it is.
func TestOnlySockets(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if _, ok := New(a); ok {
		t.Fatal("New took a net.Pipe")
	}
	if n, err := (&Conn{}).Read(nil); n != 0 || err != nil {
		t.Fatalf("Read of nothing = %d, %v", n, err)
	}
}
