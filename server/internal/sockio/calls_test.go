package sockio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// These tests run in both builds: make test-server runs this package with
// and without -race, so both the raw calls (syscalls.go) and the syscall
// package's (syscalls_race.go) are what they exercise.

// pattern is n bytes that differ from their neighbours, so a byte lost,
// repeated or moved shows.
func pattern(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + i>>8)
	}
	return p
}

// buffers sizes the kernel's buffers of c (sockio's side) and b (the
// peer) as drawn: small ones make every call of some kilobytes meet a
// full socket (EAGAIN) and a partial copy. Receive buffers stay above
// 64 KiB: below a loopback segment, TCP waits for delayed ACKs and a
// megabyte takes minutes.
func buffers(t *rapid.T, c *net.TCPConn, b net.Conn) {
	snd := func(label string) int { return rapid.IntRange(1<<12, 1<<18).Draw(t, label) }
	rcv := func(label string) int { return rapid.IntRange(1<<16, 1<<18).Draw(t, label) }
	c.SetWriteBuffer(snd("sndbuf"))
	c.SetReadBuffer(rcv("rcvbuf"))
	b.(*net.TCPConn).SetWriteBuffer(snd("peer sndbuf"))
	b.(*net.TCPConn).SetReadBuffer(rcv("peer rcvbuf"))
}

// readAll reads r until it fails, size bytes at a time, pausing after
// each of the first pauses reads: what it read, and the error it ended on.
func readAll(r io.Reader, size, pauses int, pause time.Duration) ([]byte, error) {
	var all []byte
	buf := make([]byte, size)
	for i := 0; ; i++ {
		n, err := r.Read(buf)
		all = append(all, buf[:n]...)
		if err != nil {
			return all, err
		}
		if i < pauses {
			time.Sleep(pause)
		}
	}
}

// A write its deadline cuts short counts exactly the bytes the peer gets,
// however the buffers are sized and the peer reads (sizes, pauses): the
// write met a full socket, left it to the poller and went on any number
// of times, and what it reports is what left, with a timeout; a write
// that was not cut reports all of it and no error.
func TestACutWriteCountsWhatLeft(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, s, b, closeBoth := pair(t)
		defer closeBoth()
		buffers(t, c, b)
		size := rapid.IntRange(0, 1<<20).Draw(t, "size")
		readSize := rapid.IntRange(256, 1<<16).Draw(t, "peer read size")
		pauses := rapid.IntRange(0, 8).Draw(t, "peer pauses")
		pause := time.Duration(rapid.IntRange(0, 2000).Draw(t, "pause µs")) * time.Microsecond
		within := time.Duration(rapid.IntRange(1, 20).Draw(t, "deadline ms")) * time.Millisecond
		want := pattern(size)

		type result struct {
			b   []byte
			err error
		}
		got := make(chan result, 1)
		b.SetReadDeadline(time.Now().Add(10 * time.Second))
		go func() {
			all, err := readAll(b, readSize, pauses, pause)
			got <- result{all, err}
		}()
		c.SetWriteDeadline(time.Now().Add(within))
		n, err := s.Write(want)
		var ne net.Error
		switch {
		case err == nil && n != size:
			t.Fatalf("Write(%d bytes) = %d, nil", size, n)
		case err != nil && (n >= size || !errors.As(err, &ne) || !ne.Timeout()):
			t.Fatalf("Write(%d bytes) = %d, %v; want fewer bytes and a timeout", size, n, err)
		}
		c.Close() // its FIN follows the bytes written: the peer reads them all, then EOF
		r := <-got
		if r.err != io.EOF {
			t.Fatalf("the peer's read ended with %v after %d bytes", r.err, len(r.b))
		}
		if len(r.b) != n || !bytes.Equal(r.b, want[:n]) {
			t.Fatalf("Write counted %d bytes; the peer got %d (a prefix of what was written: %v)",
				n, len(r.b), bytes.HasPrefix(want, r.b))
		}
	})
}

// Both directions at once: sockio writes one stream and reads another
// while the peer does the same, with small buffers, so a read and a write
// of the same connection wait on the poller together and each wakes for
// its own direction.
func TestBothWaysAtOnce(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, s, b, closeBoth := pair(t)
		defer closeBoth()
		buffers(t, c, b)
		// At most some hundred calls a way: small calls, small streams.
		readSize := rapid.IntRange(1, 1<<17).Draw(t, "read size")
		writes := rapid.SliceOfN(rapid.IntRange(1, 1<<18), 1, 6).Draw(t, "write sizes")
		up := pattern(rapid.IntRange(0, min(1<<19, slices.Min(writes)<<8)).Draw(t, "up"))
		down := pattern(rapid.IntRange(0, min(1<<19, readSize<<8)).Draw(t, "down"))
		for i := range down {
			down[i] ^= 0x5a // not up's bytes
		}
		deadline := time.Now().Add(10 * time.Second)
		c.SetDeadline(deadline)
		b.SetDeadline(deadline)

		errs := make(chan error, 3)
		go func() { // sockio writes up, in the drawn sizes (the last repeats)
			p := up
			for i := 0; len(p) > 0; i++ {
				k := min(writes[min(i, len(writes)-1)], len(p))
				if n, err := s.Write(p[:k]); n != k || err != nil {
					errs <- fmt.Errorf("sockio Write(%d bytes) = %d, %v", k, n, err)
					return
				}
				p = p[k:]
			}
			errs <- nil
		}()
		go func() { // the peer writes down
			_, err := b.Write(down)
			errs <- err
		}()
		go func() { // the peer reads up
			got := make([]byte, len(up))
			_, err := io.ReadFull(b, got)
			if err == nil && !bytes.Equal(got, up) {
				err = errors.New("the peer read other bytes than sockio wrote")
			}
			errs <- err
		}()
		var read []byte
		buf := make([]byte, readSize)
		for len(read) < len(down) {
			n, err := s.Read(buf)
			if n == 0 || err != nil {
				t.Fatalf("sockio Read after %d of %d bytes = %d, %v", len(read), len(down), n, err)
			}
			read = append(read, buf[:n]...)
		}
		if !bytes.Equal(read, down) {
			t.Fatal("sockio read other bytes than the peer wrote")
		}
		for range 3 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// The calls themselves, as the poller's functions make them: a socket
// with nothing to read says EAGAIN (and reads nothing), a full one says
// EAGAIN to a write after taking what fit, whatever the sizes written;
// what they took is what the peer reads; a descriptor that is not open
// is EBADF. A count is only looked at without an error: it is -1 with one
// from the raw calls, 0 from the syscall package's.
func TestTheCalls(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c, s, b, closeBoth := pair(t)
		defer closeBoth()
		buffers(t, c, b)
		chunk := rapid.IntRange(64, 1<<17).Draw(t, "chunk")
		readSize := rapid.IntRange(1, 1<<16).Draw(t, "read size")
		src := pattern(1 << 17)

		var readErr, writeErr syscall.Errno
		sent := 0
		err := s.Raw().Control(func(fd uintptr) {
			_, readErr = sysRead(fd, make([]byte, readSize))
			for {
				n, e := sysWrite(fd, src[sent%len(src):][:min(chunk, len(src)-sent%len(src))])
				if e != 0 {
					writeErr = e
					return
				}
				if n <= 0 || sent > 1<<26 {
					writeErr = syscall.Errno(0)
					return
				}
				sent += n
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if readErr != syscall.EAGAIN {
			t.Fatalf("read of an empty socket: errno %v, want EAGAIN", readErr)
		}
		if writeErr != syscall.EAGAIN || sent == 0 {
			t.Fatalf("writes until the socket was full: %d bytes, then errno %v; want EAGAIN", sent, writeErr)
		}
		got := make([]byte, sent)
		b.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(b, got); err != nil {
			t.Fatalf("the peer read: %v", err)
		}
		for i := 0; i < sent; i += len(src) {
			if !bytes.Equal(got[i:min(i+len(src), sent)], src[:min(len(src), sent-i)]) {
				t.Fatalf("the peer read other bytes at %d", i)
			}
		}

		// The peer's bytes, read as the calls find them arrived.
		msg := pattern(rapid.IntRange(1, min(1<<15, readSize<<6)).Draw(t, "peer bytes"))
		if _, err := b.Write(msg); err != nil {
			t.Fatal(err)
		}
		var read []byte
		buf := make([]byte, readSize)
		for end := time.Now().Add(10 * time.Second); len(read) < len(msg) && time.Now().Before(end); {
			var n int
			var e syscall.Errno
			s.Raw().Control(func(fd uintptr) { n, e = sysRead(fd, buf) })
			switch {
			case e == syscall.EAGAIN:
				time.Sleep(100 * time.Microsecond)
			case e != 0 || n <= 0:
				t.Fatalf("read after %d of %d bytes: %d, errno %v", len(read), len(msg), n, e)
			default:
				read = append(read, buf[:n]...)
			}
		}
		if !bytes.Equal(read, msg) {
			t.Fatalf("read %d bytes of the peer's %d, or others", len(read), len(msg))
		}
	})

	const notOpen = 1 << 29 // far above any descriptor a test opens
	if _, e := sysRead(notOpen, make([]byte, 1)); e != syscall.EBADF {
		t.Errorf("read of a descriptor that is not open: errno %v, want EBADF", e)
	}
	if _, e := sysWrite(notOpen, make([]byte, 1)); e != syscall.EBADF {
		t.Errorf("write to a descriptor that is not open: errno %v, want EBADF", e)
	}
}

// Errors are net.Conn's: each way a connection ends or fails, met through
// sockio and through net.Conn itself on a connection of its own, gives
// the same counts and the same errors, word for word (the addresses
// aside) and as errors.Is and net.Error see them. Writes to a peer that
// has gone fail (EPIPE or ECONNRESET, whichever the kernel says first)
// and do not end the process (SIGPIPE).
func TestErrorsAsNetConns(t *testing.T) {
	// Each scenario does its calls on rw (sockio or the net.Conn) of the
	// connection c, whose peer is b, and describes what they returned.
	type scenario func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string
	scenarios := map[string]scenario{
		"peer reset": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			b.(*net.TCPConn).SetLinger(0) // its Close sends RST
			b.Write([]byte("gone"))
			b.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			var out []string
			buf := make([]byte, 16)
			for range 3 { // the bytes (or not: RST drops them), ECONNRESET, then EOF
				out = append(out, call(rw.Read(buf)))
			}
			return append(out, call(rw.Write([]byte("x"))), call(rw.Read(buf)))
		},
		"peer closed": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			b.Write([]byte("last"))
			b.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			buf := make([]byte, 16)
			out := []string{call(rw.Read(buf)), call(rw.Read(buf))}
			// The first writes after the peer's FIN succeed (the kernel
			// learns it has gone from its answer, RST); one soon fails.
			for range 1000 {
				n, err := rw.Write([]byte("x"))
				if err != nil {
					if !errors.Is(err, syscall.EPIPE) && !errors.Is(err, syscall.ECONNRESET) {
						t.Errorf("write to a closed peer: %v; want EPIPE or ECONNRESET", err)
					}
					return append(out, fmt.Sprintf("%d, a write error", n), call(rw.Write([]byte("x"))))
				}
				time.Sleep(time.Millisecond)
			}
			t.Error("writes to a closed peer never failed")
			return out
		},
		"closed": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			c.Close()
			return []string{call(rw.Read(make([]byte, 1))), call(rw.Write([]byte("x")))}
		},
		"closed while waiting": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			c.SetWriteBuffer(1)
			b.(*net.TCPConn).SetReadBuffer(1)
			res := make(chan string, 2)
			go func() { res <- call(rw.Read(make([]byte, 1))) }()
			go func() { // a write the peer never reads: it waits
				n, err := rw.Write(make([]byte, 4<<20))
				res <- fmt.Sprintf("wrote part: %v, ", n > 0 && n < 4<<20) + call(0, err)
			}()
			time.Sleep(30 * time.Millisecond)
			c.Close()
			out := []string{<-res, <-res}
			if out[0] > out[1] {
				out[0], out[1] = out[1], out[0]
			}
			return out
		},
		"deadline passed": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			c.SetDeadline(time.Now().Add(-time.Second))
			return []string{call(rw.Read(make([]byte, 1))), call(rw.Write([]byte("x")))}
		},
		"deadline passes": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			c.SetWriteBuffer(1)
			b.(*net.TCPConn).SetReadBuffer(1)
			c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			rd := call(rw.Read(make([]byte, 1)))
			c.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
			n, err := rw.Write(make([]byte, 4<<20))
			return []string{rd, fmt.Sprintf("wrote part: %v, ", n > 0 && n < 4<<20) + call(0, err)}
		},
		"nothing": func(t *testing.T, rw io.ReadWriter, c *net.TCPConn, b net.Conn) []string {
			return []string{call(rw.Read(nil)), call(rw.Write(nil))}
		},
	}
	for name, run := range scenarios {
		t.Run(name, func(t *testing.T) {
			var got [2][]string
			for i, direct := range []bool{true, false} {
				c, s, b, closeBoth := pair(t)
				var rw io.ReadWriter = s
				if !direct {
					rw = c
				}
				got[i] = run(t, rw, c, b)
				for j := range got[i] {
					got[i][j] = strings.NewReplacer(c.LocalAddr().String(), "LOCAL", c.RemoteAddr().String(), "REMOTE").Replace(got[i][j])
				}
				closeBoth()
			}
			if strings.Join(got[0], "\n") != strings.Join(got[1], "\n") {
				t.Errorf("sockio:\n\t%s\nnet.Conn:\n\t%s", strings.Join(got[0], "\n\t"), strings.Join(got[1], "\n\t"))
			}
		})
	}
}

// call describes a Read's or Write's result: the count, the error's words
// and what callers ask of it.
func call(n int, err error) string {
	if err == nil {
		return fmt.Sprintf("%d, nil", n)
	}
	var ne net.Error
	var oe *net.OpError
	var se *os.SyscallError
	var errno syscall.Errno
	d := fmt.Sprintf("%d, %q eof=%v closed=%v deadline=%v timeout=%v", n, err.Error(), err == io.EOF,
		errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout())
	if errors.As(err, &oe) {
		d += fmt.Sprintf(" op=%s net=%s", oe.Op, oe.Net)
	}
	if errors.As(err, &se) {
		d += " syscall=" + se.Syscall
	}
	if errors.As(err, &errno) {
		d += fmt.Sprintf(" errno=%d", int(errno))
	}
	return d
}
