// The Kubernetes port of the manager in the lab: there is no kubelet or metrics-server here, so the lab's servers
// are its pods (rethinkdb-i on node-i) and the metrics API is computed from the CPU nodes' cgroups
// (./cpu-nodes.js), as cAdvisor computes it: CPU cores used since the previous read. It has the adapter's shapes
// (src/kubernetes/kube-adapter.js) for what the manager's events, node watch and monitor call; scaling the
// StatefulSet is refused (the lab cannot start pods by itself). Without CPU nodes it has no metrics API.
// Nodes can be cordoned (setNodeUnschedulable), as kubectl cordon does, and watched (watchNodes).

import { AppError } from '../../src/errors.js';
import { createNodeCordons } from '../../src/sandbox/node-cordons.js';

export function createLabKube(cluster, { now = () => performance.now() } = {}) {
  const { cpu } = cluster;
  const needCpu = () => {
    if (!cpu) throw new AppError('KUBERNETES_UNAVAILABLE', 'the lab has no metrics API: start the cluster with coresPerNode (CPU nodes)');
  };
  const annotations = new Map();
  const last = new Map();
  const cordons = createNodeCordons();

  const pod = (s) => ({
    name: s.hostname, uid: null, nodeName: `node-${s.index}`, podIp: s.host, hostname: s.hostname, phase: 'Running', ready: true,
    annotations: { ...(annotations.get(s.hostname) ?? {}) }, cpuRequestCores: null, cpuLimitCores: null,
  });
  const running = () => cluster.servers.filter((s) => cluster.running(s.index));

  // Cores used by node-i (or its pod) since the previous read of the same series; 0 on the first read.
  function rate(key, ns) {
    const t = now();
    const before = last.get(key);
    last.set(key, { t, ns });
    return before && t > before.t ? (ns - before.ns) / 1e6 / (t - before.t) : 0;
  }

  return {
    async getPod(name) {
      const s = running().find((x) => x.hostname === name);
      if (!s) throw new AppError('NOT_FOUND', `pod ${name} not found`);
      return pod(s);
    },
    listRethinkDbPods: async () => running().map(pod),
    listRethinkDbPodsOnNode: async (node) => running().filter((s) => `node-${s.index}` === node).map(pod),
    nodeExists: async (node) => cluster.servers.some((s) => `node-${s.index}` === node),
    getNode: async (name) => ({ name, allocatableCpuCores: cpu?.coresPerNode ?? null }),
    async listPodMetrics() {
      needCpu();
      return running().map((s) => ({ name: s.hostname, cpuCores: rate(`pod-${s.index}`, cpu.usage(s.index).podNs) }));
    },
    async listNodeMetrics() {
      needCpu();
      return cluster.servers.map((s) => ({ name: `node-${s.index}`, cpuCores: rate(`node-${s.index}`, cpu.usage(s.index).nodeNs) }));
    },
    watchNodes: (watcher) => cordons.watch(watcher, cluster.servers.map((s) => `node-${s.index}`)),
    setNodeUnschedulable: (name, value) => cordons.set(name, value),
    getStatefulSetScale: async () => ({ replicas: cluster.servers.length, currentReplicas: running().length }),
    async patchStatefulSetScale() {
      throw new AppError('KUBERNETES_UNAVAILABLE', 'the lab cannot scale: it has no kubelet to start pods');
    },
    async annotatePod(name, values) {
      const merged = { ...(annotations.get(name) ?? {}), ...values };
      for (const [k, v] of Object.entries(values)) if (v === null) delete merged[k];
      annotations.set(name, merged);
      return { name, annotations: merged };
    },
    createPodEvent: async () => null,
  };
}
