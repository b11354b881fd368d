package app

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sluice.dev/server/internal/config"
	"sluice.dev/server/internal/testutil"
)

// runServer starts Run (the real listener path) and returns its address.
func runServer(t *testing.T, opts config.Options) string {
	t.Helper()
	opts.Listen = "127.0.0.1:0"
	opts.DrainDelay = 0
	opts.AccessLog = false
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, opts, slog.New(slog.NewTextHandler(io.Discard, nil)), func(a net.Addr) { addr <- a.String() })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	select {
	case a := <-addr:
		return a
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server did not start")
	}
	return ""
}

// servedSerial makes a new connection and returns the serial of the
// certificate the server presented (verified against the CA).
func servedSerial(t *testing.T, addr string, ca *testutil.CA) int64 {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool}, DisableKeepAlives: true}}
	res, err := c.Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("healthz over https: %d", res.StatusCode)
	}
	return res.TLS.PeerCertificates[0].SerialNumber.Int64()
}

func TestTLSServesAndReloads(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := testutil.NewCA(t)
	ca.Issue(t, certFile, keyFile, 100)
	opts := config.Defaults()
	opts.TLS = config.TLSOptions{CertFile: certFile, KeyFile: keyFile}
	if err := opts.Validate(); err != nil {
		t.Fatal(err)
	}
	addr := runServer(t, opts)
	if got := servedSerial(t, addr, ca); got != 100 {
		t.Fatalf("serial %d, want 100", got)
	}
	// Plain HTTP on the TLS port is not served.
	if res, err := http.Get("http://" + addr + "/healthz"); err == nil {
		if res.StatusCode == 200 {
			t.Error("plain HTTP answered 200 on the HTTPS listener")
		}
		res.Body.Close()
	}

	// Renewal: a new pair is served on the next connection, no restart.
	ca.Issue(t, certFile, keyFile, 101)
	if got := servedSerial(t, addr, ca); got != 101 {
		t.Fatalf("after renewal: serial %d, want 101", got)
	}
	// A half-updated pair (new certificate, old key) keeps the last good one.
	keyBefore, _ := os.ReadFile(keyFile)
	ca.Issue(t, certFile, keyFile, 102)
	testutil.WriteFileAtomic(t, keyFile, keyBefore)
	if got := servedSerial(t, addr, ca); got != 101 {
		t.Fatalf("mismatched pair: serial %d, want the previous 101", got)
	}
	// Once the matching key lands, the new certificate is served.
	ca.Issue(t, certFile, keyFile, 103)
	if got := servedSerial(t, addr, ca); got != 103 {
		t.Fatalf("after the fix: serial %d, want 103", got)
	}
}

func TestTLSOptionsValidated(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	ca := testutil.NewCA(t)
	ca.Issue(t, certFile, keyFile, 1)
	other := filepath.Join(dir, "other.key")
	ca.Issue(t, filepath.Join(dir, "other.crt"), other, 2)
	for name, tc := range map[string]config.TLSOptions{
		"cert only":  {CertFile: certFile},
		"key only":   {KeyFile: keyFile},
		"missing":    {CertFile: filepath.Join(dir, "none.crt"), KeyFile: keyFile},
		"wrong key":  {CertFile: certFile, KeyFile: other},
		"not a cert": {CertFile: keyFile, KeyFile: keyFile},
	} {
		o := config.Defaults()
		o.TLS = tc
		if err := o.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
