package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"sluice.dev/server/internal/api"
	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/instrument"
)

// enablePooling opens the catalog named by --catalog (retrying while it
// starts) and puts the pooled driver in front of the server's store: the
// configured store stays the default for queues that live there, and the
// admin API for pools and flavors is mounted. Without --catalog those
// routes do not exist (404), as in Zaqar with pooling disabled. Every
// pool's calls are timed on reg under the pool's name, as the default
// store's are under its scheme. It returns the routed driver.
func enablePooling(ctx context.Context, s *api.Server, opts config.Options, log *slog.Logger, reg prometheus.Registerer) (storage.Driver, error) {
	var cat *catalog.Catalog
	err := openWithRetry(ctx, log, "open catalog "+config.RedactURI(opts.Catalog), opts.StartTimeout,
		func(ctx context.Context) error {
			st, err := catalog.OpenStore(ctx, opts.Catalog)
			if err != nil {
				return err
			}
			if cat, err = catalog.New(ctx, st, catalog.Options{Logger: log}); err != nil {
				st.Close()
				return fmt.Errorf("load: %w", err)
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	timed := func(name string, d storage.Driver) (storage.Driver, error) { return instrument.Wrap(d, name, reg) }
	return s.EnablePooling(cat, timed), nil
}
