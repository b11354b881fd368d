package load

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"sluice.dev/bench/internal/result"
	"sluice.dev/bench/internal/zaqar"
)

// AdminTokenEnv holds the admin token the move calls send. It is read from
// the environment only (never a flag), so it appears neither in the
// process list nor in a Benchmark's recorded command line.
const AdminTokenEnv = "SLUICE_BENCH_ADMIN_TOKEN"

// Move asks the server, part-way through the load, to move every queue of
// the run to another pool (POST /v2/queues/{q}/migrate, admin only), and
// follows the moves to their end. Only these calls carry the admin token;
// the load keeps the run's own credentials.
type Move struct {
	Pool       string        // target pool; "" = no move
	After      time.Duration // from the start of the load
	Timeout    time.Duration // from the first POST until every queue is done
	Poll       time.Duration // between GET .../migrate
	AdminToken string
}

func (m *Move) validate(c *Config) error {
	if m.Pool == "" {
		return nil
	}
	switch {
	case c.Kind != KindZaqar && c.Kind != KindNotify:
		return fmt.Errorf("--move-to-pool: only scenarios with a timed load (not %s)", c.Kind)
	case m.AdminToken == "":
		return fmt.Errorf("--move-to-pool: the move is an admin call: put the server's admin token in $%s", AdminTokenEnv)
	case c.ProjectID == "":
		return fmt.Errorf("--move-to-pool: the admin call names the queues' project: give --project-id")
	case m.After < 0 || m.After >= time.Duration(c.Params.Time)*time.Second:
		return fmt.Errorf("--move-after (%v) must fall within the load (-t %d s)", m.After, c.Params.Time)
	case m.Timeout <= 0 || m.Poll <= 0:
		return fmt.Errorf("--move-timeout and --move-poll must be > 0")
	}
	return nil
}

// migration is GET /v2/queues/{q}/migrate's answer (what the run needs).
type migration struct {
	State string  `json:"state"`
	Moved int64   `json:"messages_moved"`
	Error *string `json:"error"`
}

// mover runs one Move against the run's queues.
type mover struct {
	m      Move
	cl     *zaqar.Client
	s      *zaqar.Session
	queues []queue
}

// startMove starts the move at start+After; the result arrives on the
// channel once every queue's move ended (or the run was cancelled before
// it started: "not_started").
func (r *run) startMove(ctx context.Context, start time.Time, loadEnd <-chan struct{}) (<-chan *result.Move, error) {
	m := r.cfg.Move
	cl, err := zaqar.New(zaqar.Options{BaseURL: r.cfg.Target, ProjectID: r.cfg.ProjectID, Token: m.AdminToken, Conns: 1, Timeout: r.cfg.Timeout, ErrorLog: r.cfg.ErrorLog})
	if err != nil {
		return nil, err
	}
	mv := &mover{m: m, cl: cl, s: cl.NewSession(NewUUID()), queues: r.queues}
	out := make(chan *result.Move, 1)
	go func() {
		defer cl.Close()
		res := &result.Move{Pool: m.Pool, Queues: len(r.queues), State: "not_started"}
		select {
		case <-time.After(time.Until(start.Add(m.After))):
			mv.run(ctx, res)
		case <-loadEnd:
		case <-ctx.Done():
		}
		out <- res
	}()
	return out, nil
}

// run posts every queue's move, then polls until all are done, one
// failed, or the timeout passed.
func (mv *mover) run(ctx context.Context, res *result.Move) {
	t0 := time.Now()
	res.Start = t0.UnixMilli()
	defer func() {
		res.End = time.Now().UnixMilli()
		res.Duration = float64(res.End-res.Start) / 1000
	}()
	body := []byte(fmt.Sprintf(`{"pool": %q}`, mv.m.Pool))
	for _, q := range mv.queues {
		st, err := mv.s.Do("POST", mv.url(q), body)
		if err != nil || st != 202 {
			res.State, res.Error = "failed", fmt.Sprintf("POST %s/migrate: %s", q.name, answer(st, err, mv.s))
			return
		}
	}
	deadline := t0.Add(mv.m.Timeout)
	moved := make([]int64, len(mv.queues))
	for pending := len(mv.queues); ; {
		pending = 0
		for i, q := range mv.queues {
			st, err := mv.s.Do("GET", mv.url(q), nil)
			var m migration
			if err != nil || st != 200 || json.Unmarshal(mv.s.Resp.Bytes(), &m) != nil {
				// A replica restarting or a slow catalog is not the move
				// failing: the timeout decides.
				res.Error = fmt.Sprintf("GET %s/migrate: %s", q.name, answer(st, err, mv.s))
				pending++
				continue
			}
			moved[i] = m.Moved
			switch m.State {
			case result.MoveDone:
			case "failed":
				res.State, res.Error = "failed", q.name+": "+deref(m.Error)
				res.Moved = sum(moved)
				return
			default:
				pending++
			}
		}
		res.Moved = sum(moved)
		if pending == 0 {
			res.State, res.Error = result.MoveDone, ""
			return
		}
		if time.Now().After(deadline) {
			res.State = "unfinished"
			res.Error = strings.TrimPrefix(fmt.Sprintf("%d of %d queues not done after %v; %s", pending, len(mv.queues), mv.m.Timeout, res.Error), "; ")
			return
		}
		select {
		case <-time.After(mv.m.Poll):
		case <-ctx.Done():
			res.State, res.Error = "unfinished", "run cancelled"
			return
		}
	}
}

func (mv *mover) url(q queue) *url.URL { return mv.cl.URL(zaqar.QueuePath(q.name)+"/migrate", "") }

// answer describes a failed call: the server's Zaqar description when it
// gave one, else the transport's reason.
func answer(st int, err error, s *zaqar.Session) string {
	if err != nil {
		return zaqar.Reason(st, err)
	}
	var b struct {
		Description string `json:"description"`
	}
	if json.Unmarshal(s.Resp.Bytes(), &b) == nil && b.Description != "" {
		return fmt.Sprintf("%d %s", st, b.Description)
	}
	return zaqar.Reason(st, nil)
}

func deref(s *string) string {
	if s == nil {
		return "no reason given"
	}
	return *s
}

func sum(v []int64) (n int64) {
	for _, x := range v {
		n += x
	}
	return n
}
