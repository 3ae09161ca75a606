//go:build tools

// Makes the kube-apiserver main package part of this module's build list, so go.sum covers it.
package tools

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
