package app

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"sluice.dev/server/internal/storage"
)

func TestOpenWithRetryWaitsForALateDependency(t *testing.T) {
	calls := 0
	err := openWithRetry(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "open store", 10*time.Second,
		func(context.Context) error {
			calls++
			if calls < 3 {
				return errors.New("connection refused")
			}
			return nil
		})
	if err != nil || calls != 3 {
		t.Fatalf("err=%v after %d calls, want success on the third", err, calls)
	}
}

func TestOpenWithRetryGivesUpWithTheLastError(t *testing.T) {
	calls := 0
	err := openWithRetry(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "open catalog", time.Second,
		func(context.Context) error {
			calls++
			return errors.New("connection refused")
		})
	if err == nil || !strings.Contains(err.Error(), "open catalog (gave up after") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("err=%v, want the give-up message with the cause", err)
	}
	if calls < 2 {
		t.Fatalf("%d calls within a 1s budget, want retries", calls)
	}
}

func TestOpenWithRetryStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := openWithRetry(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "open store", time.Minute,
		func(ctx context.Context) error { return ctx.Err() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err=%v, want context.Canceled", err)
	}
}

// TestOpenWithRetryDoesNotRetryInvalid: a bad URI fails at once, with its
// reason, instead of after the whole start-up budget.
func TestOpenWithRetryDoesNotRetryInvalid(t *testing.T) {
	calls := 0
	err := openWithRetry(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "open store", time.Minute,
		func(context.Context) error {
			calls++
			return storage.E("storage.open", storage.Invalid, `no storage driver for scheme "nosuch"`)
		})
	if calls != 1 || !storage.Is(err, storage.Invalid) || !strings.Contains(err.Error(), "open store") {
		t.Fatalf("err=%v after %d calls, want the Invalid error after one", err, calls)
	}
}
