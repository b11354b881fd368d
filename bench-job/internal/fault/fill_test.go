package fault

import (
	"strings"
	"testing"
	"time"
)

func TestFillKeysAreNotTheServers(t *testing.T) {
	if strings.HasPrefix(FillKeyPrefix, "sluice:") {
		t.Fatalf("filler keys %q would share sluice-server's prefix", FillKeyPrefix)
	}
}

func TestFillSummary(t *testing.T) {
	f := &Fill{written: 612, maxmemory: 40 << 20, peakUsed: 39 << 20, full: true, until: "oom"}
	want := "filled 612 keys (38.2 MiB) to used_memory 98% of maxmemory 40 MiB for 20s, then removed them"
	if got := f.Summary(20*time.Second+40*time.Millisecond, "duration"); got != want {
		t.Fatalf("summary\n%q\nwant\n%q", got, want)
	}
	f.full, f.until = false, "duration"
	want = "filled 612 keys (38.2 MiB) to used_memory 98% of maxmemory 40 MiB without an OOM answer (the duration ended first) for 7.2s (stopped by SIGTERM), then removed them"
	if got := f.Summary(7234*time.Millisecond, "SIGTERM"); got != want {
		t.Fatalf("summary\n%q\nwant\n%q", got, want)
	}
}
