package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestJSONHandlerLines: every line is one JSON object with the fields
// slog.JSONHandler would write.
func TestJSONHandlerLines(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(newJSONHandler(&buf, slog.LevelInfo))
	log.Debug("hidden")
	log.Info("request", "status", 201, "path", "/v2/queues/\"q\"\n", "ms", 0.25, "ok", true,
		"d", time.Second, "err", errors.New("boom"), "obj", map[string]int{"a": 1})
	log.With("component", "api").WithGroup("g").Warn("grouped", "k", "v", slog.Group("inner", "x", 1))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines: %q", lines)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("%s: %v", lines[0], err)
	}
	want := map[string]any{"level": "INFO", "msg": "request", "status": 201.0, "path": "/v2/queues/\"q\"\n",
		"ms": 0.25, "ok": true, "d": 1e9, "err": "boom", "obj": map[string]any{"a": 1.0}}
	for k, v := range want {
		got, _ := json.Marshal(first[k])
		exp, _ := json.Marshal(v)
		if string(got) != string(exp) {
			t.Errorf("%s = %s, want %s", k, got, exp)
		}
	}
	if _, err := time.Parse(time.RFC3339Nano, first["time"].(string)); err != nil {
		t.Errorf("time: %v", err)
	}
	var second map[string]any
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatalf("%s: %v", lines[1], err)
	}
	if second["component"] != "api" || second["g.k"] != "v" || second["g.inner.x"] != 1.0 || second["level"] != "WARN" {
		t.Errorf("second line %v", second)
	}
}
