package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"sluice.dev/bench/internal/fault"
)

// maxDelay bounds --delay: a longer one is a partition with extra steps.
const maxDelay = 30 * time.Second

const faultUsage = `usage:
  sluice-bench fault partition --port PORT --duration D
  sluice-bench fault delay --port PORT --delay D [--jitter D] [--proxy-port PORT] [--tls] --duration D
  sluice-bench fault fill --port PORT [--tls] --duration D
Run inside a Redis shard's pod (an ephemeral container: the pod's network
namespace, CAP_NET_ADMIN for partition and delay). REDIS_PASSWORD is the
shard's password for delay and fill. --duration is at most 1h; everything
is undone when it ends or on SIGTERM/SIGINT. 'sluice-bench fault KIND -h'
lists a kind's flags.
`

// cmdFault runs `sluice-bench fault KIND ...`.
func cmdFault(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usageError{errors.New("fault: which fault? partition, delay or fill\n" + faultUsage)}
	}
	kind := args[0]
	switch kind {
	case "partition", "delay", "fill":
	case "help", "-h", "--help":
		fmt.Fprint(stdout, faultUsage)
		return nil
	default:
		return usageError{fmt.Errorf("fault: unknown kind %q (partition, delay or fill)", kind)}
	}
	fs := flag.NewFlagSet("sluice-bench fault "+kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", 6379, "the shard's Redis port")
	duration := fs.Duration("duration", 0, "how long the fault lasts (required, at most 1h)")
	termLog := fs.String("termination-log", "/dev/termination-log", "where the one-line summary goes, if that file exists (Kubernetes creates it)")
	var delay, jitter *time.Duration
	var proxyPort *int
	var useTLS *bool
	if kind == "delay" {
		delay = fs.Duration("delay", 0, "how long each chunk is held, in each direction (required, at most 30s)")
		jitter = fs.Duration("jitter", 0, "uniform variation of the delay, at most --delay")
		proxyPort = fs.Int("proxy-port", 0, "the delaying proxy's port (default --port + 10000)")
	}
	if kind == "delay" || kind == "fill" {
		useTLS = fs.Bool("tls", false, "the shard serves TLS (its certificate is not verified: the connection stays on loopback inside the pod)")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Errorf("fault %s: %w", kind, err)}
	}
	bad := func(format string, a ...any) error {
		return usageError{fmt.Errorf("fault %s: "+format, append([]any{kind}, a...)...)}
	}
	if fs.NArg() != 0 {
		return bad("unexpected argument %q", fs.Arg(0))
	}
	if *port < 1 || *port > 65535 {
		return bad("--port %d is not a port (1..65535)", *port)
	}
	switch {
	case !flagGiven(fs, "duration"):
		return bad("--duration is required (e.g. --duration 20s)")
	case *duration <= 0:
		return bad("--duration %v must be > 0", *duration)
	case *duration > fault.MaxDuration:
		return bad("--duration %v is over the limit of %v", *duration, fault.MaxDuration)
	}
	redisConn := func() fault.Redis {
		return fault.Redis{Port: uint16(*port), Password: os.Getenv("REDIS_PASSWORD"), TLS: *useTLS}
	}
	var f fault.Fault
	switch kind {
	case "partition":
		f = &fault.Partition{Port: uint16(*port)}
	case "delay":
		switch {
		case !flagGiven(fs, "delay"):
			return bad("--delay is required (e.g. --delay 100ms)")
		case *delay <= 0 || *delay > maxDelay:
			return bad("--delay %v is not in (0, %v]", *delay, maxDelay)
		case *jitter < 0:
			return bad("--jitter %v must not be negative", *jitter)
		case *jitter > *delay:
			return bad("--jitter %v exceeds --delay %v (a chunk cannot be held for less than nothing)", *jitter, *delay)
		}
		pp := *proxyPort
		if !flagGiven(fs, "proxy-port") {
			pp = *port + 10000
			if pp > 65535 {
				return bad("--port %d + 10000 is not a port: give --proxy-port", *port)
			}
		}
		if pp < 1 || pp > 65535 {
			return bad("--proxy-port %d is not a port (1..65535)", pp)
		}
		if pp == *port {
			return bad("--proxy-port must differ from --port")
		}
		f = &fault.Delay{Port: uint16(*port), ProxyPort: uint16(pp), Delay: *delay, Jitter: *jitter, Redis: redisConn()}
	case "fill":
		f = &fault.Fill{Redis: redisConn()}
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	err := fault.Run(context.Background(), f, fault.Options{
		Duration: *duration, Signals: sigs, Stdout: stdout, TerminationLog: *termLog,
	})
	if err != nil {
		return fmt.Errorf("fault %s", strings.TrimSpace(err.Error()))
	}
	return nil
}

// flagGiven reports whether name was on the command line.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}
