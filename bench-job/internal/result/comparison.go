package result

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// CompareInput is what the operator hands `sluice-bench compare --status`
// for a Benchmark with spec.compareTo: this run's status.results and the
// other Benchmark as the API server returns it (null when it does not
// exist). Reading the other resource whole keeps the operator out of its
// fields: which of them are compared is decided here.
type CompareInput struct {
	Benchmark string          `json:"benchmark"`
	Results   json.RawMessage `json:"results"`
	Other     *struct {
		Spec struct {
			Scenario string `json:"scenario"`
		} `json:"spec"`
		Status struct {
			Results json.RawMessage `json:"results"`
		} `json:"status"`
	} `json:"other"`
}

// Comparison is status.comparison: per operation and in "total", this
// run's numbers, the other's (other<Field>) and <field>Ratio = this/other,
// so req/s above 1 and latency below 1 mean this run did better.
type Comparison struct {
	Benchmark  string                        `json:"benchmark"`
	Operations map[string]map[string]float64 `json:"operations,omitempty"`
	Message    string                        `json:"message"`
}

// comparedFields are the numbers put side by side, in status spelling;
// a row has those of them that both sides report.
var comparedFields = []string{"requestsPerSecond", "p50Ms", "p99Ms", "p999Ms"}

// numbers is status.results read loosely: the numeric fields of the totals
// and of each operation (a result written by an older operator may lack
// some; they are then left out of the comparison, not taken as zero).
type numbers struct {
	total map[string]float64
	ops   map[string]map[string]float64
}

func parseNumbers(raw json.RawMessage) (*numbers, error) {
	var doc map[string]json.RawMessage
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("status.results: %w", err)
	}
	if len(doc) == 0 {
		return nil, nil
	}
	n := &numbers{total: numericFields(doc), ops: map[string]map[string]float64{}}
	var ops map[string]map[string]json.RawMessage
	if raw, ok := doc["operations"]; ok {
		if err := json.Unmarshal(raw, &ops); err != nil {
			return nil, fmt.Errorf("status.results.operations: %w", err)
		}
	}
	for name, op := range ops {
		n.ops[name] = numericFields(op)
	}
	return n, nil
}

func numericFields(doc map[string]json.RawMessage) map[string]float64 {
	out := map[string]float64{}
	for k, v := range doc {
		var f float64
		if json.Unmarshal(v, &f) == nil {
			out[k] = f
		}
	}
	return out
}

// Compare puts this run's results beside the other Benchmark's. Missing
// results on either side give a message and no numbers.
func Compare(in CompareInput) (Comparison, error) {
	out := Comparison{Benchmark: in.Benchmark}
	if in.Other == nil {
		out.Message = fmt.Sprintf("Benchmark %s does not exist", in.Benchmark)
		return out, nil
	}
	theirs, err := parseNumbers(in.Other.Status.Results)
	if err != nil {
		return out, fmt.Errorf("Benchmark %s: %w", in.Benchmark, err)
	}
	if theirs == nil {
		out.Message = fmt.Sprintf("Benchmark %s has no results yet", in.Benchmark)
		return out, nil
	}
	mine, err := parseNumbers(in.Results)
	if err != nil {
		return out, err
	}
	if mine == nil {
		out.Message = "this Benchmark has no results yet"
		return out, nil
	}
	out.Operations = map[string]map[string]float64{"total": compareRow(mine.total, theirs.total)}
	for name, a := range mine.ops {
		if b, ok := theirs.ops[name]; ok {
			out.Operations[name] = compareRow(a, b)
		}
	}
	t := out.Operations["total"]
	var parts []string
	if r, ok := t["requestsPerSecondRatio"]; ok {
		parts = append(parts, "req/s x"+pyFloat(r))
	}
	if r, ok := t["p99MsRatio"]; ok {
		parts = append(parts, "p99 x"+pyFloat(r))
	}
	out.Message = fmt.Sprintf("vs %s (%s): %s", in.Benchmark, in.Other.Spec.Scenario, strings.Join(parts, ", "))
	return out, nil
}

func compareRow(a, b map[string]float64) map[string]float64 {
	row := map[string]float64{}
	for _, f := range comparedFields {
		av, aok := a[f]
		bv, bok := b[f]
		if !aok || !bok {
			continue
		}
		row[f] = av
		row["other"+strings.ToUpper(f[:1])+f[1:]] = bv
		if r, ok := ratio(av, bv); ok {
			row[f+"Ratio"] = r
		}
	}
	return row
}

// pyFloat prints a ratio the way the status message has always shown it:
// shortest form, always with a decimal point (2.0, 0.5, 1.234).
func pyFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
