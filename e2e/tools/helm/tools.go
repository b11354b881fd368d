//go:build tools

// Package tools pins helm's CLI so `go build helm.sh/helm/v3/cmd/helm` uses
// the versions recorded in this module's go.sum.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
