package memory_test

import (
	"testing"

	"sluice.dev/server/internal/storage/storagetest"
)

// Two memory drivers stand for the source and the target backend.
func TestMigration(t *testing.T) { storagetest.RunMigration(t, open, open) }

func BenchmarkMove(b *testing.B) { storagetest.BenchMove(b, open, open) }
