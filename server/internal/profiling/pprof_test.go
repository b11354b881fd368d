package profiling

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
)

func TestServeAnswersProfilesAndStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	// Bind a free port first so the test knows the address Serve takes.
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := probe.Addr().String()
	probe.Close()
	wait, err := Serve(ctx, addr, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.200s", resp.StatusCode, body)
	}
	// Nothing else is mounted: the API's routes never leak onto this port.
	resp, err = http.Get("http://" + addr + "/v2/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/v2/queues on the pprof port: %d", resp.StatusCode)
	}
	cancel()
	wait()
	if _, err := http.Get("http://" + addr + "/debug/pprof/"); err == nil {
		t.Fatal("pprof still answers after the context ended")
	}
}

func TestServeFailsOnABusyAddress(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Serve(context.Background(), ln.Addr().String(), slog.New(slog.DiscardHandler)); err == nil {
		t.Fatal("Serve on a bound address succeeded")
	}
}
