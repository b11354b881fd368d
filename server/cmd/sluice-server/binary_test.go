package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The linker leaves out exported methods nothing calls, unless some
// reachable code looks methods up by name through reflect: then it must
// keep every exported method of every type. A dependency doing that
// (google.golang.org/protobuf before v1.36.12, through the Prometheus
// client) kept all ~1,100 go-redis commands and grew the binary from 16.4
// to 22.5 MB, most of it mapped at start: idle RSS rose by 2 MB
// (docs/benchmarks.md, `make bench-idle-rss`). GeoAdd stands for every command the
// server never sends.
func TestUnusedMethodsAreLinkedOut(t *testing.T) {
	bin := serverBinary(t)
	out, err := exec.Command("go", "tool", "nm", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("go tool nm: %v\n%s", err, out)
	}
	syms := string(out)
	if !strings.Contains(syms, "go-redis/v9.cmdable.FCall") {
		t.Fatal("the symbol table lacks cmdable.FCall, which the server calls: is the binary stripped?")
	}
	if strings.Contains(syms, "go-redis/v9.cmdable.GeoAdd") {
		t.Fatal("cmdable.GeoAdd, never called, is linked in: a dependency turned off the linker's " +
			"removal of unused methods (go build -ldflags=-dumpdep names the caller marked <ReflectMethod>)")
	}
}
