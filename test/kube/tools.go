//go:build tools

// Makes the Kubernetes main packages part of this module's build list, so go.sum covers them:
// kube-apiserver for the real-API-server tests (build-kube-apiserver.sh), the rest for the local lab
// (lab/kube/build.sh).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
