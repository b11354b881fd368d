// Command redisclient-bench measures what one Redis function call costs the
// client process through each transport the server could use, at a fixed
// number of concurrent callers: go-redis with one connection per call in
// flight, go-redis pipelines filled by a sender goroutine (how the server's
// group commit sends), and rueidis' automatic pipelining, as it comes and
// with a flush delay. Every call is an
// FCALL of a function that returns its argument's length, with a 1 KiB
// argument, so the figures are transport cost (encoding, system calls,
// hand-offs, reply parsing), not script work. docs/benchmarks.md has the
// command and the figures.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

const library = "#!lua name=transportbench\n" +
	"redis.register_function('transport_len', function(keys, args) return string.len(args[1]) end)"

// caller makes one call; each transport supplies one.
type caller func(ctx context.Context, key, arg string) error

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "redis-server address")
	transport := flag.String("transport", "rueidis", "go-redis | go-redis-pipeline | rueidis | rueidis-flush-delay")
	callers := flag.Int("callers", 32, "concurrent callers")
	seconds := flag.Float64("seconds", 5, "how long to call")
	size := flag.Int("size", 1024, "bytes of the call's argument")
	flag.Parse()

	ctx := context.Background()
	admin := goredis.NewClient(&goredis.Options{Addr: *addr})
	if err := admin.FunctionLoadReplace(ctx, library).Err(); err != nil {
		log.Fatalf("function load: %v", err)
	}
	call, closeFn := open(*transport, *addr, *callers)
	defer closeFn()
	arg := strings.Repeat("x", *size)
	// Warm-up: connections dialled, buffers grown.
	run(ctx, call, *callers, arg, 300*time.Millisecond)

	cpu0, io0 := cpuSeconds(), syscalls()
	n, errs := run(ctx, call, *callers, arg, time.Duration(*seconds*float64(time.Second)))
	cpu1, io1 := cpuSeconds(), syscalls()
	out := map[string]any{
		"transport": *transport, "callers": *callers, "calls": n, "errors": errs,
		"calls_per_s":     float64(n) / *seconds,
		"client_cpu_us":   (cpu1 - cpu0) * 1e6 / float64(max(n, 1)),
		"client_syscalls": float64(io1-io0) / float64(max(n, 1)),
	}
	enc, _ := json.Marshal(out)
	fmt.Println(string(enc))
}

// open builds the transport's caller.
func open(transport, addr string, callers int) (caller, func()) {
	switch transport {
	case "go-redis":
		c := goredis.NewClient(&goredis.Options{Addr: addr, PoolSize: callers})
		return func(ctx context.Context, key, arg string) error {
			return c.FCall(ctx, "transport_len", []string{key}, arg).Err()
		}, func() { c.Close() }
	case "go-redis-pipeline":
		return pipelined(goredis.NewClient(&goredis.Options{Addr: addr}))
	case "rueidis", "rueidis-flush-delay":
		opt := rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true}
		if transport == "rueidis-flush-delay" {
			// rueidis' documented trade: its writer waits this long for more
			// commands before a flush, fewer system calls for some latency.
			opt.MaxFlushDelay = 20 * time.Microsecond
		}
		c, err := rueidis.NewClient(opt)
		if err != nil {
			log.Fatalf("rueidis: %v", err)
		}
		return func(ctx context.Context, key, arg string) error {
			return c.Do(ctx, c.B().Fcall().Function("transport_len").Numkeys(1).Key(key).Arg(arg).Build()).Error()
		}, c.Close
	}
	log.Fatalf("unknown transport %q", transport)
	return nil, nil
}

type request struct {
	key, arg string
	err      error
	done     chan struct{}
}

// pipelined sends the calls queued while the last pipeline was out as the
// next one, from one sender goroutine.
func pipelined(c *goredis.Client) (caller, func()) {
	queue := make(chan *request, 4096)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		for first := range queue {
			batch := []*request{first}
			for more := true; more && len(batch) < 256; {
				select {
				case r, ok := <-queue:
					if !ok {
						more = false
						break
					}
					batch = append(batch, r)
				default:
					more = false
				}
			}
			pipe := c.Pipeline()
			cmds := make([]*goredis.Cmd, len(batch))
			for i, r := range batch {
				cmds[i] = pipe.FCall(ctx, "transport_len", []string{r.key}, r.arg)
			}
			_, _ = pipe.Exec(ctx)
			for i, r := range batch {
				r.err = cmds[i].Err()
				close(r.done)
			}
		}
	}()
	return func(ctx context.Context, key, arg string) error {
			r := &request{key: key, arg: arg, done: make(chan struct{})}
			queue <- r
			<-r.done
			return r.err
		}, func() {
			close(queue)
			wg.Wait()
			c.Close()
		}
}

// run keeps callers goroutines calling for d; it returns the calls made and
// the calls that failed.
func run(ctx context.Context, call caller, callers int, arg string, d time.Duration) (int64, int64) {
	var n, errs atomic.Int64
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "transportbench:" + strconv.Itoa(i)
			for time.Now().Before(end) {
				if err := call(ctx, key, arg); err != nil {
					errs.Add(1)
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	return n.Load(), errs.Load()
}

// cpuSeconds is this process' user+system CPU so far.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// syscalls is this process' read plus write system calls so far.
func syscalls() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	var total int64
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok && (k == "syscr" || k == "syscw") {
			n, _ := strconv.ParseInt(v, 10, 64)
			total += n
		}
	}
	return total
}
