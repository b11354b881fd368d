package redis

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"sluice.dev/server/internal/sockio"
)

// dialer is go-redis' own dialer (NewDialer: its timeout, keep-alive and
// TLS) with the health check of conn on every plain TCP connection. A TLS
// connection is no syscall.Conn, which go-redis never checks: it stays as
// dialed.
func dialer(timeout time.Duration, tlsConf *tls.Config) func(context.Context, string, string) (net.Conn, error) {
	dial := goredis.NewDialer(&goredis.Options{DialTimeout: timeout, TLSConfig: tlsConf})
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		sock, ok := sockio.New(c)
		if !ok {
			return c, nil
		}
		cc := &conn{Conn: c, sock: sock}
		cc.probe = probe{RawConn: sock.Raw(), c: cc}
		return cc, nil
	}
}

// probeAfter is how long a connection must have been idle before the
// pool's health check looks at it.
const probeAfter = 100 * time.Millisecond

// conn is a Redis connection whose health check costs nothing while it is
// in use. go-redis' pool peeks at every connection it hands out
// (recvfrom(MSG_PEEK)), to find one Redis closed while it sat idle: at
// saturation that is one system call per pipeline, 3 % of the server's
// CPU (docs/benchmarks.md, "Health checks of busy connections"). conn lets
// the peek through only once the connection has been idle for probeAfter;
// a connection in use is checked by its use: one Redis closed within that
// window fails its next command, as one closed mid-command does.
type conn struct {
	net.Conn
	// lastRead is when a read last returned data (Unix ns). Atomic: a
	// pub/sub connection is read by one goroutine and checked by another.
	lastRead atomic.Int64
	probe    syscall.RawConn // built once: the pool asks for it per use
	// sock reads and writes the socket without the scheduler's system
	// call bookkeeping (sockio): a pipeline's write and its reply's reads.
	sock *sockio.Conn
}

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.sock.Read(p)
	if n > 0 {
		c.lastRead.Store(time.Now().UnixNano())
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) { return c.sock.Write(p) }

// SyscallConn is what go-redis' health check reads through.
func (c *conn) SyscallConn() (syscall.RawConn, error) { return c.probe, nil }

// probe passes the health check's peek on only for an idle connection.
type probe struct {
	syscall.RawConn
	c *conn
}

func (p probe) Read(f func(fd uintptr) bool) error {
	if time.Now().UnixNano()-p.c.lastRead.Load() < int64(probeAfter) {
		return nil
	}
	return p.RawConn.Read(f)
}
