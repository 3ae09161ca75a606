#!/usr/bin/env bash
# A real Kubernetes cluster on this machine (README, "A real Kubernetes cluster on this machine (the lab)"): a control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) in the host's network namespace and NODES worker nodes, each in a network
# namespace of its own with its own containerd, kubelet and kube-proxy, CoreDNS and metrics-server as pods, a local
# StorageClass, and the project's images imported into every node. Then the shipped chart, installed with helm.
#
#   lab.sh up       build what is missing, start what is not running, install the chart; idempotent.
#                   Its last line is KUBECONFIG=<path>.
#   lab.sh down     stop everything and remove everything up made (processes, mounts, namespaces, links, cgroups,
#                   files); then runs `leftovers`.
#   lab.sh leftovers  prints what of the lab is still on the machine, one line each; nothing when clean.
#   lab.sh env      prints the lab's KUBECONFIG and PATH lines for a shell.
#   lab.sh node-kill N / node-restore N   node-N dies (every process of it killed, its link down) / comes back.
#
# Addresses are all in the benchmark range 198.18.0.0/15 (never 10.x, 172.16-31.x or 192.168.x) and no traffic
# leaves the machine: the nodes hang off a host bridge, the host forwards nothing, the nodes have no default route,
# pods get no masquerade, CoreDNS forwards nowhere, images are never pulled.
#   198.19.0.1            the host's end of the bridge rkl0: the API server
#   198.19.0.(10+i)       node-i
#   198.19.(128+i).0/24   node-i's pods (its CNI bridge cni0 is 198.19.(128+i).1)
#   198.19.64.0/20        Services (kubernetes 198.19.64.1, kube-dns 198.19.64.10)
# The process labs (test/lab/netns.js) use 198.18.K.0/24, so both can run at once.
# Needs root, Linux with cgroup v1 or v2-hybrid mounts, Go (to build the commands), Debian's containerd, runc,
# containernetworking-plugins, iptables, conntrack and mmdebstrap (installed when missing).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
LAB_DIR=${RKL_DIR:-/var/lib/rethinkdb-k8s-lab}
# Fixed paths that containerd's shims, the CNI library and the kubelet use whatever their configuration says: down
# removes one only if the lab made it (recorded at the first up), and otherwise only the lab's entries in it.
SHARED_DIRS="/run/containerd /var/lib/cni /var/lib/kubelet /var/log/containers /usr/libexec/kubernetes /opt/containerd"
# Machine-wide kernel settings the kubelet sets at start (pkg/kubelet/cm/container_manager_linux.go): saved at the
# first up, put back by down, compared by leftovers.
KUBELET_SYSCTLS="vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes"
RUN_DIR=/run/rethinkdb-k8s-lab
NODES=${RKL_NODES:-4}
BIN=$REPO/lab/kube/bin
APISERVER_BIN=$REPO/test/kube/bin/kube-apiserver
HELM_BIN=$REPO/test/helm/bin/helm
IMAGES_DIR=$REPO/lab/images/out
NAMESPACE=${RKL_NAMESPACE:-rethinkdb}
RELEASE=rethinkdb-manager
# The images imported into a node by this run (names of their tars): pods of a changed image are made again.
IMAGES_CHANGED=""
HOST_IP=198.19.0.1
BRIDGE=rkl0
SERVICE_CIDR=198.19.64.0/20
KUBERNETES_SVC_IP=198.19.64.1
DNS_IP=198.19.64.10
CLUSTER_CIDR=198.19.128.0/17
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800
PKI=$LAB_DIR/pki
export KUBECONFIG=$LAB_DIR/admin.kubeconfig
PATH=$BIN:${HELM_BIN%/*}:$PATH
export PATH

# Everything down kills, unmounts and removes is found under LAB_DIR: never let it be a directory of something else.
[[ $(basename "$LAB_DIR") == rethinkdb-k8s-lab* ]] || { echo "lab: RKL_DIR must end in a directory named rethinkdb-k8s-lab*, not $LAB_DIR" >&2; exit 2; }

started=$SECONDS
step() { printf '[lab %4ds] %s\n' "$((SECONDS - started))" "$*"; }
die() { printf 'lab: %s\n' "$*" >&2; exit 1; }
node_ip() { echo "198.19.0.$((10 + $1))"; }
pod_cidr() { echo "198.19.$((128 + $1)).0/24"; }
node_dir() { echo "$LAB_DIR/node-$1"; }
node_run() { echo "$RUN_DIR/node-$1"; }
# Node I's namespaces and the commands in them: lab/kube/node-ns.sh.
NODE_NS=$REPO/lab/kube/node-ns.sh
# A pid file's process is alive only if it is still the lab's (pids wrap: a stale file may name a stranger).
alive() { [[ -f $1 ]] && grep -qF -- "$LAB_DIR" "/proc/$(cat "$1")/cmdline" 2> /dev/null; }
# Node I's namespace holder is alive only if it is that node's (a reused pid may be another node's daemon).
alive_ns() {
  local f=$LAB_DIR/pids/node-ns-$1.pid
  [[ -f $f ]] && [[ $(tr '\0' ' ' < "/proc/$(cat "$f")/cmdline" 2> /dev/null) == "sh $NODE_NS inside $LAB_DIR $1 " ]]
}

# Starts a daemon once: its pid in $LAB_DIR/pids/NAME.pid, its output in $LAB_DIR/logs/NAME.log.
daemon() {
  local name=$1; shift
  local pidfile=$LAB_DIR/pids/$name.pid
  if alive "$pidfile"; then return 0; fi
  setsid "$@" >> "$LAB_DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! > "$pidfile"
}

# The pod network namespaces of the lab's containerds: those whose eth0 has an address of the lab's pod networks.
cni_netns() {
  local n
  for n in /run/netns/cni-*; do
    [[ -e $n ]] && ip -n "${n##*/}" -4 -o addr show 2> /dev/null | grep -q ' inet 198\.19\.' && echo "${n##*/}"
  done
  return 0
}

wait_for() { # wait_for SECONDS WHAT COMMAND...
  local limit=$1 what=$2; shift 2
  local t0=$SECONDS
  until "$@" > /dev/null 2>&1; do
    (( SECONDS - t0 < limit )) || die "$what not ready after ${limit} s (logs: $LAB_DIR/logs/)"
    sleep 1
  done
}

# ---------------------------------------------------------------------------------------------------------- set-up
need_packages() {
  local missing=()
  command -v containerd > /dev/null || missing+=(containerd)
  command -v runc > /dev/null || missing+=(runc)
  [[ -x /usr/lib/cni/bridge ]] || missing+=(containernetworking-plugins)
  command -v iptables > /dev/null || missing+=(iptables)
  command -v conntrack > /dev/null || missing+=(conntrack)
  command -v mmdebstrap > /dev/null || missing+=(mmdebstrap)
  command -v openssl > /dev/null || missing+=(openssl)
  command -v gcc > /dev/null || missing+=(gcc)
  if (( ${#missing[@]} )); then
    step "installing Debian's ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" > /dev/null
  fi
}

build_all() {
  step "binaries (lab/kube/build.sh)"
  bash "$REPO/lab/kube/build.sh" | sed 's/^/    /'
  bash "$REPO/test/helm/build-helm.sh" | sed 's/^/    /'
  step "images (lab/images/build.sh)"
  bash "$REPO/lab/images/build.sh" | sed 's/^/    /'
}

# ------------------------------------------------------------------------------------------------------------ PKI
cert() { # cert NAME CN [O] [SANS] [CA]
  local name=$1 cn=$2 org=${3:-} sans=${4:-} ca=${5:-ca}
  [[ -f $PKI/$name.crt ]] && return 0
  local subj="/CN=$cn"; [[ -n $org ]] && subj="/O=$org$subj"
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$name.key" -out "$PKI/$name.csr" -subj "$subj" 2> /dev/null
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=serverAuth,clientAuth"
    [[ -n $sans ]] && echo "subjectAltName=$sans"
  } > "$PKI/$name.ext"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/$ca.crt" -CAkey "$PKI/$ca.key" -CAcreateserial \
    -out "$PKI/$name.crt" -days 30 -extfile "$PKI/$name.ext" 2> /dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

kubeconfig() { # kubeconfig FILE CERTNAME
  cat > "$1" << EOF
apiVersion: v1
kind: Config
clusters:
  - name: lab
    cluster: { server: "https://$HOST_IP:6443", certificate-authority: "$PKI/ca.crt" }
users:
  - name: lab
    user: { client-certificate: "$PKI/$2.crt", client-key: "$PKI/$2.key" }
contexts:
  - name: lab
    context: { cluster: lab, user: lab }
current-context: lab
EOF
}

make_pki() {
  [[ -f $PKI/ca.crt ]] && [[ -f $LAB_DIR/node-$NODES.kubeconfig ]] && return 0
  step "certificates"
  mkdir -p "$PKI"
  for ca in ca front-proxy-ca; do
    [[ -f $PKI/$ca.crt ]] || openssl req -x509 -newkey rsa:2048 -nodes -keyout "$PKI/$ca.key" -out "$PKI/$ca.crt" \
      -days 30 -subj "/CN=rethinkdb-k8s-lab-$ca" 2> /dev/null
  done
  [[ -f $PKI/sa.key ]] || { openssl genrsa -out "$PKI/sa.key" 2048 2> /dev/null; openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2> /dev/null; }
  cert apiserver kube-apiserver "" \
    "IP:$HOST_IP,IP:$KUBERNETES_SVC_IP,IP:127.0.0.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
  cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  cert front-proxy-client front-proxy-client "" "" front-proxy-ca
  cert admin lab-admin system:masters
  cert controller-manager system:kube-controller-manager
  cert scheduler system:kube-scheduler
  cert kube-proxy system:kube-proxy
  kubeconfig "$LAB_DIR/admin.kubeconfig" admin
  kubeconfig "$LAB_DIR/controller-manager.kubeconfig" controller-manager
  kubeconfig "$LAB_DIR/scheduler.kubeconfig" scheduler
  kubeconfig "$LAB_DIR/kube-proxy.kubeconfig" kube-proxy
  for ((i = 1; i <= NODES; i++)); do
    cert "node-$i" "system:node:node-$i" system:nodes "IP:$(node_ip "$i"),DNS:node-$i"
    kubeconfig "$LAB_DIR/node-$i.kubeconfig" "node-$i"
  done
}

# ---------------------------------------------------------------------------------------------------- control plane
start_control_plane() {
  local etcd_bin=$BIN/etcd
  [[ -x $etcd_bin ]] || etcd_bin=$(command -v etcd) || die "no etcd: lab/kube/build.sh builds it"
  if ! alive "$LAB_DIR/pids/etcd.pid"; then step "etcd ($("$etcd_bin" --version | sed -n 1p))"; fi
  daemon etcd "$etcd_bin" --name=lab --data-dir="$LAB_DIR/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" --advertise-client-urls="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="lab=http://127.0.0.1:$ETCD_PEER_PORT" --log-level=warn --quota-backend-bytes=2147483648
  wait_for 30 etcd curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health"

  if ! alive "$LAB_DIR/pids/kube-apiserver.pid"; then step "kube-apiserver on https://$HOST_IP:6443"; fi
  daemon kube-apiserver "$APISERVER_BIN" \
    --advertise-address="$HOST_IP" --bind-address="$HOST_IP" --secure-port=6443 \
    --etcd-servers="http://127.0.0.1:$ETCD_CLIENT_PORT" \
    --service-cluster-ip-range="$SERVICE_CIDR" --service-node-port-range=30000-32767 \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --client-ca-file="$PKI/ca.crt" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction --allow-privileged=true \
    --requestheader-client-ca-file="$PKI/front-proxy-ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --enable-aggregator-routing=true --profiling=false --v=1
  wait_for 90 kube-apiserver kubectl get --raw /readyz

  if ! alive "$LAB_DIR/pids/kube-controller-manager.pid"; then step "kube-controller-manager and kube-scheduler"; fi
  daemon kube-controller-manager "$BIN/kube-controller-manager" \
    --kubeconfig="$LAB_DIR/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$LAB_DIR/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$LAB_DIR/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10257 --leader-elect=false \
    --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --use-service-account-credentials=true --service-cluster-ip-range="$SERVICE_CIDR" \
    --cluster-cidr="$CLUSTER_CIDR" --allocate-node-cidrs=false --v=1
  daemon kube-scheduler "$BIN/kube-scheduler" \
    --kubeconfig="$LAB_DIR/scheduler.kubeconfig" \
    --authentication-kubeconfig="$LAB_DIR/scheduler.kubeconfig" \
    --authorization-kubeconfig="$LAB_DIR/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=10259 --leader-elect=false --v=1
}

# --------------------------------------------------------------------------------------------------------- network
host_network() {
  # The host forwards nothing (its ip_forward is left as it is): nodes and pods talk over the bridge, and the host
  # only originates and receives. Services are reached from inside the nodes.
  ip link show "$BRIDGE" > /dev/null 2>&1 || ip link add "$BRIDGE" type bridge
  ip addr replace "$HOST_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
}

node_network() {
  local i=$1 ip; ip=$(node_ip "$i")
  local ns=rkl-node-$i veth=rkl-v$i
  # Step by step, each idempotent, so that an up that failed half-way is repaired by the next one.
  [[ -e /run/netns/$ns ]] || ip netns add "$ns"
  ip -n "$ns" link show eth0 > /dev/null 2>&1 || ip link add "$veth" type veth peer name eth0 netns "$ns"
  ip link set "$veth" master "$BRIDGE" up
  ip -n "$ns" addr replace "$ip/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  # No default route: a node (and its pods, routed through it) reaches only the lab's addresses.
  ip -n "$ns" route del default 2> /dev/null || true
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
  ip netns exec "$ns" sysctl -qw net.bridge.bridge-nf-call-iptables=1 2> /dev/null || true
  for ((k = 1; k <= NODES; k++)); do
    (( k == i )) || ip -n "$ns" route replace "$(pod_cidr "$k")" via "$(node_ip "$k")"
  done
  ip route replace "$(pod_cidr "$i")" via "$ip" dev "$BRIDGE"
}

# ----------------------------------------------------------------------------------------------------------- nodes
node_cgroups() {
  local i=$1 h
  for h in /sys/fs/cgroup/*/; do
    h=${h%/}
    [[ $(basename "$h") == unified ]] && continue
    [[ -f $h/cgroup.procs ]] || continue
    mkdir -p "$h/rkl-node-$i"
    if [[ $(basename "$h") == cpuset ]]; then
      cat "$h/cpuset.cpus" > "$h/rkl-node-$i/cpuset.cpus"
      cat "$h/cpuset.mems" > "$h/rkl-node-$i/cpuset.mems"
    fi
  done
}

node_files() {
  local i=$1 d r ip; d=$(node_dir "$i"); r=$(node_run "$i"); ip=$(node_ip "$i")
  mkdir -p "$d/cni/net.d" "$d/cni/ipam" "$d/kubelet" "$d/pod-logs" "$d/containerd" "$r" "$d/volumes"
  cat > "$d/containerd.toml" << EOF
version = 2
root = "$d/containerd"
state = "$r/containerd"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$r/containerd.sock"
[ttrpc]
  address = "$r/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "rkl.local/pause:1"
  restrict_oom_score_adj = true
  enable_selinux = false
  # The pods' network namespaces are mounted in the node's own mount namespace (node-ns.sh): their files go under
  # the node's state directory, which down removes, not into the host's /run/netns, where only empty files would stay.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$r/runc"
EOF
  cat > "$d/cni/net.d/10-rkl.conflist" << EOF
{
  "cniVersion": "1.0.0",
  "name": "rkl",
  "plugins": [
    {
      "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": { "type": "host-local", "dataDir": "$d/cni/ipam", "ranges": [[{ "subnet": "$(pod_cidr "$i")" }]], "routes": [{ "dst": "0.0.0.0/0" }] }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  # The file pods with dnsPolicy Default get: no upstream resolver in the lab.
  echo "search cluster.local" > "$d/resolv.conf"
  cat > "$d/kubelet.yaml" << EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
cgroupDriver: cgroupfs
cgroupRoot: /
# The node's CPU for pods: one CPU, as the lab's story of a small node has it, so that what the node's own cgroup
# uses (its kubelet's "/" in its cgroup namespace) over its allocatable CPU is the monitor's interference signal.
kubeReserved: { cpu: "$(( $(getconf _NPROCESSORS_ONLN) > 1 ? $(getconf _NPROCESSORS_ONLN) - 1 : 0 ))" }
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$r/containerd.sock
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: "$PKI/ca.crt" }
authorization: { mode: Webhook }
clusterDNS: ["$DNS_IP"]
clusterDomain: cluster.local
resolvConf: "$d/resolv.conf"
podCIDR: $(pod_cidr "$i")
podLogsDir: "$d/pod-logs"
volumePluginDir: "$d/volume-plugins"
tlsCertFile: "$PKI/node-$i.crt"
tlsPrivateKeyFile: "$PKI/node-$i.key"
serializeImagePulls: false
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
enforceNodeAllocatable: ["pods"]
maxPods: 60
EOF
  cat > "$d/kube-proxy.yaml" << EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: { kubeconfig: "$LAB_DIR/kube-proxy.kubeconfig" }
hostnameOverride: node-$i
bindAddress: $ip
healthzBindAddress: "$ip:10256"
metricsBindAddress: "$ip:10249"
clusterCIDR: $CLUSTER_CIDR
mode: iptables
conntrack: { maxPerCore: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
EOF
}

start_node() {
  local i=$1 d r; d=$(node_dir "$i"); r=$(node_run "$i")
  node_network "$i"
  node_cgroups "$i"
  node_files "$i"
  if ! alive_ns "$i"; then
    # New namespaces: daemons still running in old ones (a hold killed on its own, or a lab started before them)
    # are stopped first, so that all of the node's daemons run in the new ones.
    local p
    for p in containerd kubelet kube-proxy; do
      if alive "$LAB_DIR/pids/$p-$i.pid"; then kill "$(cat "$LAB_DIR/pids/$p-$i.pid")" 2> /dev/null || true; fi
      rm -f "$LAB_DIR/pids/$p-$i.pid"
    done
    rm -f "$d/namespaces-ready"
    daemon "node-ns-$i" sh "$NODE_NS" hold "$LAB_DIR" "$i"
  fi
  wait_for 10 "node-$i's namespaces" test -f "$d/namespaces-ready"
  daemon "containerd-$i" sh "$NODE_NS" run "$LAB_DIR" "$i" containerd --config "$d/containerd.toml"
  wait_for 30 "node-$i's containerd" ctr --address "$r/containerd.sock" version
  local tar
  for tar in "$IMAGES_DIR"/*.tar; do
    [[ -e $tar ]] || die "no images in $IMAGES_DIR: lab/images/build.sh builds them"
    # Import once per image content: the marker names the tar's digest.
    local mark; mark="$d/imported.$(basename "$tar" .tar).$(stat -c %s-%Y "$tar")"
    [[ -f $mark ]] && continue
    ctr --address "$r/containerd.sock" -n k8s.io images import --no-unpack "$tar" > /dev/null
    rm -f "$d/imported.$(basename "$tar" .tar)."*
    touch "$mark"
    IMAGES_CHANGED="$IMAGES_CHANGED $(basename "$tar" .tar)"
  done
  daemon "kubelet-$i" sh "$NODE_NS" run "$LAB_DIR" "$i" "$BIN/kubelet" \
    --config="$d/kubelet.yaml" --kubeconfig="$LAB_DIR/node-$i.kubeconfig" \
    --hostname-override="node-$i" --node-ip="$(node_ip "$i")" --root-dir="$d/kubelet" --cert-dir="$d/kubelet/pki" --v=1
  daemon "kube-proxy-$i" sh "$NODE_NS" run "$LAB_DIR" "$i" "$BIN/kube-proxy" --config="$d/kube-proxy.yaml" --v=1
}

# ---------------------------------------------------------------------------------------------------------- add-ons
addons() {
  step "add-ons: CoreDNS, metrics-server, the local StorageClass and its volumes"
  local pv="" i k
  for ((i = 1; i <= NODES; i++)); do
    for k in 1 2 3; do
      mkdir -p "$(node_dir "$i")/volumes/pv-$k"
      pv+="---
apiVersion: v1
kind: PersistentVolume
metadata: { name: node-$i-pv-$k, labels: { lab: rethinkdb-k8s } }
spec:
  capacity: { storage: 20Gi }
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: lab-local
  local: { path: \"$(node_dir "$i")/volumes/pv-$k\" }
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{ key: kubernetes.io/hostname, operator: In, values: [node-$i] }]
"
    done
  done
  sed -e "s|@DNS_IP@|$DNS_IP|g" "$REPO/lab/kube/addons.yaml" | kubectl apply -f - > /dev/null
  printf '%s' "$pv" | kubectl apply -f - > /dev/null
}

install_chart() {
  if ! kubectl get namespace "$NAMESPACE" > /dev/null 2>&1; then kubectl create namespace "$NAMESPACE" > /dev/null; fi
  if ! kubectl -n "$NAMESPACE" get secret rethinkdb-admin > /dev/null 2>&1; then
    kubectl -n "$NAMESPACE" create secret generic rethinkdb-admin --from-literal=password="$(openssl rand -base64 24)" > /dev/null
  fi
  # The query gates' shared token: with it the manager holds a table's queries at the gates while it moves the
  # table's primaries (README, "Install on a cluster", step 2).
  if ! kubectl -n "$NAMESPACE" get secret rethinkdb-gate-hold > /dev/null 2>&1; then
    kubectl -n "$NAMESPACE" create secret generic rethinkdb-gate-hold --from-literal=token="$(openssl rand -hex 32)" > /dev/null
  fi
  local status
  # Empty when there is no release (helm status fails: not an error here).
  status=$(helm status "$RELEASE" -n "$NAMESPACE" -o json 2> /dev/null | sed -n 's/.*"status":"\([a-z-]*\)".*/\1/p' | head -n1 || true)
  if [[ -n $status && $status != deployed ]]; then
    step "chart: release $RELEASE is $status; uninstalling it to install again"
    helm uninstall "$RELEASE" -n "$NAMESPACE" --wait > /dev/null
    status=""
  fi
  if [[ -z $status ]] && kubectl -n "$NAMESPACE" get statefulset rethinkdb > /dev/null 2>&1; then
    # Left by the lab test that applies the kustomize base in place of the chart: its objects go (not its
    # Namespace, which keeps the Secrets and the servers' volume claims), then the chart installs as usual.
    step "chart: the kustomize base is applied here; deleting its objects (not the namespace) to install the chart"
    kubectl kustomize "$REPO/deploy/k8s" | awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/(^|\n)kind: Namespace\n/' \
      | kubectl delete --ignore-not-found --wait=true -f - > /dev/null
    # Their pods too: a RethinkDB proxy that joins servers which then all go away does not find them again on their
    # new addresses (seen here: the chart's proxies joined the base's stopping servers, then served no server).
    wait_for 300 "the kustomize base's pods to be gone" \
      sh -c "[ -z \"\$(kubectl -n '$NAMESPACE' get pods -l 'app in (rethinkdb,rethinkdb-proxy,rethinkdb-manager)' -o name)\" ]"
  fi
  local chart=(--namespace "$NAMESPACE" --set namespace.create=false --set manager.image.pullPolicy=Never --set rethinkdb.image.pullPolicy=Never)
  if [[ $status == deployed ]]; then
    # The chart as it is in the work tree (a changed template rolls what it changes), and what the tests and the
    # evaluation change out of band goes back: the manager's replicas, the client pods.
    step "chart: release $RELEASE already installed; helm upgrade, the manager back to 2 replicas, no client pods"
    helm upgrade "$RELEASE" "$REPO/deploy/helm/rethinkdb-k8s-manager" "${chart[@]}" > /dev/null
    kubectl -n "$NAMESPACE" scale deployment/rethinkdb-manager --replicas=2 > /dev/null
    kubectl -n "$NAMESPACE" delete pods -l app=lab-client --ignore-not-found --wait=false > /dev/null
    # An image rebuilt under the same tag reaches running pods only when they are made again.
    if [[ $IMAGES_CHANGED == *manager* ]]; then
      step "the manager's image changed: restarting the manager and the proxies (their gates run it)"
      kubectl -n "$NAMESPACE" rollout restart deployment/rethinkdb-manager deployment/rethinkdb-proxy > /dev/null
    fi
    if [[ $IMAGES_CHANGED == *rethinkdb* ]]; then
      step "the RethinkDB image changed: restarting the StatefulSet"
      kubectl -n "$NAMESPACE" rollout restart statefulset/rethinkdb > /dev/null
    fi
  else
    step "chart: helm install $RELEASE deploy/helm/rethinkdb-k8s-manager (image pull policy Never)"
    helm install "$RELEASE" "$REPO/deploy/helm/rethinkdb-k8s-manager" "${chart[@]}" > /dev/null
  fi
  # Also when the webhook configuration has no CA (made again by an install after the kustomize base's was deleted,
  # the Secret still there): without it the API server skips the webhook (failurePolicy Ignore).
  local ca
  ca=$(kubectl get validatingwebhookconfiguration rethinkdb-manager-eviction -o jsonpath='{.webhooks[0].clientConfig.caBundle}' 2> /dev/null || true)
  if [[ -z $ca ]] || ! kubectl -n "$NAMESPACE" get secret rethinkdb-manager-webhook-tls > /dev/null 2>&1; then
    step "webhook certificate (deploy/webhook-cert.sh)"
    NAMESPACE=$NAMESPACE sh "$REPO/deploy/webhook-cert.sh" | sed 's/^/    /'
  fi
  step "waiting for the chart's pods to be Ready"
  kubectl -n "$NAMESPACE" rollout status statefulset/rethinkdb --timeout=600s | sed 's/^/    /'
  kubectl -n "$NAMESPACE" rollout status deployment/rethinkdb-proxy --timeout=300s | sed 's/^/    /'
  kubectl -n "$NAMESPACE" rollout status deployment/rethinkdb-manager --timeout=300s | sed 's/^/    /'
}

up() {
  [[ $(id -u) == 0 ]] || die "the lab needs root (network namespaces, cgroups, mounts)"
  [[ -d /sys/fs/cgroup/cpu && -d /sys/fs/cgroup/memory ]] || die "the lab runs its kubelets on cgroup v1 (or hybrid) mounts, and /sys/fs/cgroup has no cpu and memory hierarchies"
  need_packages
  [[ ${RKL_SKIP_BUILD:-} == 1 ]] || build_all
  mkdir -p "$LAB_DIR/pids" "$LAB_DIR/logs" "$RUN_DIR"
  # Before any kubelet ran: what down puts back.
  local d
  if [[ ! -f $LAB_DIR/made-dirs ]]; then
    for d in $SHARED_DIRS; do [[ -e $d ]] || echo "$d"; done > "$LAB_DIR/made-dirs"
  fi
  if [[ ! -f $LAB_DIR/sysctls.before ]]; then
    for d in $KUBELET_SYSCTLS; do echo "$d=$(sysctl -n "$d")"; done > "$LAB_DIR/sysctls.before"
  fi
  make_pki
  host_network
  start_control_plane
  step "nodes: $NODES, each in its network namespace with its containerd, kubelet and kube-proxy"
  for ((i = 1; i <= NODES; i++)); do start_node "$i"; done
  local n
  for ((i = 1; i <= NODES; i++)); do
    wait_for 120 "node-$i" sh -c "kubectl get node node-$i -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  done
  n=$(kubectl get nodes --no-headers | wc -l)
  step "nodes Ready: $n"
  # A node left cordoned (a drain that a test or an evaluation did not see through) would keep its pods Pending.
  for ((i = 1; i <= NODES; i++)); do kubectl uncordon "node-$i" > /dev/null; done
  addons
  kubectl -n kube-system rollout status deployment/coredns --timeout=180s | sed 's/^/    /'
  kubectl -n kube-system rollout status deployment/metrics-server --timeout=180s | sed 's/^/    /'
  [[ ${RKL_NO_CHART:-} == 1 ]] || install_chart
  step "up"
  echo "KUBECONFIG=$KUBECONFIG"
}

# ------------------------------------------------------------------------------------------------------- tear-down
lab_pids() { # every process of the lab: daemons and shims (their command lines name the lab's paths), containers (by cgroup)
  {
    local f
    for f in "$LAB_DIR"/pids/*.pid; do alive "$f" && cat "$f"; done
    local h
    for h in /sys/fs/cgroup/*/rkl-node-*; do
      [[ -d $h ]] && find "$h" -name cgroup.procs -exec cat {} + 2> /dev/null
    done
    pgrep -f -- "$RUN_DIR/|$LAB_DIR/" || true
  } | sort -un | grep -vx "$$" || true
}

down() {
  [[ $(id -u) == 0 ]] || die "the lab needs root"
  step "stopping processes"
  for ((i = 1; i <= 16; i++)); do
    if [[ -e /run/netns/rkl-node-$i ]] && [[ -x $BIN/kube-proxy ]]; then
      nsenter --net="/run/netns/rkl-node-$i" "$BIN/kube-proxy" --cleanup > /dev/null 2>&1 || true
    fi
  done
  local pids round
  for round in TERM TERM KILL KILL KILL; do
    pids=$(lab_pids)
    [[ -z $pids ]] && break
    # shellcheck disable=SC2086
    kill -s "$round" $pids 2> /dev/null || true
    sleep 2
  done
  step "unmounting"
  local m
  for m in $(findmnt -rn -o TARGET | grep -E "^($LAB_DIR|$RUN_DIR)(/|$)" | sort -r); do umount -l "$m" 2> /dev/null || true; done
  step "removing network namespaces, links and routes"
  for m in $(cni_netns); do ip netns delete "$m" 2> /dev/null || true; done
  for m in /run/netns/rkl-node-*; do [[ -e $m ]] && ip netns delete "${m##*/}"; done
  ip link show "$BRIDGE" > /dev/null 2>&1 && ip link delete "$BRIDGE"
  for m in $(ip -o link show | awk -F': ' '{print $2}' | grep '^rkl-v' | cut -d@ -f1 || true); do ip link delete "$m" 2> /dev/null || true; done
  if [[ -f $LAB_DIR/ip_forward.before ]]; then sysctl -qw "net.ipv4.ip_forward=$(cat "$LAB_DIR/ip_forward.before")"; fi
  step "putting back the kernel settings the kubelets changed"
  local saved=""
  if [[ -f $LAB_DIR/sysctls.before ]]; then
    saved=$(cat "$LAB_DIR/sysctls.before")
    while IFS='=' read -r key value; do sysctl -qw "$key=$value"; done <<< "$saved"
  fi
  step "removing cgroups"
  local h
  for h in /sys/fs/cgroup/*/rkl-node-*; do
    if [[ -d $h ]]; then find "$h" -depth -type d -exec rmdir {} + 2> /dev/null || true; fi
  done
  # In shared directories the lab did not make, only its own entries: log links into it, its CNI results.
  find /var/log/containers -maxdepth 1 -lname "$LAB_DIR/*" -delete 2> /dev/null || true
  find /var/lib/cni/results -maxdepth 1 -name 'rkl-*' -delete 2> /dev/null || true
  if [[ -f $LAB_DIR/made-dirs ]]; then while read -r m; do [[ -n $m ]] && rm -rf --one-file-system "$m"; done < "$LAB_DIR/made-dirs"; fi
  if findmnt -rn -o TARGET | grep -qE "^($LAB_DIR|$RUN_DIR)(/|$)"; then die "mounts remain under $LAB_DIR or $RUN_DIR: not removing them"; fi
  step "removing $LAB_DIR and $RUN_DIR"
  rm -rf --one-file-system "$LAB_DIR" "$RUN_DIR"
  local left key value
  left=$(leftovers)
  while IFS='=' read -r key value; do
    [[ -n $key && $(sysctl -n "$key") != "$value" ]] && left+=$'\n'"kernel setting $key is $(sysctl -n "$key"), was $value"
  done <<< "$saved"
  left=$(sed '/^$/d' <<< "$left")
  if [[ -n $left ]]; then printf '%s\n' "$left" >&2; die "down left the above behind"; fi
  step "down: nothing left"
}

leftovers() {
  local p
  for p in $(lab_pids); do echo "process $p: $(tr '\0' ' ' < "/proc/$p/cmdline" 2> /dev/null | cut -c1-120)"; done
  findmnt -rn -o TARGET | grep -E "^($LAB_DIR|$RUN_DIR)(/|$)" | sed 's/^/mount /' || true
  for p in /run/netns/rkl-*; do [[ -e $p ]] && echo "netns ${p##*/}"; done
  for p in $(cni_netns); do echo "netns $p (a pod's)"; done
  # || true: find fails where the directory does not exist (pipefail, set -e), which is the clean case.
  find /var/log/containers -maxdepth 1 -lname "$LAB_DIR/*" 2> /dev/null | sed 's/^/log link /' || true
  find /var/lib/cni/results -maxdepth 1 -name 'rkl-*' 2> /dev/null | sed 's/^/CNI result /' || true
  ip -o link show | awk -F': ' '{print $2}' | grep -E "^(rkl|$BRIDGE)" | sed 's/^/link /' || true
  ip route show | grep -E '^198\.19\.' | sed 's/^/route /' || true
  ip -o addr show | grep -E ' 198\.19\.' | awk '{print "address " $2 " " $4}' || true
  for p in /sys/fs/cgroup/*/rkl-node-*; do [[ -e $p ]] && echo "cgroup $p"; done
  [[ -e $LAB_DIR ]] && echo "directory $LAB_DIR"
  [[ -e $RUN_DIR ]] && echo "directory $RUN_DIR"
  return 0
}

# A node dying: its kubelet, kube-proxy and containerd, its shims and every container killed (SIGKILL), and its link
# to the bridge down, so that nothing reaches it and it reaches nothing. node-restore brings the link and the
# daemons back; the kubelet then restarts the node's pods as after a power cut.
node_kill() {
  local i=$1 p pids
  [[ -e /run/netns/rkl-node-$i ]] || die "no node-$i"
  ip link set "rkl-v$i" down
  pids=$(
    for p in kubelet kube-proxy containerd; do alive "$LAB_DIR/pids/$p-$i.pid" && cat "$LAB_DIR/pids/$p-$i.pid"; done
    pgrep -f -- "$RUN_DIR/node-$i/|$LAB_DIR/node-$i/" || true
    for p in /sys/fs/cgroup/*/rkl-node-"$i"; do [[ -d $p ]] && find "$p" -name cgroup.procs -exec cat {} + 2> /dev/null; done
  )
  # shellcheck disable=SC2086
  # A process gone between the listing and the kill is no failure (set -e).
  [[ -n $pids ]] && { kill -KILL $pids 2> /dev/null || true; }
  rm -f "$LAB_DIR/pids/kubelet-$i.pid" "$LAB_DIR/pids/kube-proxy-$i.pid" "$LAB_DIR/pids/containerd-$i.pid" "$LAB_DIR/pids/node-ns-$i.pid"
  step "node-$i killed: its link is down, $(wc -w <<< "$pids") processes killed"
}

node_restore() {
  local i=$1
  [[ -e /run/netns/rkl-node-$i ]] || die "no node-$i"
  ip link set "rkl-v$i" up
  start_node "$i"
  step "node-$i restored: its link is up, containerd, kubelet and kube-proxy started"
}

case ${1:-} in
  up) up ;;
  down) down ;;
  leftovers) leftovers ;;
  node-kill) node_kill "${2:?node number}" ;;
  node-restore) node_restore "${2:?node number}" ;;
  env) echo "export KUBECONFIG=$KUBECONFIG"; echo "export PATH=$BIN:$(dirname "$HELM_BIN"):\$PATH" ;;
  *) echo "usage: lab.sh up|down|leftovers|env|node-kill N|node-restore N" >&2; exit 2 ;;
esac
