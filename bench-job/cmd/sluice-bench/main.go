// Command sluice-bench is a load generator for Zaqar v2 endpoints
// (sluice-server or Zaqar itself): zaqar-bench compatible, with mergeable
// latency histograms, time series, an open-loop mode, delivery
// verification, presets for the seed scenarios, thresholds and reports.
//
//	sluice-bench -s URL [zaqar-bench flags]            zaqar-bench's JSON
//	sluice-bench run --scenario NAME -s URL [--json]   full summary
//	sluice-bench report RUN_DIR                        PNG plots + HTML
//	sluice-bench compare A B                           side-by-side table
//	sluice-bench merge [--out DIR] INPUT...            exact merge of pods
//	sluice-bench merge --status [thresholds] INPUT...  a Benchmark's status.results and verdict
//	sluice-bench compare --status < INPUT.json         a Benchmark's status.comparison
//	sluice-bench scenarios                             list presets
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes: 2 for usage errors, 99 when a threshold is missed (as k6).
const (
	exitOK        = 0
	exitFailure   = 1
	exitUsage     = 2
	exitThreshold = 99
)

// usageError marks errors that should print usage and exit 2.
type usageError struct{ error }

func main() { os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr)) }

// stdin feeds `compare --status`; tests replace it.
var stdin io.Reader = os.Stdin

func realMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return exitUsage
	}
	var err error
	code := exitOK
	switch args[0] {
	case "run":
		code, err = cmdRun(args[1:], stdout, stderr, false)
	case "report":
		err = cmdReport(args[1:], stdout, stderr)
	case "compare":
		err = cmdCompare(args[1:], stdin, stdout, stderr)
	case "merge":
		code, err = cmdMerge(args[1:], stdout, stderr)
	case "scenarios":
		err = cmdScenarios(stdout)
	case "fault":
		err = cmdFault(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, topUsage)
		return exitOK
	default:
		if strings.HasPrefix(args[0], "-") {
			code, err = cmdRun(args, stdout, stderr, true)
		} else {
			err = usageError{fmt.Errorf("unknown command %q", args[0])}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "sluice-bench:", err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFailure
	}
	return code
}

const topUsage = `usage:
  sluice-bench -s URL [zaqar-bench flags: -pp -pw -cp -cw -op -ow -t -m -q -qno -cno -lno]
  sluice-bench run --scenario NAME -s URL [-t SECONDS] [--json] [--out DIR] [--termination-log PATH]
  sluice-bench report RUN_DIR
  sluice-bench compare A B
  sluice-bench compare --status < {"benchmark": NAME, "results": {...}, "other": BENCHMARK}
  sluice-bench merge [--out DIR] [--json] INPUT...
  sluice-bench merge --status [--own-queues] [--min-rps X] [--max-p99 MS] [--max-lost N] INPUT...
  sluice-bench scenarios
  sluice-bench fault partition|delay|fill --port PORT --duration D [...]   (inside a Redis shard's pod)
run 'sluice-bench run -h' for every flag; docs/sluice-bench.md has the details.
`
