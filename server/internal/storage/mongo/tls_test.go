package mongo_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/mongo"
	"sluice.dev/server/internal/testutil"
)

// tlsFront is a TLS-only listener on loopback in front of FerretDB (which
// speaks plain TCP only), playing mongod --tlsMode requireTLS: it presents
// a certificate from a private CA and forwards the decrypted stream.
func tlsFront(t *testing.T, backend string, cert tls.Certificate) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return // closed at cleanup
			}
			out, err := net.Dial("tcp", backend)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			open = append(open, in, out)
			mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); _, _ = io.Copy(out, in); out.Close() }()
			go func() { defer wg.Done(); _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// TestMongoURIWithTLSAndPrivateCA: the URI form the operator registers for
// a builtin MongoDB shard with backend TLS (tls=true&tlsCAFile=) works end
// to end through a TLS-only endpoint; a client trusting another CA, or
// speaking plain TCP, gets no store.
func TestMongoURIWithTLSAndPrivateCA(t *testing.T) {
	f := testutil.StartFerretDB(t)
	dir := t.TempDir()
	ca := testutil.NewCA(t)
	crt, key, caFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	ca.Issue(t, crt, key, 3)
	ca.WriteCert(t, caFile)
	pair, err := tls.LoadX509KeyPair(crt, key)
	if err != nil {
		t.Fatal(err)
	}
	addr := tlsFront(t, f.Addr, pair)
	other := filepath.Join(dir, "other.crt")
	testutil.NewCA(t).WriteCert(t, other)

	ctx := context.Background()
	ref := storage.QueueRef{Project: "tls", Name: "q"}
	open := func(query string) (storage.Driver, error) {
		u, err := url.Parse("mongodb://" + addr + "/?directConnection=true&serverSelectionTimeoutMS=1500" + query)
		if err != nil {
			t.Fatal(err)
		}
		return mongo.Open(ctx, u, storage.Options{})
	}
	d, err := open("&tls=true&tlsCAFile=" + url.QueryEscape(caFile))
	if err != nil {
		t.Fatalf("open over TLS with the private CA: %v", err)
	}
	defer d.Close()
	if _, err := d.Queues().Create(ctx, ref, nil); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	if err := d.Queues().Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}

	for name, query := range map[string]string{
		"another CA": "&tls=true&tlsCAFile=" + url.QueryEscape(other),
		"plain TCP":  "",
	} {
		d, err := open(query)
		if err != nil {
			continue // refused at open: what we want
		}
		if err := d.Ping(ctx); err == nil {
			t.Errorf("%s: the TLS-only endpoint answered", name)
		}
		d.Close()
	}
}
