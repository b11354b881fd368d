package redis_test

import (
	"testing"

	"sluice.dev/server/internal/storage/storagetest"
)

// TestModel runs the differential test against the reference model on a
// real redis-server.
func TestModel(t *testing.T) { storagetest.RunModel(t, open, storagetest.ModelOptions{Checks: 200}) }
