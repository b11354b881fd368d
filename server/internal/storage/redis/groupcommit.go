package redis

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// groupCommit coalesces concurrent script calls into pipelines. A call
// that finds a sender slot free sends at once, taking along every call
// queued meanwhile; a call that finds every slot busy waits in the queue
// until a sender takes it. Light load pays nothing (each call goes alone,
// at once); heavy load pays one write, one read and one round trip per
// pipeline instead of per call, in the server and in Redis.
// Each call is still its own FCALL, atomic on its own with its own reply
// or error, so a batch post stays all-or-nothing per request, except that
// calls that declare themselves mergeable (FCallMerging: posts, claims,
// deletes) to the same keys become one FCALL of all their arguments. That
// call is all-or-nothing as a whole, so each request in it still is, and
// every request gets its reply: the merged call's, which for such a
// function must be what each request alone would have been told (posts),
// or, for a function that splits its reply, the element of the reply
// array in the request's place (claims, deletes).
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
	// shared > 0 marks a mergeable call: its first shared arguments are
	// common to every call of fn on the same keys, the rest its own.
	shared int
	split  bool // the function replies with an array, one reply per call
	cmd    *goredis.Cmd
	done   chan struct{}
}

func newGroupCommit(c *goredis.Client, senders, maxBatch int) *groupCommit {
	return &groupCommit{c: c, slots: make(chan struct{}, senders), maxBatch: maxBatch}
}

// FCall runs one function call, alone or pipelined with others.
func (g *groupCommit) FCall(ctx context.Context, fn string, keys []string, args ...any) *goredis.Cmd {
	return g.call(&pending{ctx: ctx, fn: fn, keys: keys, args: args})
}

// FCallMerging runs a call that may be merged with other calls of fn on
// the same keys that are in the same pipeline: their first shared
// arguments (taken from the first call) followed by each call's others.
// With split, fn replies with an array of one reply per call, and the
// call is answered with its own element (alone too).
func (g *groupCommit) FCallMerging(ctx context.Context, fn string, keys []string, shared int, split bool, args ...any) *goredis.Cmd {
	return g.call(&pending{ctx: ctx, fn: fn, keys: keys, args: args, shared: shared, split: split})
}

func (g *groupCommit) call(p *pending) *goredis.Cmd {
	ctx := p.ctx
	if err := ctx.Err(); err != nil {
		return failed(ctx, err)
	}
	p.done = make(chan struct{})
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
		own.cmd = own.answer(g.c.FCall(ctx, own.fn, own.keys, own.args...), 0, 1)
		close(own.done)
		return
	}
	// A pipeline outlives any one caller's context, so a caller that gives
	// up cannot fail the others' calls. It lasts until the last of them
	// gives up (their latest deadline), when nobody waits for it any more;
	// go-redis' read and write timeouts bound it when one has none.
	ctx, cancel := latestDeadline(batch)
	defer cancel()
	calls := merge(batch)
	pipe := g.c.Pipeline()
	cmds := make([]*goredis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = pipe.FCall(ctx, c.fn, c.keys, c.args...)
	}
	_, _ = pipe.Exec(ctx) // every command carries its own reply or error
	for i, c := range calls {
		for j, p := range c.members {
			p.cmd = p.answer(cmds[i], j, len(c.members))
			close(p.done)
		}
	}
}

// latestDeadline is a context that ends at the latest deadline of the
// batch's callers, never cancelled by any one of them; without a deadline
// if a caller has none.
func latestDeadline(batch []*pending) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, p := range batch {
		d, ok := p.ctx.Deadline()
		if !ok {
			return context.Background(), func() {}
		}
		if d.After(latest) {
			latest = d
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// answer is the reply to the call that was member i of the n calls
// merged into cmd. A call that went alone gets cmd itself; a member of a
// merged call a command of its own, since callers may amend theirs
// (script.Run does, when it loads the library).
func (p *pending) answer(cmd *goredis.Cmd, i, n int) *goredis.Cmd {
	if n == 1 {
		if p.split {
			unwrap(cmd)
		}
		return cmd
	}
	own := goredis.NewCmd(p.ctx)
	if !p.split {
		own.SetVal(cmd.Val())
		own.SetErr(cmd.Err())
		return own
	}
	val, err := splitReply(cmd, i, n)
	own.SetVal(val)
	own.SetErr(err)
	return own
}

// unwrap turns the reply of a split function called for one request into
// that request's reply.
func unwrap(cmd *goredis.Cmd) {
	val, err := splitReply(cmd, 0, 1)
	cmd.SetVal(val)
	cmd.SetErr(err)
}

// splitReply is element i of the reply of a split function merged from n
// calls: a failed call fails each of them; an element that is an error
// reply fails only its own.
func splitReply(cmd *goredis.Cmd, i, n int) (any, error) {
	if err := cmd.Err(); err != nil {
		return nil, err
	}
	all, ok := cmd.Val().([]any)
	if !ok || len(all) != n {
		return nil, errMalformedMerge
	}
	if err, ok := all[i].(goredis.Error); ok {
		return nil, err
	}
	return all[i], nil
}

var errMalformedMerge = errors.New("a merged call's reply does not have one element per request")

// A mergedCall is one FCALL of the pipeline and the calls it answers.
type mergedCall struct {
	fn      string
	keys    []string
	args    []any
	members []*pending
	open    bool // opened by a mergeable call: later ones may join it
}

// mergeMaxArgs bounds one merged call (about 200 one-message posts), so
// one script run stays short and its arguments small.
const mergeMaxArgs = 1024

// merge turns the batch into the pipeline's calls, in the batch's order:
// a mergeable call joins the last call of the same function on the same
// keys that was opened for merging and has room, so the requests of one
// queue keep their order. A batch holds at most groupMaxBatch calls, so
// looking back over them costs less than the key string and map it
// replaced (two allocations per call).
func merge(batch []*pending) []*mergedCall {
	calls := make([]*mergedCall, 0, len(batch))
	for _, p := range batch {
		if p.shared > 0 {
			if c := openCall(calls, p); c != nil && len(c.args)+len(p.args)-p.shared <= mergeMaxArgs {
				if len(c.members) == 1 {
					// Copy before appending: the first call's slice is its
					// caller's.
					c.args = append(make([]any, 0, 4*len(c.args)), c.args...)
				}
				c.args = append(c.args, p.args[p.shared:]...)
				c.members = append(c.members, p)
				continue
			}
		}
		calls = append(calls, &mergedCall{fn: p.fn, keys: p.keys, args: p.args, members: []*pending{p}, open: p.shared > 0})
	}
	return calls
}

// openCall is the last call opened for merging with p's function and keys.
func openCall(calls []*mergedCall, p *pending) *mergedCall {
	for i := len(calls) - 1; i >= 0; i-- {
		if c := calls[i]; c.open && c.fn == p.fn && slices.Equal(c.keys, p.keys) {
			return c
		}
	}
	return nil
}

// FunctionLoadReplace loads the library directly.
func (g *groupCommit) FunctionLoadReplace(ctx context.Context, code string) *goredis.StringCmd {
	return g.c.FunctionLoadReplace(ctx, code)
}

// Group commit sizes. groupSenders pipelines may be in flight per driver:
// enough that one slow call (a purge, a move's batch) does not hold up
// every other, few enough that calls arriving together share a round trip
// and their queue's script call (docs/benchmarks.md: at 32 connections two
// senders left Redis 8 % less CPU per request than four, at a lower p99).
// groupMaxBatch bounds one pipeline (its replies are buffered whole).
const (
	groupSenders  = 2
	groupMaxBatch = 64
)
