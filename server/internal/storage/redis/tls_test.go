package redis

import (
	"context"
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/testutil"
)

// TestRedissWithPrivateCA: rediss:// with tls_ca_file trusting a private CA
// works end to end against the real redis-server; without it (the system
// roots) the handshake is refused.
func TestRedissWithPrivateCA(t *testing.T) {
	r := testutil.StartRedisTLS(t)
	ctx := context.Background()
	drv, err := storage.Open(ctx, r.URL, storage.Options{})
	if err != nil {
		t.Fatalf("rediss with the private CA: %v", err)
	}
	defer drv.Close()
	ref := storage.QueueRef{Project: "tls", Name: "q"}
	if _, err := drv.Queues().Create(ctx, ref, nil); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	if err := drv.Queues().Delete(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if drv2, err := storage.Open(ctx, r.NoCAURL, storage.Options{}); err == nil {
		if err := drv2.Ping(ctx); err == nil {
			t.Error("rediss:// trusted a private CA without tls_ca_file")
		}
		drv2.Close()
	}
}
