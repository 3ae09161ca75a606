#!/bin/sh
# One lab node's namespaces, as a machine of its own would have them: its network namespace (made by lab.sh), and a
# cgroup namespace and a mount namespace rooted at its cgroups /rkl-node-I, so that its kubelet's cAdvisor measures
# the node's own CPU and memory (what the kubelet reports for "/", and so metrics-server's NodeMetrics), not the whole
# machine's. Its containerd, kubelet and kube-proxy run in them; a process of lab.sh's keeps them.
#
#   node-ns.sh hold LAB_DIR I         become the process that keeps node I's namespaces (lab.sh starts it as a daemon)
#   node-ns.sh run LAB_DIR I CMD...   run CMD in node I's cgroups and namespaces
#
# Inside, each cgroup v1 hierarchy is mounted again, so that /sys/fs/cgroup/<h> shows the node's cgroup as its root,
# as a container runtime shows a node of kind (unmounted first: mounting over it fails with EBUSY). The mount namespace is private: the mounts the kubelet and containerd
# make (volumes, root file systems, pods' network namespaces) stay in it and go with it when the node dies.
set -eu
mode=$1 lab=$2 i=$3
shift 3
into_node_cgroups() {
  for f in /sys/fs/cgroup/*/rkl-node-"$i"/cgroup.procs; do echo $$ > "$f"; done
}
case $mode in
  hold)
    into_node_cgroups
    exec nsenter --net="/run/netns/rkl-node-$i" unshare --cgroup --mount --propagation private sh "$0" inside "$lab" "$i"
    ;;
  inside)
    for h in /sys/fs/cgroup/*; do
      [ "${h##*/}" = unified ] && continue
      # The last mount on that path is the one seen there.
      opts=$(awk -v m="$h" '$5 == m && $(NF - 2) == "cgroup" { print $NF }' /proc/self/mountinfo | tail -n1)
      [ -n "$opts" ] || continue
      umount "$h"
      mount -t cgroup -o "$opts" cgroup "$h"
    done
    touch "$lab/node-$i/namespaces-ready"
    # Not exec: the command line keeps the lab's path, which is how lab.sh knows the process is its own.
    while :; do sleep 3600; done
    ;;
  run)
    into_node_cgroups
    exec nsenter --target "$(cat "$lab/pids/node-ns-$i.pid")" --net --mount --cgroup -- "$@"
    ;;
  *) echo "usage: node-ns.sh hold|run LAB_DIR I [CMD...]" >&2; exit 2 ;;
esac
