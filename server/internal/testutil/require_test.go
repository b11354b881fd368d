package testutil

import (
	"fmt"
	"testing"
)

// recorder stands in for a test to see whether RequireBinary would fail or
// skip it.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func (r *recorder) Skipf(format string, args ...any) { r.skipped = fmt.Sprintf(format, args...) }

func TestRequireBinary(t *testing.T) {
	cases := []struct {
		name, binary, ci   string
		wantFail, wantSkip bool
		wantPathNonEmpty   bool
	}{
		{"present", "sh", "true", false, false, true},
		{"missing under CI", "sluice-no-such-binary", "true", true, false, false},
		{"missing elsewhere", "sluice-no-such-binary", "", false, true, false},
		{"missing with CI=false", "sluice-no-such-binary", "false", false, true, false},
		{"missing with CI=0", "sluice-no-such-binary", "0", false, true, false},
		{"missing with CI=FALSE", "sluice-no-such-binary", "FALSE", false, true, false},
		{"missing with CI=1", "sluice-no-such-binary", "1", true, false, false},
		{"missing with CI=yes", "sluice-no-such-binary", "yes", true, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			path := RequireBinary(r, tc.binary, "it")
			if (r.failed != "") != tc.wantFail || (r.skipped != "") != tc.wantSkip || (path != "") != tc.wantPathNonEmpty {
				t.Errorf("path %q failed %q skipped %q", path, r.failed, r.skipped)
			}
		})
	}
}
