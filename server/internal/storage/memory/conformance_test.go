package memory_test

import (
	"testing"

	"sluice.dev/server/internal/storage"
	"sluice.dev/server/internal/storage/memory"
	"sluice.dev/server/internal/storage/storagetest"
)

func open(_ testing.TB, clock storage.Clock) storage.Driver {
	return memory.New(storagetest.Options(clock))
}

func TestConformance(t *testing.T) { storagetest.Run(t, open) }

func BenchmarkDriver(b *testing.B) { storagetest.Bench(b, open) }
