package api

import (
	"fmt"
	"strings"
	"testing"

	"sluice.dev/server/internal/config"
	_ "sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// TestErrorBodiesAgreeAcrossDrivers: the same refused request gets the same
// status and the same body on every driver; the wording lives in the API,
// never in a driver.
func TestErrorBodiesAgreeAcrossDrivers(t *testing.T) {
	stores := map[string]func(*config.Options){"memory": nil}
	r := testutil.StartRedis(t, testutil.RedisOptions{})
	stores["redis"] = func(o *config.Options) { o.Store = r.URL }
	f := testutil.StartFerretDB(t)
	stores["mongo"] = func(o *config.Options) { o.Store = f.URI("api-errors") }
	answers := map[string][]string{}
	for name, store := range stores {
		answers[name] = refusedAnswers(t, startServer(t, store))
	}
	want := answers["memory"]
	for name, got := range answers {
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s answers %s, memory %s", name, got[i], want[i])
			}
		}
	}
}

// refusedAnswers makes requests every driver must refuse and returns each
// answer as "<request> -> <status> <body>".
func refusedAnswers(t *testing.T, ts *testServer) []string {
	const unknown = "00000000-0000-4000-8000-000000000000"
	ts.must(201, "POST", "/v2/queues/q/messages", std(), `{"messages":[{"body":1},{"body":2}]}`)
	claimed := ts.must(201, "POST", "/v2/queues/q/claims?limit=1", std(), `{"ttl":300,"grace":60}`).json(t)["messages"].([]any)
	href := claimed[0].(map[string]any)["href"].(string)
	msg, claimID, _ := strings.Cut(href, "?claim_id=")
	free := ts.must(200, "GET", "/v2/queues/q/messages?echo=true", std(), "").json(t)["messages"].([]any)[0].(map[string]any)["href"].(string)
	requests := []struct{ method, path, body string }{
		{"GET", "/v2/queues/q/messages?echo=true&marker=zz", ""},
		{"DELETE", msg, ""},
		{"DELETE", msg + "?claim_id=" + unknown, ""},
		{"DELETE", free + "?claim_id=" + claimID, ""},
		{"GET", "/v2/queues/q/claims/" + unknown, ""},
		{"PATCH", "/v2/queues/q/claims/" + unknown, `{"ttl":100}`},
		{"GET", "/v2/queues/q/messages/" + unknown, ""},
		{"PATCH", "/v2/queues/nosuch", `[{"op":"add","path":"/metadata/k","value":"v"}]`},
	}
	var out []string
	for _, rq := range requests {
		h := std()
		if rq.method == "PATCH" && strings.HasPrefix(rq.path, "/v2/queues/nosuch") {
			h = std("Content-Type", patchMediaType)
		}
		res := ts.do(rq.method, rq.path, h, rq.body)
		if res.status < 400 {
			t.Errorf("%s %s answered %d, want a refusal", rq.method, rq.path, res.status)
		}
		// Message and claim ids differ per run; the wording must not.
		body := strings.ReplaceAll(strings.ReplaceAll(res.body, claimID, "<claim>"), strings.TrimPrefix(msg, "/v2/queues/q/messages/"), "<msg>")
		out = append(out, fmt.Sprintf("request %d (%s): %d %s", len(out), rq.method, res.status, body))
	}
	return out
}
