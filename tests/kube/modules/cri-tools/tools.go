//go:build tools

// Package tools names the command tests/kube/build builds (crictl), so 'go mod tidy' pins its
// dependencies in go.sum.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
