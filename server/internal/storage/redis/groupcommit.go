package redis

import (
	"context"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// groupCommit coalesces concurrent script calls into pipelines. A call
// that finds a sender slot free sends at once, taking along every call
// queued meanwhile; a call that finds every slot busy waits in the queue
// until a sender takes it. Light load pays nothing (each call goes alone,
// at once); heavy load pays one write, one read and one round trip per
// pipeline instead of per call, in the server and in Redis.
// Each call is still its own FCALL, atomic on its own with its own reply
// or error, so a batch post stays all-or-nothing per request.
type groupCommit struct {
	c        *goredis.Client
	slots    chan struct{} // senders in flight
	maxBatch int
	mu       sync.Mutex
	queue    []*pending
}

type pending struct {
	ctx  context.Context
	fn   string
	keys []string
	args []any
	cmd  *goredis.Cmd
	done chan struct{}
}

func newGroupCommit(c *goredis.Client, senders, maxBatch int) *groupCommit {
	return &groupCommit{c: c, slots: make(chan struct{}, senders), maxBatch: maxBatch}
}

// FCall runs one function call, alone or pipelined with others.
func (g *groupCommit) FCall(ctx context.Context, fn string, keys []string, args ...any) *goredis.Cmd {
	if err := ctx.Err(); err != nil {
		return failed(ctx, err)
	}
	p := &pending{ctx: ctx, fn: fn, keys: keys, args: args, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, p)
	g.mu.Unlock()
	for {
		select {
		case <-p.done:
			return p.cmd
		case <-ctx.Done():
			// It may still be sent and run, like a call whose deadline
			// passes while Redis runs it.
			return failed(ctx, ctx.Err())
		case g.slots <- struct{}{}:
			batch := g.take()
			if len(batch) == 0 {
				// Another sender took this call: its answer is on the way.
				<-g.slots
				select {
				case <-p.done:
					return p.cmd
				case <-ctx.Done():
					return failed(ctx, ctx.Err())
				}
			}
			g.send(ctx, p, batch)
			<-g.slots
		}
	}
}

// failed is a command that carries only err.
func failed(ctx context.Context, err error) *goredis.Cmd {
	cmd := goredis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}

// take removes up to maxBatch calls from the head of the queue. Calls
// whose caller has given up are dropped unsent: the caller was told they
// failed, so they must not run.
func (g *groupCommit) take() []*pending {
	g.mu.Lock()
	defer g.mu.Unlock()
	batch := make([]*pending, 0, min(len(g.queue), g.maxBatch))
	i := 0
	for ; i < len(g.queue) && len(batch) < g.maxBatch; i++ {
		if p := g.queue[i]; p.ctx.Err() == nil {
			batch = append(batch, p)
		}
	}
	rest := copy(g.queue, g.queue[i:])
	clear(g.queue[rest:])
	g.queue = g.queue[:rest]
	return batch
}

// send runs the batch; own is the sender's own call, which alone may use
// the sender's context.
func (g *groupCommit) send(ctx context.Context, own *pending, batch []*pending) {
	if len(batch) == 1 && batch[0] == own {
		own.cmd = g.c.FCall(ctx, own.fn, own.keys, own.args...)
		close(own.done)
		return
	}
	// A pipeline outlives any one caller's context, so a caller that gives
	// up cannot fail the others' calls; go-redis' read and write timeouts
	// bound it.
	ctx = context.Background()
	pipe := g.c.Pipeline()
	for _, p := range batch {
		p.cmd = pipe.FCall(ctx, p.fn, p.keys, p.args...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own reply or error
	for _, p := range batch {
		close(p.done)
	}
}

// FunctionLoadReplace loads the library directly.
func (g *groupCommit) FunctionLoadReplace(ctx context.Context, code string) *goredis.StringCmd {
	return g.c.FunctionLoadReplace(ctx, code)
}

// Group commit sizes. groupSenders pipelines may be in flight per driver:
// enough to keep Redis busy while the next batch gathers, few enough that
// calls arriving together share a round trip. groupMaxBatch bounds one
// pipeline (its replies are buffered whole).
const (
	groupSenders  = 4
	groupMaxBatch = 64
)
