package main

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// zaqar-bench 23.0.1's output keys (zaqar/bench/{producer,consumer,
// observer,conductor}.py): scripts parse exactly these.
var zaqarKeys = map[string][]string{
	"producer": {"duration_sec", "ms_per_req", "reqs_per_sec", "successful_reqs", "total_reqs"},
	"consumer": {"claim_total_requests", "duration_sec", "messages_processed", "ms_per_claim", "ms_per_delete", "reqs_per_sec", "successful_reqs", "total_reqs"},
	"observer": {"duration_sec", "ms_per_req", "reqs_per_sec", "successful_reqs", "total_reqs"},
	"params":   {"consumer", "observer", "producer"},
}

func keys(m map[string]any) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	sort.Strings(k)
	return k
}

func TestZaqarBenchCompatibleOutput(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		out := mustRun(t, "-s", url, "-pp", "1", "-pw", "2", "-cp", "1", "-cw", "2", "-op", "1", "-ow", "1", "-t", "1", "-q", "compat")
		var doc map[string]map[string]any
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if got := keys(map[string]any{"producer": 0, "consumer": 0, "observer": 0, "params": 0}); !reflect.DeepEqual(got, keys(anyMap(doc))) {
			t.Fatalf("top-level keys %v, want %v", keys(anyMap(doc)), got)
		}
		for block, want := range zaqarKeys {
			if got := keys(doc[block]); !reflect.DeepEqual(got, want) {
				t.Errorf("%s keys = %v, want %v", block, got, want)
			}
		}
		if p := doc["params"]["producer"].(map[string]any); p["processes"] != 1.0 || p["workers"] != 2.0 {
			t.Errorf("params.producer = %v", p)
		}
		prod, cons := doc["producer"], doc["consumer"]
		if prod["successful_reqs"].(float64) <= 0 || prod["total_reqs"].(float64) < prod["successful_reqs"].(float64) {
			t.Errorf("producer counts: %v", prod)
		}
		// zaqar-bench's definitions: successful = claims + deletes, processed = deletes.
		if cons["successful_reqs"].(float64) < cons["messages_processed"].(float64)+cons["claim_total_requests"].(float64)-0.5 {
			t.Errorf("consumer: successful_reqs %v != claims %v + deletes %v", cons["successful_reqs"], cons["claim_total_requests"], cons["messages_processed"])
		}
		// --debug prints zaqar-bench's text report instead.
		text := mustRun(t, "-s", url, "-pp", "1", "-pw", "1", "-op", "0", "-t", "1", "-q", "compat", "--debug")
		if !strings.Contains(text, "Producer\n========\n") || !strings.Contains(text, "reqs_per_sec: ") {
			t.Errorf("--debug output:\n%s", text)
		}
	})
}

func anyMap[V any](m map[string]V) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Producer-only: every acknowledged post must be in the server, no more.
// Task distribution: after the drain the server holds nothing and every
// message was claimed exactly once.
func TestCountsMatchServer(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		r := runJSON(t, "-s", url, "-pp", "2", "-pw", "4", "-cw", "0", "-ow", "0", "-t", "2", "-q", "count", "-qno", "3", "-m", writeMessages(t))
		post := r.Ops["post"]
		if post == nil || post.OK == 0 {
			t.Fatalf("no successful posts: %+v", r.Ops)
		}
		total, _ := serverTotal(t, url, "count", 3)
		if total != post.OK {
			t.Errorf("server holds %d messages, summary says %d posts succeeded", total, post.OK)
		}
		if r.Producer["successful_reqs"] != float64(post.OK) {
			t.Errorf("zaqar block successful_reqs %v != ops.post.ok %d", r.Producer["successful_reqs"], post.OK)
		}

		r = runJSON(t, "--scenario", "task-distribution", "-s", url, "-t", "2", "-pw", "5", "-cw", "5", "-q", "td")
		d := r.Delivery
		if d == nil {
			t.Fatal("no delivery block")
		}
		total, claimed := serverTotal(t, url, "td", 4)
		if total != 0 || claimed != 0 {
			t.Errorf("server still holds %d messages (%d claimed) after the drain", total, claimed)
		}
		del := r.Ops["delete"]
		deleted := del.OK + del.Extra["drain_ok"]
		if d.Produced != r.Ops["post"].OK || deleted != d.Produced {
			t.Errorf("produced %d, posts ok %d, deletes ok %d (incl. drain)", d.Produced, r.Ops["post"].OK, deleted)
		}
		if d.Lost != 0 || d.Duplicated != 0 || r.Lost != 0 || r.Duplicated != 0 {
			t.Errorf("lost %d duplicated %d", d.Lost, d.Duplicated)
		}
	})
}

// The seed's task-distribution preset (2x25 producers, 2x25 consumers)
// loses and duplicates nothing.
func TestTaskDistributionPresetZeroLostZeroDuplicated(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		r := runJSON(t, "--scenario", "task-distribution", "-s", url, "-t", "3")
		if r.Params.Producer.Total() != 50 || r.Params.Consumer.Total() != 50 || r.Params.MessagesPerClaim != 5 || r.Params.NumQueues != 4 {
			t.Errorf("preset params = %+v", r.Params)
		}
		d := r.Delivery
		if d.Produced == 0 || d.Consumed != d.Produced || d.Unique != d.Produced {
			t.Errorf("produced %d consumed %d unique %d", d.Produced, d.Consumed, d.Unique)
		}
		if r.Lost != 0 || r.Duplicated != 0 || !d.Exact {
			t.Errorf("lost %d duplicated %d exact %v", r.Lost, r.Duplicated, d.Exact)
		}
		if d.E2E.OK != d.Consumed || d.E2E.P99 <= 0 {
			t.Errorf("e2e latency: %d samples, p99 %v", d.E2E.OK, d.E2E.P99)
		}
	})
}

// Observers page through each queue with the marker of their previous
// listing, as zaqar-bench's do: every listing succeeds and sees messages.
func TestObserverPagesWithMarker(t *testing.T) {
	forEachStore(t, func(t *testing.T, url string) {
		r := runJSON(t, "--scenario", "point-to-point", "-s", url, "-t", "2", "-q", "p2p")
		list := r.Ops["list"]
		if list == nil || list.OK == 0 || list.Failed != 0 || list.Extra["messages"] == 0 {
			t.Errorf("list: %+v", list)
		}
		if r.Observer["successful_reqs"] != float64(list.OK) || r.Observer["duration_sec"] <= 0 {
			t.Errorf("observer block %v", r.Observer)
		}
	})
}
