package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"golang.org/x/term"

	"sluice.dev/bench/internal/load"
	"sluice.dev/bench/internal/report"
	"sluice.dev/bench/internal/result"
)

// cmdRun is both `sluice-bench run` and the zaqar-bench compatible mode
// (compat=true: scenario "custom", zaqar-bench's JSON on stdout).
func cmdRun(args []string, stdout, stderr io.Writer, compat bool) (int, error) {
	f := newRunFlags("sluice-bench run")
	f.fs.SetOutput(stderr)
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK, nil
		}
		return exitUsage, usageError{err}
	}
	if f.fs.NArg() > 0 {
		return exitUsage, usageError{fmt.Errorf("unexpected argument %q", f.fs.Arg(0))}
	}
	cfg, verdict, err := f.config()
	if err != nil {
		return exitUsage, usageError{err}
	}
	if f.check {
		return exitOK, nil
	}
	if f.progress == "always" || f.progress == "auto" && isTerminal(os.Stderr) {
		cfg.Progress = stderr
	}
	cfg.ErrorLog = stderr
	if f.samples != "" {
		sf, err := os.Create(f.samples)
		if err != nil {
			return exitFailure, err
		}
		defer sf.Close()
		cfg.Samples = sf
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := load.Run(ctx, cfg)
	if err != nil {
		if f.termLog != "" {
			// Not a summary: the operator shows this text as the
			// reason the run's pod failed.
			_ = os.WriteFile(f.termLog, []byte("sluice-bench: "+err.Error()), 0o644)
		}
		return exitFailure, err
	}
	if verdict.Any() || res.Move != nil {
		verdict.Check(res)
	}
	if err := writeOutputs(res, f.out, f.termLog); err != nil {
		return exitFailure, err
	}
	if err := writeReceiverFaults(f.out, res, cfg.Notify.Faults); err != nil {
		return exitFailure, err
	}
	switch {
	case f.debug:
		writeZaqarText(stdout, res)
	case f.jsonOut:
		err = writeSummary(stdout, res, f.series)
	case compat:
		var b []byte
		if b, err = res.ZaqarJSON(); err == nil {
			_, err = fmt.Fprintln(stdout, string(b))
		}
	default:
		writeTable(stdout, res)
		writeReceiverFaultCounts(stdout, res, cfg.Notify.Faults)
	}
	if err != nil {
		return exitFailure, err
	}
	if res.Verdict != nil && !res.Verdict.Pass {
		for _, m := range res.Verdict.Failures {
			fmt.Fprintln(stderr, "sluice-bench: threshold missed:", m)
		}
		return exitThreshold, nil
	}
	return exitOK, nil
}

// config turns flags into a run configuration: the preset first, then
// every flag given explicitly on top of it.
func (f *runFlags) config() (*load.Config, *result.Verdict, error) {
	preset, err := load.LookupPreset(f.scenario)
	if err != nil {
		return nil, nil, err
	}
	if f.apiVersion != 2 {
		return nil, nil, fmt.Errorf("unknown Zaqar API version %v (only 2)", f.apiVersion)
	}
	set := f.set()
	p := preset.Params
	over := func(name string, dst *int, v int) {
		if set[name] {
			*dst = v
		}
	}
	over("pp", &p.Producer.Processes, f.pp)
	over("pw", &p.Producer.Workers, f.pw)
	over("cp", &p.Consumer.Processes, f.cp)
	over("cw", &p.Consumer.Workers, f.cw)
	over("op", &p.Observer.Processes, f.op)
	over("ow", &p.Observer.Workers, f.ow)
	over("t", &p.Time, f.t)
	over("cno", &p.MessagesPerClaim, f.cno)
	over("lno", &p.MessagesPerList, f.lno)
	over("qno", &p.NumQueues, f.qno)
	over("message-size", &p.MessageSize, f.msgSize)
	over("large-message-size", &p.LargeSize, f.largeSize)
	over("claim-ttl", &p.ClaimTTL, f.claimTTL)
	over("claim-grace", &p.ClaimGrace, f.claimGrace)
	if set["q"] {
		p.QueuePrefix = f.prefix
	}
	if f.podIndex >= 0 {
		p.QueuePrefix += "-p" + strconv.Itoa(f.podIndex)
	}
	if set["rate"] {
		p.Rate = f.rate
	}
	if set["requests"] {
		p.Requests = f.requests
	}
	if set["path"] {
		p.Path = f.path
	}
	if set["sweep"] {
		if p.Sweep, err = parseInts(f.sweep); err != nil {
			return nil, nil, err
		}
	}
	cfg := &load.Config{Scenario: preset.Name, Kind: preset.Kind, Params: p, Target: f.server,
		ProjectID: f.projectID, Token: f.token, TokenFile: f.tokenFile, ClientID: f.clientID, Timeout: f.timeout,
		Verify: preset.Verify, SkipReset: f.skipReset, Drain: f.drain,
		Notify: load.Notify{Listen: f.recvListen, URL: f.recvURL, Secret: f.recvSecret, Subscribe: f.subscribe, Faults: f.recvFaults},
		Move: load.Move{Pool: f.moveTo, After: f.moveAfter, Timeout: f.moveTimeout, Poll: f.movePoll,
			AdminToken: os.Getenv(load.AdminTokenEnv)}}
	if f.token != "" && f.tokenFile != "" {
		return nil, nil, fmt.Errorf("--token and --token-file: give one, not both")
	}
	if (f.token != "" || f.tokenFile != "") && !set["project-id"] {
		cfg.ProjectID = "" // with a token the server takes the project from it
	}
	if f.verify {
		cfg.Verify = true
	}
	if f.noVerify || preset.Kind == load.KindNotify && !f.subscribe {
		cfg.Verify = false
	}
	switch {
	case f.msgs != "":
		if cfg.Docs, err = load.LoadDocs(f.msgs); err != nil {
			return nil, nil, err
		}
	case p.MessageSize > 0:
		cfg.Docs = load.SizedDoc(p.MessageSize)
	}
	if f.startAt != "" {
		if cfg.StartAt, err = parseStartAt(f.startAt); err != nil {
			return nil, nil, fmt.Errorf("--start-at: %w", err)
		}
	}
	if f.progress != "auto" && f.progress != "always" && f.progress != "never" {
		return nil, nil, fmt.Errorf("--progress must be auto, always or never")
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	if err := checkReceiverFaults(cfg); err != nil {
		return nil, nil, err
	}
	v := &result.Verdict{MinRPS: f.minRPS, MaxP99: f.maxP99}
	if f.maxLost >= 0 {
		v.MaxLost = &f.maxLost
	}
	return cfg, v, nil
}

// checkReceiverFaults refuses --receiver-fault where there is no receiver.
func checkReceiverFaults(cfg *load.Config) error {
	if len(cfg.Notify.Faults) == 0 {
		return nil
	}
	if cfg.Kind != load.KindNotify {
		return fmt.Errorf("--receiver-fault: only the notifications scenario runs a webhook receiver (scenario %s)", cfg.Scenario)
	}
	if !cfg.Notify.Subscribe {
		return fmt.Errorf("--receiver-fault: with --subscribe=false there is no receiver to misbehave")
	}
	if err := load.ValidateReceiverFaults(cfg.Notify.Faults); err != nil {
		return fmt.Errorf("--receiver-fault: %w", err)
	}
	return nil
}

// receiverFaultsFile, in the run directory, lists the receiver faults at
// their times in the form `report --faults` and `merge --faults` read.
const receiverFaultsFile = "receiver-faults.json"

func writeReceiverFaults(out string, res *result.Result, faults []load.ReceiverFault) error {
	if out == "" || len(faults) == 0 {
		return nil
	}
	b, err := json.MarshalIndent(load.ReceiverFaultMarks(res.Start, faults), "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, receiverFaultsFile), append(b, '\n'), 0o644)
}

// writeReceiverFaultCounts adds the receiver faults' counters
// (ops.notify.extra) to the table.
func writeReceiverFaultCounts(w io.Writer, res *result.Result, faults []load.ReceiverFault) {
	n := res.Ops["notify"]
	if len(faults) == 0 || n == nil {
		return
	}
	x := n.Extra
	fmt.Fprintf(w, "receiver faults: %d calls in fault windows, %d delayed, %d answered 500, %d abandoned (neither counted as delivered)\n",
		x[load.FaultCalls], x[load.FaultDelayed], x[load.FaultFailed], x[load.FaultAbandoned])
	for i, m := range load.ReceiverFaultMarks(res.Start, faults) {
		fmt.Fprintf(w, "  %s at_unix_ms %d: %s\n", m.Name, m.At, faults[i])
	}
}

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// writeOutputs writes the run directory and the termination log, if asked.
func writeOutputs(res *result.Result, out, termLog string) error {
	if out != "" {
		if err := report.WriteRunDir(out, res); err != nil {
			return err
		}
	}
	if termLog != "" {
		b, err := res.TermLog()
		if err != nil {
			return err
		}
		if err := os.WriteFile(termLog, b, 0o644); err != nil {
			return fmt.Errorf("termination log: %w", err)
		}
	}
	return nil
}
