// Command sluice-server serves the OpenStack Zaqar v2 messaging API over a
// storage driver chosen by URI (memory, redis://..., mongodb://...):
// flags -> config.Validate -> app.Run.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"sluice.dev/server/internal/app"
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/logging"
	"sluice.dev/server/internal/profiling"
)

func main() { os.Exit(run()) }

// gcPercent is the server's GOGC unless the environment sets one. A
// request's garbage is a few KB that die with it, and the live heap is a
// few MB, so collecting at three times the live heap instead of twice
// saves about 6 % of the instructions a small POST or claim costs, for
// about 5 MB more RSS under load (docs/benchmarks.md, "Instructions per
// request").
const gcPercent = 200

func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}

func run() int {
	loaded, err := config.Load(os.Args[1:], os.Getenv, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice-server:", err)
		return 2
	}
	opts := loaded.Options
	if err := opts.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "sluice-server: invalid configuration:\n"+err.Error())
		return 2
	}
	if loaded.CheckConfig {
		config.Dump(&opts, os.Stdout)
		fmt.Fprintln(os.Stdout, "configuration OK")
		return 0
	}
	log, closer := logging.New(os.Stderr, opts.LogLevel)
	defer closer.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if opts.PprofAddr != "" {
		wait, err := profiling.Serve(ctx, opts.PprofAddr, log)
		if err != nil {
			log.Error("pprof-addr", "error", err.Error())
			return 1
		}
		// Deferred after stop, so it runs first: end the context, then wait.
		defer func() { stop(); wait() }()
	}
	if err := app.Run(ctx, opts, log, nil); err != nil {
		log.Error("sluice-server stopped", "error", err.Error())
		return 1
	}
	return 0
}
