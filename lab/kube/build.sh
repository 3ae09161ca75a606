#!/usr/bin/env bash
# Builds into lab/kube/bin/ every binary the local Kubernetes lab runs, from pinned Go modules only:
#   kube-apiserver                    test/kube/build-kube-apiserver.sh builds it into test/kube/bin/; linked here
#   kubelet, kube-proxy, kube-controller-manager, kube-scheduler, kubectl
#                                     the k8s.io/kubernetes version pinned in test/kube/go.mod, as kube-apiserver
#   etcd                              go.etcd.io/etcd/server/v3, pinned in lab/kube/etcd/go.mod
#   coredns                           github.com/coredns/coredns (default plugins), pinned in lab/kube/coredns/go.mod
#   metrics-server                    sigs.k8s.io/metrics-server, pinned in lab/kube/metrics-server/go.mod
# Each binary is rebuilt only when it is missing or its stamp (a sha256 over its module's go.mod/go.sum/main.go
# and this script) differs. Go's own build cache (GOCACHE) and module cache are left where they are, so the
# first build takes 10-15 minutes on 2 cores and a later one seconds to a minute per changed binary.
set -euo pipefail
cd "$(dirname "$0")"

lab=$PWD
bin=$lab/bin
kube_module=$(cd ../../test/kube && pwd)
script=$lab/$(basename "$0")

if ! command -v go > /dev/null; then
  echo "lab/kube/build.sh builds the local Kubernetes lab's binaries (kubelet, etcd, coredns, ...) from source," >&2
  echo "but 'go' is not on PATH. Install Go >= 1.24 (or put the 'go' command on PATH) and run it again." >&2
  exit 1
fi

mkdir -p "$bin"
total_started=$SECONDS
built=0

# The version a go.mod requires of a module, e.g. `required_version etcd/go.mod go.etcd.io/etcd/server/v3`.
required_version() {
  awk -v module="$2" '($1 == "require" && $2 == module) { print $3 } ($1 == module && $0 !~ /=>/) { print $2 }' "$1" |
    head -n1
}

# The commit a module version was tagged at, if the module cache recorded it (the proxy's .info "Origin");
# empty otherwise. Only reads files: used for the version -X flags the projects' own builds set from git.
origin_commit() {
  local escaped info
  # shellcheck disable=SC2001 # \L (lower-case) has no parameter-expansion equivalent
  escaped=$(sed 's/[A-Z]/!\L&/g' <<< "$1") # the module cache's case-encoding: A -> !a
  info=$(go env GOMODCACHE)/cache/download/$escaped/@v/$2.info
  if [[ -f $info ]]; then
    sed -n 's/.*"Hash":"\([0-9a-f]\{7\}\)[0-9a-f]*".*/\1/p' "$info"
  fi
}

# build NAME VERSION MODULE_DIR PACKAGE CGO_ENABLED LDFLAGS STAMPED_FILE...
# Builds PACKAGE in MODULE_DIR into bin/NAME unless bin/NAME.stamp matches the STAMPED_FILEs and this script.
# CGO_ENABLED empty: Go's default (as build-kube-apiserver.sh, so both share the build cache).
build() {
  local name=$1 version=$2 dir=$3 package=$4 cgo=$5 ldflags=$6
  shift 6
  local binary=$bin/$name stamp=$bin/$name.stamp wanted started
  wanted=$(cat "$@" "$script" | sha256sum | cut -d' ' -f1)
  if [[ -x $binary && -f $stamp && $(cat "$stamp") == "$wanted" ]]; then
    echo "$name $version: up to date ($binary)"
    return
  fi
  local reason="it is missing"
  [[ -x $binary ]] && reason="its module's go.mod, go.sum or main file, or build.sh, changed since it was built"
  local what=$package
  [[ $package == . ]] && what="lab/kube/${dir##*/}/main.go"
  echo "$name $version: building $what, because $reason ..."
  started=$SECONDS
  rm -f "$stamp"
  # -mod=readonly: go.mod and go.sum are the pins; a build never edits them. -trimpath: no local paths in the binary.
  if ! (cd "$dir" && env ${cgo:+CGO_ENABLED=$cgo} go build -mod=readonly -trimpath -buildvcs=false \
    -ldflags="$ldflags" -o "$binary.tmp" "$package"); then
    rm -f "$binary.tmp"
    echo "FAILED: building $name $version ($what in $dir); the go errors are above." >&2
    echo "Built $built binaries before it; total $((SECONDS - total_started)) s." >&2
    exit 1
  fi
  mv "$binary.tmp" "$binary"
  echo "$wanted" > "$stamp"
  built=$((built + 1))
  echo "$name $version: built in $((SECONDS - started)) s ($binary)"
}

# kube-apiserver: its own script (the real-API-server tests use it too) and stamp; bin/kube-apiserver links to it.
started=$SECONDS
if ! bash "$kube_module/build-kube-apiserver.sh"; then
  echo "FAILED: test/kube/build-kube-apiserver.sh; its errors are above." >&2
  exit 1
fi
ln -sfn ../../../test/kube/bin/kube-apiserver "$bin/kube-apiserver"
echo "kube-apiserver: $((SECONDS - started)) s ($bin/kube-apiserver -> $kube_module/bin/kube-apiserver)"

# The other Kubernetes commands: the same module, flags and -X version flags as build-kube-apiserver.sh.
kube_version=$(required_version "$kube_module/go.mod" k8s.io/kubernetes)
kube_minor=$(cut -d. -f2 <<< "$kube_version")
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$kube_minor -X $pkg.gitTreeState=clean"
done
for name in kubelet kube-proxy kube-controller-manager kube-scheduler kubectl; do
  build "$name" "$kube_version" "$kube_module" "k8s.io/kubernetes/cmd/$name" "" "$kube_ldflags" \
    "$kube_module/go.mod" "$kube_module/go.sum"
done

# etcd: static, as etcd's own build (scripts/build_lib.sh), which also sets the Git SHA that --version prints.
etcd_version=$(required_version etcd/go.mod go.etcd.io/etcd/server/v3)
etcd_ldflags="-s -w"
etcd_commit=$(origin_commit go.etcd.io/etcd/api/v3 "$(required_version etcd/go.mod go.etcd.io/etcd/api/v3)")
[[ -n $etcd_commit ]] && etcd_ldflags+=" -X go.etcd.io/etcd/api/v3/version.GitSHA=$etcd_commit"
build etcd "$etcd_version" "$lab/etcd" . 0 "$etcd_ldflags" etcd/go.mod etcd/go.sum etcd/main.go

# coredns: static, to run alone in an empty image. CoreDNS's Makefile sets GitCommit to `git describe --always`,
# which on a release tag is the tag itself.
coredns_version=$(required_version coredns/go.mod github.com/coredns/coredns)
build coredns "$coredns_version" "$lab/coredns" . 0 \
  "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$coredns_version" \
  coredns/go.mod coredns/go.sum coredns/main.go

# metrics-server: static, to run alone in an empty image; its Makefile's version -X flags (--version prints gitVersion).
ms_version=$(required_version metrics-server/go.mod sigs.k8s.io/metrics-server)
ms_ldflags="-s -w -X k8s.io/client-go/pkg/version.gitVersion=$ms_version"
ms_commit=$(origin_commit sigs.k8s.io/metrics-server "$ms_version")
[[ -n $ms_commit ]] && ms_ldflags+=" -X k8s.io/client-go/pkg/version.gitCommit=$ms_commit"
build metrics-server "$ms_version" "$lab/metrics-server" sigs.k8s.io/metrics-server/cmd/metrics-server 0 \
  "$ms_ldflags" metrics-server/go.mod metrics-server/go.sum metrics-server/tools.go

echo "All lab binaries are in $bin ($built built); total $((SECONDS - total_started)) s."
