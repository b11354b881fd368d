// Package sockio reads and writes a TCP connection with raw system calls
// made through the connection's own poller, so the Go scheduler never
// sees them as system calls.
//
// Why: every read and write of a net.Conn enters the scheduler's system
// call state. With GOMAXPROCS=1 (as the operator deploys the server) the
// runtime's monitor thread, asleep while the one P is idle, is woken by
// the first such call after each idle spell, and it takes the P away from
// a thread whose call has run past its tick, starting another thread to
// run it. On a guest where a loopback write can be descheduled inside the
// kernel (it wakes the peer, which may preempt it), that happens all the
// time: at 4 connections the server switched threads 1.5 times per POST,
// and 0.8 times with these calls, for about 15 % less CPU per request
// (docs/benchmarks.md, "The scheduler's monitor and socket calls"). A
// read or write of a non-blocking socket never blocks: it copies what
// fits and returns, or returns EAGAIN, on which the poller parks the
// goroutine exactly as net.Conn's own Read and Write do. So these calls need none of that
// bookkeeping, and the deadlines and Close of the connection still apply
// (the poller enforces them).
package sockio

import (
	"io"
	"net"
	"os"
	"syscall"
)

// Conn reads and writes one connection's socket directly.
type Conn struct {
	c  net.Conn
	rc syscall.RawConn
}

// New is c's direct reader and writer, or false when c is not a socket
// (a TLS connection, a test's pipe): use c itself then.
func New(c net.Conn) (*Conn, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	return &Conn{c: c, rc: rc}, true
}

// Raw is the connection's own syscall.RawConn.
func (s *Conn) Raw() syscall.RawConn { return s.rc }

// Read reads as net.Conn's Read does: at least one byte, or io.EOF when
// the peer has closed, or the connection's error (a passed deadline is
// os.ErrDeadlineExceeded inside a *net.OpError, as net reports it).
func (s *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	var errno syscall.Errno
	err := s.rc.Read(func(fd uintptr) bool {
		for {
			r, e := sysRead(fd, p)
			switch e {
			case syscall.EINTR:
				continue
			case syscall.EAGAIN:
				return false // the poller waits for the socket, then calls again
			}
			n, errno = r, e
			return true
		}
	})
	switch {
	case err != nil:
		return 0, s.opError("read", err)
	case errno != 0:
		return 0, s.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// Write writes all of p, as net.Conn's Write does: the poller calls the
// function again, once the socket can take more, for as long as it
// returns false.
func (s *Conn) Write(p []byte) (int, error) {
	done := 0
	var errno syscall.Errno
	err := s.rc.Write(func(fd uintptr) bool {
		for done < len(p) {
			r, e := sysWrite(fd, p[done:])
			switch e {
			case 0:
				done += r
			case syscall.EINTR:
			case syscall.EAGAIN:
				return false
			default:
				errno = e
				return true
			}
		}
		return true
	})
	switch {
	case err != nil:
		return done, s.opError("write", err)
	case errno != 0:
		return done, s.opError("write", os.NewSyscallError("write", errno))
	}
	return done, nil
}

// opError words err as net words its connections' errors: a *net.OpError
// of op, so callers that look for a timeout (net.Error) or net.ErrClosed
// find them. The poller's own errors come as "raw-read"/"raw-write".
func (s *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		w := *oe
		w.Op = op
		return &w
	}
	return &net.OpError{Op: op, Net: s.c.LocalAddr().Network(), Source: s.c.LocalAddr(), Addr: s.c.RemoteAddr(), Err: err}
}
