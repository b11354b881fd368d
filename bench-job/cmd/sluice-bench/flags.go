package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"sluice.dev/bench/internal/load"
)

// runFlags holds every flag of the run (and zaqar-bench compatible) mode.
type runFlags struct {
	fs *flag.FlagSet

	pp, pw, cp, cw, op, ow int
	t, cno, lno, qno       int
	server, prefix, msgs   string
	debug, nodebug         bool
	skipReset              bool
	apiVersion             float64

	scenario, out, termLog, samples string
	startAt                         string
	jsonOut, verify, noVerify       bool
	series                          bool
	rate                            float64
	minRPS, maxP99                  float64
	maxLost                         int64
	clientID, projectID, token      string
	tokenFile                       string
	timeout, drain                  time.Duration
	claimTTL, claimGrace            int
	msgSize, largeSize              int
	requests                        int64
	sweep, path                     string
	podIndex                        int
	progress                        string
	recvListen, recvURL, recvSecret string
	subscribe                       bool
	recvFaults                      receiverFaults
	moveTo                          string
	moveAfter, moveTimeout          time.Duration
	movePoll                        time.Duration
	check                           bool
}

// alias registers one int flag under several names (oslo.config accepts
// the short form and the long option with underscores or dashes).
func intFlag(fs *flag.FlagSet, p *int, def int, usage string, names ...string) {
	fs.IntVar(p, names[0], def, usage)
	for _, n := range names[1:] {
		fs.IntVar(p, n, def, "alias of -"+names[0])
	}
}

func strFlag(fs *flag.FlagSet, p *string, def, usage string, names ...string) {
	fs.StringVar(p, names[0], def, usage)
	for _, n := range names[1:] {
		fs.StringVar(p, n, def, "alias of -"+names[0])
	}
}

func newRunFlags(name string) *runFlags {
	f := &runFlags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	fs := f.fs
	// zaqar-bench's own options, same names and defaults.
	intFlag(fs, &f.pp, 1, "producer processes", "pp", "producer_processes", "producer-processes")
	intFlag(fs, &f.pw, 10, "producer workers per process", "pw", "producer_workers", "producer-workers")
	intFlag(fs, &f.cp, 1, "consumer processes", "cp", "consumer_processes", "consumer-processes")
	intFlag(fs, &f.cw, 0, "consumer workers per process", "cw", "consumer_workers", "consumer-workers")
	intFlag(fs, &f.op, 1, "observer processes", "op", "observer_processes", "observer-processes")
	intFlag(fs, &f.ow, 5, "observer workers per process", "ow", "observer_workers", "observer-workers")
	intFlag(fs, &f.t, 5, "duration of the test in seconds (per step for sweeps)", "t", "time")
	intFlag(fs, &f.cno, 5, "messages per claim", "cno", "messages_per_claim", "messages-per-claim")
	intFlag(fs, &f.lno, 5, "messages per list", "lno", "messages_per_list", "messages-per-list")
	intFlag(fs, &f.qno, 4, "number of queues", "qno", "num_queues", "num-queues")
	strFlag(fs, &f.server, "http://localhost:8888", "Zaqar v2 endpoint", "s", "server_url", "server-url")
	strFlag(fs, &f.prefix, "ogre-test-queue", "queue name prefix", "q", "queue_prefix", "queue-prefix")
	strFlag(fs, &f.msgs, "", "zaqar-bench message file: JSON list of {weight, doc}", "m", "messages_path", "messages-path")
	fs.BoolVar(&f.debug, "debug", false, "print zaqar-bench's text report instead of JSON")
	fs.BoolVar(&f.nodebug, "nodebug", false, "print JSON (the default; accepted for zaqar-bench scripts)")
	fs.BoolVar(&f.skipReset, "skip_queue_reset", false, "do not delete the queues before running")
	fs.BoolVar(&f.skipReset, "skip-queue-reset", false, "alias of -skip_queue_reset")
	fs.Float64Var(&f.apiVersion, "api", 2, "Zaqar API version (only 2)")
	fs.Float64Var(&f.apiVersion, "api_version", 2, "alias of -api")

	// sluice-bench's additions.
	fs.StringVar(&f.scenario, "scenario", "custom", "preset name (sluice-bench scenarios)")
	fs.BoolVar(&f.jsonOut, "json", false, "print the full JSON summary")
	fs.BoolVar(&f.series, "series", false, "with --json: include the per-second series (what `merge` needs for merged time plots)")
	fs.StringVar(&f.out, "out", "", "write summary.json and per-second CSV series into this run directory")
	fs.StringVar(&f.termLog, "termination-log", "", "write a <= 4 KB mergeable summary here (e.g. /dev/termination-log)")
	fs.StringVar(&f.samples, "samples", "", "write every request as CSV (op,start_unix_ns,latency_us,status)")
	fs.StringVar(&f.startAt, "start-at", "", "wall-clock instant to start the load (RFC 3339 or unix seconds), to start pods together")
	fs.Float64Var(&f.rate, "rate", 0, "open loop: producer (or baseline) requests per second in total; 0 = closed loop")
	fs.Float64Var(&f.minRPS, "min-rps", 0, "threshold: minimum successful requests per second (all operations)")
	fs.Float64Var(&f.maxP99, "max-p99", 0, "threshold: maximum p99 latency in ms (worst operation)")
	fs.Int64Var(&f.maxLost, "max-lost", -1, "threshold: maximum lost messages (-1 = no threshold)")
	fs.StringVar(&f.clientID, "client-id", "", "Client-ID for every request (default: a random UUID per process)")
	fs.StringVar(&f.projectID, "project-id", "my-lovely-benchmark", "X-Project-ID (zaqar-bench's noauth project; not sent with --token unless given)")
	fs.StringVar(&f.token, "token", "", "auth token, sent as X-Auth-Token and Authorization: Bearer")
	fs.StringVar(&f.tokenFile, "token-file", "", "file holding the auth token (e.g. a projected ServiceAccount token), re-read every 30 s")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "per-request timeout (until response headers)")
	fs.DurationVar(&f.drain, "drain", 30*time.Second, "how long consumers may drain the queues after the run (delivery check)")
	fs.IntVar(&f.claimTTL, "claim-ttl", 300, "claim ttl in seconds (a claim whose answer was lost comes back after it: runs with faults want it short)")
	fs.IntVar(&f.claimGrace, "claim-grace", 200, "claim grace in seconds")
	fs.IntVar(&f.msgSize, "message-size", 0, "message body size in bytes (instead of -m)")
	fs.IntVar(&f.largeSize, "large-message-size", 0, "fairness: size of the large messages")
	fs.Int64Var(&f.requests, "requests", 0, "stop producers after this many requests in total (0 = time only)")
	fs.StringVar(&f.sweep, "sweep", "", "flood: connection counts; packing: backlog sizes (comma separated)")
	fs.StringVar(&f.path, "path", "", "http-baseline: path to GET")
	fs.BoolVar(&f.verify, "verify", false, "tag messages and report produced/consumed/lost/duplicated")
	fs.BoolVar(&f.noVerify, "no-verify", false, "turn off delivery verification")
	fs.IntVar(&f.podIndex, "pod-index", -1, "suffix the queue prefix with -pN so parallel pods use their own queues")
	fs.StringVar(&f.progress, "progress", "auto", "live progress line: auto (only on a terminal), always, never")
	fs.StringVar(&f.recvListen, "receiver-listen", "127.0.0.1:0", "notifications: address of the built-in webhook receiver")
	fs.StringVar(&f.recvURL, "receiver-url", "", "notifications: URL the server posts to (default http://<receiver address>/notify)")
	fs.StringVar(&f.recvSecret, "receiver-secret", "", "notifications: subscribe with this signing secret and check X-Sluice-Signature")
	fs.BoolVar(&f.subscribe, "subscribe", true, "notifications: subscribe the receiver (false: post only, the throughput baseline)")
	fs.Var(&f.recvFaults, "receiver-fault", "notifications, repeatable: "+load.ReceiverFaultSyntax+
		": from SECONDS after the load starts, the receiver waits latency (<= 30s) before answering and answers 500 to PERCENT of the calls; refused calls must be redelivered")
	fs.StringVar(&f.moveTo, "move-to-pool", "", "move the run's queues to this pool during the load (admin token in $SLUICE_BENCH_ADMIN_TOKEN)")
	fs.DurationVar(&f.moveAfter, "move-after", 2*time.Second, "with --move-to-pool: start the move this long into the load")
	fs.DurationVar(&f.moveTimeout, "move-timeout", 60*time.Second, "with --move-to-pool: a move not done this long after it started fails the run")
	fs.DurationVar(&f.movePoll, "move-poll", 100*time.Millisecond, "with --move-to-pool: interval between GET .../migrate")
	fs.BoolVar(&f.check, "check", false, "only check the command line (what a run would refuse as a usage error) and exit 0, without contacting the server")
	return f
}

// receiverFaults is the repeatable --receiver-fault.
type receiverFaults []load.ReceiverFault

func (r *receiverFaults) String() string {
	if r == nil {
		return ""
	}
	var parts []string
	for _, f := range *r {
		parts = append(parts, f.String())
	}
	return strings.Join(parts, " ")
}

func (r *receiverFaults) Set(s string) error {
	f, err := load.ParseReceiverFault(s)
	if err != nil {
		return err
	}
	*r = append(*r, f)
	return nil
}

// set reports which flags were given explicitly (any alias counts).
func (f *runFlags) set() map[string]bool {
	m := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) {
		name := fl.Name
		if strings.HasPrefix(fl.Usage, "alias of -") {
			name = strings.TrimPrefix(fl.Usage, "alias of -")
		}
		m[name] = true
	})
	return m
}

func parseInts(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(part), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q in list", part)
		}
		out = append(out, v)
	}
	return out, nil
}

func parseStartAt(s string) (time.Time, error) {
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Unix(0, int64(v*1e9)), nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
