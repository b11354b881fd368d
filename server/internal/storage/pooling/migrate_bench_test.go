package pooling_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/catalog"
	"sluice.dev/server/internal/storage/pooling"
)

// BenchmarkMigrate moves a queue of 20 000 messages of 1 KiB between two
// redis-servers while two producers post and two consumers claim and
// delete on it: first with the server's default batch and rate cap
// ("defaults"), then uncapped at batch sizes from 10 to 1000 (a rate from
// SLUICE_MIGRATE_RATE caps these too). Reported: messages moved per second
// (from the seal to the end of the last batch), and the clients' p99 per
// call before the move (the same load, no move) and during it.
func BenchmarkMigrate(b *testing.B) {
	const backlog = 20000
	ctx := context.Background()
	kib := json.RawMessage(`"` + strings.Repeat("x", 1022) + `"`)
	def := config.Defaults()
	type setting struct {
		name        string
		batch, rate int
	}
	settings := []setting{{fmt.Sprintf("defaults(batch=%d,rate=%d)", def.MigrateBatch, def.MigrateRate), def.MigrateBatch, def.MigrateRate}}
	capped := benchMoveRate(b) // SLUICE_MIGRATE_RATE, or no cap
	for _, batch := range []int{10, 20, 50, 100, 200, 500, 1000} {
		settings = append(settings, setting{fmt.Sprintf("batch=%d", batch), batch, capped})
	}
	for _, set := range settings {
		batch, rate := set.batch, set.rate
		b.Run(set.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				catalogURI, _ := movePools(b, "redis", "redis")
				// A quiet logger: the mover's log line would split the
				// benchmark's result line.
				fallback, err := storage.Open(ctx, "memory", storage.Options{})
				if err != nil {
					b.Fatal(err)
				}
				d := pooling.New(openCatalog(b, catalogURI), fallback, storage.Options{}, slog.New(slog.DiscardHandler), nil)
				mover := d.StartMover(pooling.MoverOptions{Batch: batch, Rate: rate})
				q := storage.QueueRef{Project: "bench", Name: fmt.Sprintf("move-%d", i)}
				msgs := make([]storage.NewMessage, 100)
				for j := range msgs {
					msgs[j] = storage.NewMessage{TTL: time.Hour, Body: kib}
				}
				for j := 0; j < backlog/len(msgs); j++ {
					if _, err := d.Messages().Post(ctx, q, "loader", msgs); err != nil {
						b.Fatal(err)
					}
				}
				load := startLoad(d, q, kib)
				time.Sleep(2 * time.Second)
				before := load.cut()
				b.StartTimer()
				if _, err := mover.Migrate(ctx, q, "dst"); err != nil {
					b.Fatal(err)
				}
				var began, ended time.Time
				st := d.Catalog().Store()
				for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
					m, err := st.GetMigration(ctx, q)
					if err != nil {
						b.Fatal(err)
					}
					if began.IsZero() && m.State != catalog.StateSealing {
						began = time.Now()
					}
					if m.State == catalog.StateDone || m.State == catalog.StateFailed {
						ended = time.Now()
						b.StopTimer()
						during := load.cut()
						load.stop()
						if m.State == catalog.StateFailed {
							b.Fatalf("move failed: %s", m.Error)
						}
						secs := ended.Sub(began).Seconds()
						b.ReportMetric(float64(m.Moved)/secs, "moved/s")
						b.ReportMetric(float64(m.Moved), "moved")
						b.ReportMetric(before.p99().Seconds()*1000, "p99-before-ms")
						b.ReportMetric(during.p99().Seconds()*1000, "p99-during-ms")
						b.ReportMetric(float64(during.errs), "client-errors")
						if during.errs > 0 {
							b.Logf("client errors during the move, first ones: %q", load.seen)
						}
						break
					}
				}
				if ended.IsZero() {
					b.Fatal("the move did not end within 2 minutes")
				}
				d.Close()
				fallback.Close()
			}
		})
	}
}

// load is a closed loop of two producers and two consumers on one queue,
// recording each call's latency.
type load struct {
	mu   sync.Mutex
	lat  []time.Duration
	errs int
	seen []string // the first errors, for the log
	done chan struct{}
	wg   sync.WaitGroup
}

type window struct {
	lat  []time.Duration
	errs int
}

func (w window) p99() time.Duration {
	if len(w.lat) == 0 {
		return 0
	}
	sort.Slice(w.lat, func(i, j int) bool { return w.lat[i] < w.lat[j] })
	return w.lat[len(w.lat)*99/100]
}

func startLoad(d *pooling.Driver, q storage.QueueRef, body json.RawMessage) *load {
	ctx := context.Background()
	l := &load{done: make(chan struct{})}
	timed := func(fn func() error) {
		t0 := time.Now()
		err := fn()
		l.mu.Lock()
		l.lat = append(l.lat, time.Since(t0))
		if err != nil {
			l.errs++
			if len(l.seen) < 3 {
				l.seen = append(l.seen, err.Error())
			}
		}
		l.mu.Unlock()
	}
	for w := 0; w < 4; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; i < 200000; i++ { // bounded; stop ends it sooner
				select {
				case <-l.done:
					return
				default:
				}
				if w < 2 {
					timed(func() error {
						_, err := d.Messages().Post(ctx, q, "producer", []storage.NewMessage{{TTL: time.Hour, Body: body}})
						return err
					})
					continue
				}
				var c storage.Claim
				timed(func() (err error) {
					c, err = d.Claims().Create(ctx, q, storage.ClaimOptions{TTL: time.Minute, Grace: time.Minute, Limit: 5})
					return err
				})
				for _, m := range c.Messages {
					timed(func() error { return d.Messages().Delete(ctx, q, m.ID, c.ID) })
				}
			}
		}()
	}
	return l
}

// cut returns the latencies since the last cut.
func (l *load) cut() window {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := window{lat: l.lat, errs: l.errs}
	l.lat, l.errs = nil, 0
	return w
}

func (l *load) stop() {
	close(l.done)
	l.wg.Wait()
}

// benchMoveRate is the move's rate cap: SLUICE_MIGRATE_RATE messages per
// second when set (to see what a cap buys the clients' p99), none otherwise.
func benchMoveRate(b *testing.B) int {
	v := os.Getenv("SLUICE_MIGRATE_RATE")
	if v == "" {
		return -1
	}
	rate, err := strconv.Atoi(v)
	if err != nil || rate <= 0 {
		b.Fatalf("SLUICE_MIGRATE_RATE=%q: want a positive number of messages per second", v)
	}
	return rate
}
