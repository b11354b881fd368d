package config

import (
	"os"
	"strings"
	"testing"
)

// TestServerDocListsEveryOption: docs/server.md's table of flags is written
// by hand, so a new option (or a changed default) fails here until the
// table says it too.
func TestServerDocListsEveryOption(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/server.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	defaults := Defaults()
	for _, op := range options {
		row := "| `--" + op.name + "` | `" + EnvName(op.name) + "` | "
		i := strings.Index(doc, row)
		if i < 0 {
			t.Errorf("docs/server.md has no row %q", row)
			continue
		}
		cell := doc[i+len(row):]
		cell = cell[:strings.Index(cell, " |")]
		want := ""
		if d := op.get(&defaults); d != "" {
			want = "`" + d + "`"
		}
		if cell != want {
			t.Errorf("docs/server.md: --%s default %s, want %s", op.name, cell, want)
		}
	}
}
