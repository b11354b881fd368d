package result

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"sluice.dev/bench/internal/metrics"
)

func newHist() *hdr.Histogram { return metrics.NewHist() }

// SummaryFile is the name of the full result inside a run directory.
const SummaryFile = "summary.json"

// Load reads a full summary, a termination log, or a run directory.
func Load(path string) (*Result, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, SummaryFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse accepts either form: a full summary ("version") or a compact
// termination log ("v").
func Parse(data []byte) (*Result, error) {
	var probe struct {
		V       *int `json:"v"`
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("not a sluice-bench summary: %w", err)
	}
	switch {
	case probe.Version != nil:
		var r Result
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, err
		}
		if r.Ops == nil {
			r.Ops = map[string]*OpResult{}
		}
		return &r, nil
	case probe.V != nil:
		var c Compact
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, err
		}
		if c.V != Version || c.Ops == nil {
			return nil, fmt.Errorf("not a sluice-bench v%d summary (v %d, ops %t)", Version, c.V, c.Ops != nil)
		}
		return FromCompact(&c), nil
	}
	return nil, fmt.Errorf("not a sluice-bench summary (no version field)")
}
