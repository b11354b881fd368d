package redis

import (
	"context"
	"fmt"
	"log/slog"

	goredis "github.com/redis/go-redis/v9"
)

// SetLogger routes go-redis' own messages (failed dials while Redis is down,
// Sentinel master switches) to l at warn level, so they appear in the
// server's structured log instead of as plain lines on stderr. It affects
// every go-redis client in the process; call it once at start.
func SetLogger(l *slog.Logger) { goredis.SetLogger(slogAdapter{l}) }

type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Printf(ctx context.Context, format string, v ...any) {
	a.l.WarnContext(ctx, fmt.Sprintf(format, v...), "component", "go-redis")
}
