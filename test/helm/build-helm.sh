#!/usr/bin/env bash
# Builds test/helm/bin/helm from the helm.sh/helm/v3 version pinned in test/helm/go.mod, only when the binary is
# missing or was built from another go.mod/go.sum/script. Go's own build cache (GOCACHE) and module cache are left
# where they are, so a rebuild after the first one takes seconds.
set -euo pipefail
cd "$(dirname "$0")"

binary=bin/helm
stamp=bin/helm.stamp
version=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" { print $3 }' go.mod)
wanted=$(cat go.mod go.sum "$(basename "$0")" | sha256sum | cut -d' ' -f1)

if [[ -x $binary && -f $stamp && $(cat "$stamp") == "$wanted" ]]; then
  echo "helm $version: up to date ($PWD/$binary)"
  exit 0
fi

if ! command -v go > /dev/null; then
  echo "helm $version is needed by the chart tests (test/deploy/helm-chart.test.js) and is built from source," >&2
  echo "but 'go' is not on PATH. Install Go >= 1.24 (or put the 'go' command on PATH) and run npm test again." >&2
  exit 1
fi

reason="it is missing"
[[ -x $binary ]] && reason="test/helm/go.mod, go.sum or this script changed since it was built"
cat <<MESSAGE
Building helm $version for the chart tests, because $reason.
  From: the helm.sh/helm/v3 module pinned in test/helm/go.mod.
  Why the first build takes a while: it downloads Helm's Go modules and compiles its packages (see the README,
  "Install with Helm"). Later builds reuse Go's module cache ($(go env GOMODCACHE))
  and build cache ($(go env GOCACHE)) and take seconds.
MESSAGE

mkdir -p bin
started=$SECONDS
# -mod=readonly: go.mod and go.sum are the pins; a build never edits them. -trimpath: no local paths in the binary.
# The -X flags are the ones Helm's Makefile sets: `helm version` reports the release, and the Kubernetes version
# that `helm lint` and `helm template` assume (.Capabilities.KubeVersion) is that of Helm's k8s.io/client-go
# (v0.34.x: Kubernetes 1.34, as the test kube-apiserver), not the 1.20 compiled in.
k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2] }' go.mod)
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$version -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
go build -mod=readonly -trimpath -buildvcs=false -ldflags="$ldflags" -o "$binary.tmp" helm.sh/helm/v3/cmd/helm
mv "$binary.tmp" "$binary"
echo "$wanted" > "$stamp"
echo "Built helm $version in $((SECONDS - started)) s: $PWD/$binary"
