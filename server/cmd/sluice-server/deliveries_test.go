package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"sluice.dev/server/internal/testutil"
)

// These tests run real sluice-server processes built from this tree on a
// real redis-server, with a webhook receiver on loopback.

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TestMain removes the binary serverBinary built: 23 MB left in the
// temporary directory by every run otherwise.
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// serverBinary builds sluice-server once per test run.
func serverBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sluice-server-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sluice-server")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// replica is one sluice-server process.
type replica struct {
	t    *testing.T
	addr string
	cmd  *exec.Cmd
	logs bytes.Buffer
}

func startReplica(t *testing.T, store string, extra ...string) *replica {
	t.Helper()
	bin := serverBinary(t)
	for attempt := 0; attempt < 3; attempt++ {
		r := &replica{t: t, addr: "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t))}
		// No drain delay and a short linger: no load balancer to drain from.
		args := append([]string{"--listen", r.addr, "--store", store, "--access-log=false", "--drain-delay", "0", "--shutdown-timeout", "4s",
			"--delivery-timeout", "1s", "--delivery-poll", "50ms", "--delivery-retry-min", "50ms", "--delivery-retry-max", "500ms"}, extra...)
		r.cmd = exec.Command(bin, args...)
		r.cmd.Stdout, r.cmd.Stderr = &r.logs, &r.logs
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if r.waitReady(10 * time.Second) {
			t.Cleanup(r.stop)
			return r
		}
		r.kill()
	}
	t.Fatal("sluice-server did not start")
	return nil
}

func (r *replica) waitReady(limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		res, err := http.Get("http://" + r.addr + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return true
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// kill ends the process with SIGKILL: no drain, no cleanup.
func (r *replica) kill() {
	if r.cmd.ProcessState == nil {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
}

// stop ends the process with SIGTERM, and SIGKILL if it has not exited
// 20 s later. The test's client drops its idle connections first, as a
// client of a stopping server should (it leaves them to their clients for
// a while: docs/server.md).
func (r *replica) stop() {
	if r.cmd.ProcessState == nil {
		http.DefaultClient.CloseIdleConnections()
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = r.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = r.cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}
}

// call makes one API request as project "p" and returns status and body.
func (r *replica) call(method, path, body string) (int, []byte) {
	r.t.Helper()
	req, err := http.NewRequest(method, "http://"+r.addr+path, bytes.NewBufferString(body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header.Set("Client-ID", "3381af92-2b9e-11e3-b191-71861300734c")
	req.Header.Set("X-Project-ID", "p")
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{Timeout: 10 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

func (r *replica) must(status int, method, path, body string) []byte {
	r.t.Helper()
	got, b := r.call(method, path, body)
	if got != status {
		r.t.Fatalf("%s %s: %d %s, want %d", method, path, got, b, status)
	}
	return b
}

func (r *replica) pending(queue string) int {
	var st struct {
		Pending int `json:"pending"`
	}
	_ = json.Unmarshal(r.must(200, "GET", "/v2/queues/"+queue+"/deliveries", ""), &st)
	return st.Pending
}

// TestKilledServerLosesNothing: a replica SIGKILLed while delivering, then
// started again, delivers every notification of every acknowledged post.
func TestKilledServerLosesNothing(t *testing.T) {
	rds := testutil.StartRedis(t, testutil.RedisOptions{})
	rcv := testutil.StartWebhook(t)
	a := startReplica(t, rds.URL)
	a.must(201, "POST", "/v2/queues/k/subscriptions", `{"subscriber":"`+rcv.URL("/k")+`","ttl":3600}`)
	const n = 300
	posted := 0
	for i := 0; i < n; i++ {
		a.must(201, "POST", "/v2/queues/k/messages", fmt.Sprintf(`{"messages":[{"ttl":600,"body":{"n":%d}}]}`, i))
		posted++
		if i == n/3 {
			// Slow the receiver so that sends are in flight at the kill.
			rcv.Hang()
		}
	}
	a.kill()
	if len(rcv.ByDelivery()) >= n {
		t.Fatalf("everything was delivered before the kill; the test proves nothing")
	}
	rcv.Unhang()
	b := startReplica(t, rds.URL)
	testutil.Eventually(t, 90*time.Second, "every notification delivered after the restart", func() bool {
		return len(rcv.ByDelivery()) == posted
	})
	testutil.Eventually(t, 10*time.Second, "nothing pending", func() bool { return b.pending("k") == 0 })
}

// TestReplicasNeverSendConcurrently: three replicas on one Redis share the
// deliveries and never send the same one at the same time.
func TestReplicasNeverSendConcurrently(t *testing.T) {
	rds := testutil.StartRedis(t, testutil.RedisOptions{})
	rcv := testutil.StartWebhook(t)
	reps := []*replica{startReplica(t, rds.URL), startReplica(t, rds.URL), startReplica(t, rds.URL)}
	for _, q := range []string{"r1", "r2"} {
		reps[0].must(201, "POST", "/v2/queues/"+q+"/subscriptions", `{"subscriber":"`+rcv.URL("/"+q)+`","ttl":3600}`)
	}
	const n = 300
	var wg sync.WaitGroup
	for i, r := range reps {
		wg.Add(1)
		go func(i int, r *replica) {
			defer wg.Done()
			for j := 0; j < n/len(reps); j++ {
				q := []string{"r1", "r2"}[j%2]
				if st, b := r.call("POST", "/v2/queues/"+q+"/messages", fmt.Sprintf(`{"messages":[{"ttl":600,"body":{"r":%d,"j":%d}}]}`, i, j)); st != 201 {
					t.Errorf("post: %d %s", st, b)
					return
				}
			}
		}(i, r)
	}
	wg.Wait()
	defer func() {
		if t.Failed() {
			t.Logf("received %d unique, pending r1 %d r2 %d\n%s", len(rcv.ByDelivery()), reps[1].pending("r1"), reps[1].pending("r2"), reps[0].logs.String())
		}
	}()
	testutil.Eventually(t, 60*time.Second, "all delivered", func() bool { return len(rcv.ByDelivery()) == n })
	time.Sleep(500 * time.Millisecond)
	for id, c := range rcv.ByDelivery() {
		if c != 1 {
			t.Errorf("delivery %s sent %d times", id, c)
		}
	}
	if o := rcv.Overlaps(); o != 0 {
		t.Errorf("%d concurrent duplicate sends", o)
	}
	for _, q := range []string{"r1", "r2"} {
		if p := reps[1].pending(q); p != 0 {
			t.Errorf("queue %s: %d pending", q, p)
		}
	}
}

// TestRequireConfirmation: with --require-confirmation the subscriber gets
// a confirmation request first and messages only after it confirmed; the
// delivery metrics count what happened.
func TestRequireConfirmation(t *testing.T) {
	rds := testutil.StartRedis(t, testutil.RedisOptions{})
	rcv := testutil.StartWebhook(t)
	r := startReplica(t, rds.URL, "--require-confirmation")
	var created struct {
		ID string `json:"subscription_id"`
	}
	_ = json.Unmarshal(r.must(201, "POST", "/v2/queues/c/subscriptions", `{"subscriber":"`+rcv.URL("/c")+`"}`), &created)
	testutil.Eventually(t, 10*time.Second, "confirmation request", func() bool { return len(rcv.Received()) == 1 })
	var doc map[string]any
	_ = json.Unmarshal(rcv.Received()[0].Body, &doc)
	if doc["Message_Type"] != "SubscriptionConfirmation" || doc["SubscriptionId"] != created.ID {
		t.Fatalf("confirmation request %s", rcv.Received()[0].Body)
	}
	r.must(201, "POST", "/v2/queues/c/messages", `{"messages":[{"body":"before"}]}`)
	time.Sleep(500 * time.Millisecond)
	if n := len(rcv.Received()); n != 1 || r.pending("c") != 0 {
		t.Fatalf("unconfirmed subscriber: %d requests, %d pending", n, r.pending("c"))
	}
	r.must(204, "PUT", "/v2/queues/c/subscriptions/"+created.ID+"/confirm", `{"confirmed":true}`)
	r.must(201, "POST", "/v2/queues/c/messages", `{"messages":[{"body":"after"}]}`)
	testutil.Eventually(t, 10*time.Second, "message after confirmation", func() bool { return len(rcv.Received()) == 2 })
	if body := string(rcv.Received()[1].Body); !bytes.Contains([]byte(body), []byte(`"body": "after"`)) {
		t.Errorf("delivered %s", body)
	}
	// The subscriber has the message before the engine records the
	// outcome, so the scrape is repeated until the outcome is recorded.
	want := []string{
		`sluice_notification_deliveries_total{outcome="delivered"} 1`,
		`sluice_notification_deliveries_total{outcome="failed"} 0`,
		`sluice_notification_retries_total 0`,
		`sluice_notification_delivery_latency_seconds_count 1`,
		`sluice_notification_deliveries_pending 0`,
	}
	var missing []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		missing = missing[:0]
		metrics := r.must(200, "GET", "/metrics", "")
		for _, w := range want {
			if !bytes.Contains(metrics, []byte(w)) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range missing {
		t.Errorf("metrics lack %s", w)
	}
}

// TestHangingSubscriberDoesNotSlowPosting: while a subscriber that never
// answers holds its share of the engine, posts to its queue and to other
// queues are all acknowledged, each within a client deadline far below the
// subscriber's timeout, and other subscribers keep being served.
func TestHangingSubscriberDoesNotSlowPosting(t *testing.T) {
	rds := testutil.StartRedis(t, testutil.RedisOptions{})
	stuck, ok := testutil.StartWebhook(t), testutil.StartWebhook(t)
	stuck.Hang()
	r := startReplica(t, rds.URL, "--delivery-timeout", "60s")
	r.must(201, "POST", "/v2/queues/stuck/subscriptions", `{"subscriber":"`+stuck.URL("/s")+`"}`)
	r.must(201, "POST", "/v2/queues/fine/subscriptions", `{"subscriber":"`+ok.URL("/f")+`"}`)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(q string, i int) {
		req, _ := http.NewRequest("POST", "http://"+r.addr+"/v2/queues/"+q+"/messages",
			bytes.NewBufferString(fmt.Sprintf(`{"messages":[{"body":%d}]}`, i)))
		req.Header.Set("Client-ID", "3381af92-2b9e-11e3-b191-71861300734c")
		req.Header.Set("X-Project-ID", "p")
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("post %d to %s: %v", i, q, err)
		}
		res.Body.Close()
		if res.StatusCode != 201 {
			t.Fatalf("post %d to %s: %d", i, q, res.StatusCode)
		}
	}
	for i := 0; i < 100; i++ {
		post("stuck", i)
	}
	testutil.Eventually(t, 10*time.Second, "stuck subscriber saturated", func() bool { n, _ := stuck.InFlight(); return n > 0 })
	for i := 0; i < 100; i++ {
		post("other", i)
		post("fine", i)
	}
	testutil.Eventually(t, 30*time.Second, "other subscriber served", func() bool { return len(ok.ByDelivery()) == 100 })
	if _, most := stuck.InFlight(); most > 4 {
		t.Errorf("%d concurrent requests to the stuck subscriber, limit 4", most)
	}
	if p := r.pending("stuck"); p != 100 {
		t.Errorf("stuck queue: %d pending, want 100", p)
	}
}
