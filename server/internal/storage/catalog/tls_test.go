package catalog

import (
	"context"
	"testing"

	"sluice.dev/server/internal/testutil"
)

// TestCatalogOverRediss: the catalog opens the same rediss:// URI with
// tls_ca_file that the store drivers do, against the real redis-server.
func TestCatalogOverRediss(t *testing.T) {
	r := testutil.StartRedisTLS(t)
	ctx := context.Background()
	st, err := OpenStore(ctx, r.URL)
	if err != nil {
		t.Fatalf("catalog over rediss with the private CA: %v", err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if st, err := OpenStore(ctx, r.NoCAURL); err == nil {
		st.Close()
		t.Error("the catalog trusted a private CA without tls_ca_file")
	}
	if _, err := OpenStore(ctx, "redis://127.0.0.1:1/0?tls_ca_file=/x"); err == nil {
		t.Error("tls_ca_file without rediss:// accepted")
	}
}
