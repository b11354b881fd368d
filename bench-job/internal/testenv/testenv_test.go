package testenv

import "testing"

func TestInCIFollowsTheOneDefinition(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "false": false, "FALSE": false, " false ": false,
		"true": true, "1": true, "yes": true, "gitlab": true} {
		t.Setenv("CI", v)
		if got := InCI(); got != want {
			t.Errorf("CI=%q: InCI %v, want %v", v, got, want)
		}
	}
}
