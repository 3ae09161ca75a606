//go:build tools

// Makes metrics-server's main package part of this module's build list, so go.sum covers it;
// ../build.sh builds sigs.k8s.io/metrics-server/cmd/metrics-server straight from the module.
package tools

import _ "sigs.k8s.io/metrics-server/cmd/metrics-server"
