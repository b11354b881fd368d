//go:build tools

// Package tools pins Prometheus's commands so `go build` of promtool and
// prometheus uses the versions recorded in this module's go.sum.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
