package memory_test

import (
	"testing"

	"sluice.dev/server/internal/storage/storagetest"
)

// TestModel runs the differential test against the reference model.
func TestModel(t *testing.T) { storagetest.RunModel(t, open, storagetest.ModelOptions{Checks: 1000}) }
