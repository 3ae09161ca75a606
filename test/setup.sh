#!/usr/bin/env bash
# The test command's own set-up (npm test runs it first, as pretest), so that `npm test` works on a fresh machine:
# Debian's shellcheck (lints deploy/k8s's scripts), etcd-server (for the real kube-apiserver) and chromium (the status
# page's browser tests, through playwright-core, which downloads no browser); promtool taken out of Debian's
# prometheus package (lints /metrics and the alert rules); then kube-apiserver and helm built from their pinned Go
# modules (test/kube, test/helm), and the Kubernetes lab's other commands and images (lab/kube/build.sh,
# lab/images/build.sh); about 25 minutes the first time on 2 cores, seconds when up to date. Installing needs root;
# what is already there is not installed again.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { printf 'test set-up: %s\n' "$*"; }
missing=()
command -v shellcheck > /dev/null || missing+=(shellcheck)
command -v etcd > /dev/null || missing+=(etcd-server)
[ -x /usr/bin/chromium ] || missing+=(chromium)
# The Kubernetes lab (lab/kube/lab.sh, test/kube-lab/): a containerd, runc and the CNI plugins per node, iptables and
# conntrack for kube-proxy, mmdebstrap and gcc for the images (lab/images/build.sh).
command -v containerd > /dev/null || missing+=(containerd)
command -v runc > /dev/null || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables > /dev/null || missing+=(iptables)
command -v conntrack > /dev/null || missing+=(conntrack)
command -v mmdebstrap > /dev/null || missing+=(mmdebstrap)
command -v gcc > /dev/null || missing+=(gcc libc6-dev)
need_promtool=false
command -v promtool > /dev/null || need_promtool=true
if [ "${#missing[@]}" -gt 0 ] || [ "$need_promtool" = true ]; then
  if [ "$(id -u)" -ne 0 ]; then
    wanted="${missing[*]}"
    [ "$need_promtool" = true ] && wanted="$wanted promtool"
    echo "test set-up: missing ${wanted# }; run npm test as root once (it installs them with apt-get), or install them yourself" >&2
    exit 1
  fi
  step "apt-get update"
  apt-get update -qq
fi
if [ "${#missing[@]}" -gt 0 ]; then
  step "installing Debian's ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
fi
# Only that binary: installing the package would add its web UI's libraries and start a Prometheus server wherever
# init scripts run. Download and extraction took 1.6 s on this machine.
if [ "$need_promtool" = true ]; then
  step "installing promtool from Debian's prometheus package"
  deb_dir=$(mktemp -d)
  (cd "$deb_dir" && apt-get download -qq prometheus 2> /dev/null)
  dpkg-deb --fsys-tarfile "$deb_dir"/prometheus_*.deb | tar -xO ./usr/bin/promtool > /usr/local/bin/promtool
  chmod 755 /usr/local/bin/promtool
  rm -rf "$deb_dir"
fi
step "$(promtool --version | sed -n 1p)"
step "$(etcd --version | sed -n 1p)"  # sed reads to the end: head would let etcd die of SIGPIPE under pipefail
step "$(go version)"
# The official Python driver, for the query gate's corpus (test/real/gate.test.js), in a virtualenv of its own.
python_venv=test/.python-rethinkdb
if ! "$python_venv/bin/python" -c 'import rethinkdb' 2> /dev/null; then
  step "the official Python driver (rethinkdb 2.4.10.post1 from PyPI) in $python_venv"
  python3 -m venv "$python_venv"
  "$python_venv/bin/pip" install -q --disable-pip-version-check rethinkdb==2.4.10.post1
fi
step "kube-apiserver (test/kube/build-kube-apiserver.sh)"
bash test/kube/build-kube-apiserver.sh
step "helm (test/helm/build-helm.sh)"
bash test/helm/build-helm.sh
step "the Kubernetes lab's commands, etcd, CoreDNS and metrics-server (lab/kube/build.sh)"
bash lab/kube/build.sh
step "the lab's images (lab/images/build.sh)"
bash lab/images/build.sh
step "done"
