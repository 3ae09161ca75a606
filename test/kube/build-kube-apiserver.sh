#!/usr/bin/env bash
# Builds test/kube/bin/kube-apiserver from the k8s.io/kubernetes version pinned in test/kube/go.mod, only when
# the binary is missing or was built from another go.mod/go.sum/script. Go's own build cache (GOCACHE) and
# module cache are left where they are, so a rebuild after the first one takes seconds to a minute.
set -euo pipefail
cd "$(dirname "$0")"

binary=bin/kube-apiserver
stamp=bin/kube-apiserver.stamp
version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' go.mod)
wanted=$(cat go.mod go.sum "$(basename "$0")" | sha256sum | cut -d' ' -f1)

if [[ -x $binary && -f $stamp && $(cat "$stamp") == "$wanted" ]]; then
  echo "kube-apiserver $version: up to date ($PWD/$binary)"
  exit 0
fi

if ! command -v go > /dev/null; then
  echo "kube-apiserver $version is needed by the real-API-server tests (test/kube-real/) and is built from source," >&2
  echo "but 'go' is not on PATH. Install Go >= 1.24 (or put the 'go' command on PATH) and run npm test again." >&2
  exit 1
fi

reason="it is missing"
[[ -x $binary ]] && reason="test/kube/go.mod, go.sum or this script changed since it was built"
cat <<EOF
Building kube-apiserver $version for the real-API-server tests, because $reason.
  From: the k8s.io/kubernetes module pinned in test/kube/go.mod (each k8s.io staging module replaced by its v0.x release).
  Why the first build is slow: it downloads ~120 Go modules and compiles ~1,950 packages; on 2 cores that
  takes about 8 minutes. Later builds reuse Go's module cache ($(go env GOMODCACHE))
  and build cache ($(go env GOCACHE)) and take seconds to a minute.
EOF

mkdir -p bin
started=$SECONDS
# -mod=readonly: go.mod and go.sum are the pins; a build never edits them. -trimpath: no local paths in the binary.
# The -X flags give /version the release it was built from, as Kubernetes' own build does (else v0.0.0-master).
minor=$(cut -d. -f2 <<< "$version")
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
go build -mod=readonly -trimpath -buildvcs=false -ldflags="$ldflags" -o "$binary.tmp" k8s.io/kubernetes/cmd/kube-apiserver
mv "$binary.tmp" "$binary"
echo "$wanted" > "$stamp"
echo "Built kube-apiserver $version in $((SECONDS - started)) s: $PWD/$binary"
