// Command ferretdb runs FerretDB (MongoDB wire protocol over SQLite) through
// its embeddable package, for the MongoDB driver's tests. Building FerretDB's
// own cmd/ferretdb from the module proxy panics at start: that command wants
// version files generated in a git checkout.
package main

import (
	"context"
	"flag"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/FerretDB/FerretDB/ferretdb"
)

func main() {
	listen := flag.String("listen-addr", "127.0.0.1:27017", "TCP address to listen on")
	sqlite := flag.String("sqlite-url", "file:data/", "SQLite URI of the data directory (ends with /)")
	level := flag.String("log-level", "warn", "debug, info, warn or error")
	flag.Parse()

	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		log.Fatalf("log level: %v", err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv}))
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{TCP: *listen},
		Logger:    logger,
		Handler:   "sqlite",
		SQLiteURL: *sqlite,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := f.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
