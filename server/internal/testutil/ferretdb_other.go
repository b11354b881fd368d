//go:build !linux

package testutil

import "os/exec"

// ferretDieWithParent: only Linux can tie a child's life to its parent.
func ferretDieWithParent(*exec.Cmd) {}
