//go:build tools

// Package tools names the command tests/kube/build builds (prometheus), so 'go mod tidy' pins
// its dependencies in go.sum.
package tools

import _ "github.com/prometheus/prometheus/cmd/prometheus"
