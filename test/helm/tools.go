//go:build tools

// Makes the helm main package part of this module's build list, so go.sum covers it.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
