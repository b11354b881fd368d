package storage

import (
	"testing"

	"pgregory.net/rapid"
)

// TestCapacityStates: with no limit nothing is crowded or full; full
// implies crowded; under half the limit is never crowded.
func TestCapacityStates(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := Capacity{
			UsedBytes: rapid.Int64Range(0, 1<<40).Draw(t, "used"),
			MaxBytes:  rapid.OneOf(rapid.Just(int64(0)), rapid.Int64Range(1, 1<<40)).Draw(t, "max"),
		}
		if c.MaxBytes == 0 && (c.Full() || c.Crowded()) {
			t.Fatalf("%+v: no limit, yet full %v crowded %v", c, c.Full(), c.Crowded())
		}
		if c.Full() && !c.Crowded() {
			t.Fatalf("%+v: full but not crowded", c)
		}
		if c.MaxBytes > 0 && c.UsedBytes < c.MaxBytes/2 && c.Crowded() {
			t.Fatalf("%+v: crowded at under half its limit", c)
		}
	})
}
