package result

import (
	"encoding/json"
	"strings"
	"testing"
)

const mineResults = `{"requestsPerSecond": 1000.0, "p99Ms": 20.0, "lost": 0, "exact": true,
	"operations": {"post": {"requestsPerSecond": 600.0, "p50Ms": 2.0, "p99Ms": 20.0, "p999Ms": 30.0},
	               "claim": {"requestsPerSecond": 300.0, "p99Ms": 10.0}}}`

func compareJSON(t *testing.T, doc string) Comparison {
	t.Helper()
	var in CompareInput
	if err := json.Unmarshal([]byte(doc), &in); err != nil {
		t.Fatal(err)
	}
	c, err := Compare(in)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComparisonRatiosPerOperationAndTotal(t *testing.T) {
	c := compareJSON(t, `{"benchmark": "virtual", "results": `+mineResults+`, "other": {
		"spec": {"scenario": "task-distribution"},
		"status": {"results": {"requestsPerSecond": 500.0, "p99Ms": 40.0,
			"operations": {"post": {"requestsPerSecond": 300.0, "p99Ms": 40.0}}}}}}`)
	tot, post := c.Operations["total"], c.Operations["post"]
	if tot["requestsPerSecondRatio"] != 2 || tot["otherP99Ms"] != 40 || tot["p99MsRatio"] != 0.5 || tot["p99Ms"] != 20 {
		t.Errorf("total %v", tot)
	}
	// Only numbers both sides report are compared; an operation the other lacks is left out.
	if post["requestsPerSecondRatio"] != 2 || post["otherRequestsPerSecond"] != 300 {
		t.Errorf("post %v", post)
	}
	if _, ok := post["p50MsRatio"]; ok {
		t.Errorf("p50 compared with a missing value: %v", post)
	}
	if _, ok := c.Operations["claim"]; ok {
		t.Errorf("claim compared with nothing: %v", c.Operations)
	}
	if c.Benchmark != "virtual" || c.Message != "vs virtual (task-distribution): req/s x2.0, p99 x0.5" {
		t.Errorf("%q", c.Message)
	}
}

func TestComparisonWithoutBothResultsSaysWhy(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"benchmark": "nope", "results": ` + mineResults + `, "other": null}`, "Benchmark nope does not exist"},
		{`{"benchmark": "v", "results": ` + mineResults + `, "other": {"status": {}}}`, "Benchmark v has no results yet"},
		{`{"benchmark": "v", "results": ` + mineResults + `, "other": {"status": {"results": {}}}}`, "Benchmark v has no results yet"},
		{`{"benchmark": "v", "results": null, "other": {"status": {"results": {"p99Ms": 1}}}}`, "this Benchmark has no results yet"},
	} {
		c := compareJSON(t, tc.doc)
		if c.Message != tc.want || c.Operations != nil {
			t.Errorf("%s: %+v, want %q", tc.doc, c, tc.want)
		}
	}
	// A zero on the other side gives no ratio rather than infinity.
	c := compareJSON(t, `{"benchmark": "v", "results": `+mineResults+`, "other": {"spec": {"scenario": "s"}, "status": {"results": {"requestsPerSecond": 0, "p99Ms": 5}}}}`)
	if _, ok := c.Operations["total"]["requestsPerSecondRatio"]; ok || !strings.HasSuffix(c.Message, ": p99 x4.0") {
		t.Errorf("%+v", c)
	}
	var in CompareInput
	_ = json.Unmarshal([]byte(`{"benchmark": "v", "results": {}, "other": {"status": {"results": [1]}}}`), &in)
	if _, err := Compare(in); err == nil || !strings.Contains(err.Error(), "Benchmark v") {
		t.Errorf("a malformed other result: %v", err)
	}
}
