//go:build tools

// Package tools names the command tests/kube/build builds (etcd), so 'go mod tidy' pins its
// dependencies in go.sum.
package tools

import _ "go.etcd.io/etcd/server/v3"
