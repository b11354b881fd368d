package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"sluice.dev/server/internal/storage"
)

// openWithRetry calls open until it succeeds or the start-up budget runs
// out. In Kubernetes the store and the catalog are often still starting
// when the server does; exiting would put the pod into CrashLoopBackOff,
// whose growing delays outlast the dependency by minutes. Each attempt gets
// its own short deadline so one hung dial does not eat the whole budget.
// An Invalid error (a URI no driver takes, an unknown option) is not retried:
// no wait can make it work, and the operator should see it at once.
func openWithRetry(ctx context.Context, log *slog.Logger, what string, budget time.Duration, open func(context.Context) error) error {
	deadline := time.Now().Add(budget)
	wait := 250 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, min(10*time.Second, max(time.Until(deadline), time.Millisecond)))
		err := open(actx)
		cancel()
		if err == nil {
			if attempt > 1 {
				log.Info("opened after retries", "what", what, "attempts", attempt)
			}
			return nil
		}
		if storage.Is(err, storage.Invalid) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return fmt.Errorf("%s (gave up after %d attempts in %s): %w", what, attempt, budget, err)
		}
		log.Warn("not reachable yet, retrying", "what", what, "attempt", attempt, "in", wait.String(), "error", err.Error())
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
