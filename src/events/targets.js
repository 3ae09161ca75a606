// What an event or an operator's command names (a pod, a node's pods, a server by name or id), resolved to
// RethinkDB servers on one read of the cluster, which the caller then decides on. A server in an intent is
// { id, name, pod }.

import { appError } from '../errors.js';
import { findServerForPod, podNameForServer, resolveServer } from '../cluster/cluster-model.js';

export function createTargets({ store, kube, config }) {
  const overrides = config.podServerOverrides;

  // The pod, or POD_NOT_FOUND naming the RethinkDB pods there are; null when there is no Kubernetes API to ask.
  async function existingPod(podName) {
    if (!kube) return null;
    return kube.getPod(podName).catch(async (err) => {
      if (err.code !== 'NOT_FOUND') throw err;
      const pods = await kube.listRethinkDbPods().catch(() => null);
      const known = pods === null ? null : pods.map((p) => p.name).sort().join(', ') || 'none';
      throw appError('podNotFound', { pod: podName, namespace: config.kubernetes.namespace, known });
    });
  }

  // The pod names the servers of `cluster` give (their hostnames, or POD_SERVER_OVERRIDES), for a message.
  const knownPods = (cluster) => cluster.servers.map((s) => podNameForServer(s, overrides)).filter(Boolean).sort().join(', ') || 'none';

  // pods: [{ name, podIp }]. By hostname (= pod name in a StatefulSet), canonical address, pod IP, or override.
  function serversOf(cluster, pods) {
    return pods.map((p) => {
      const server = findServerForPod(cluster, { podName: p.name, podIp: p.podIp ?? null, overrides });
      return { pod: p.name, server: server ? { id: server.id, name: server.name, pod: p.name } : null };
    });
  }

  // The pods' servers: { cluster, targets: [{ pod, server or null }] }.
  async function serversForPods(podNames) {
    const pods = await Promise.all(podNames.map(existingPod));
    const cluster = await store.readCluster();
    return { cluster, targets: serversOf(cluster, podNames.map((name, i) => ({ name, podIp: pods[i]?.podIp }))) };
  }

  // The servers of every RethinkDB pod on a node, the same way.
  async function serversOnNode(node) {
    if (!kube) throw appError('noKubeForNode');
    if (!(await kube.nodeExists(node))) throw appError('nodeNotFound', { node });
    const pods = await kube.listRethinkDbPodsOnNode(node);
    const cluster = await store.readCluster();
    return { cluster, targets: serversOf(cluster, pods) };
  }

  // A server named by an operator (name or id), or SERVER_NOT_FOUND.
  async function serverByRef(ref) {
    const cluster = await store.readCluster();
    const server = resolveServer(cluster, ref);
    return { cluster, server: { id: server.id, name: server.name, pod: podNameForServer(server, overrides) } };
  }

  // The StatefulSet (its generations and revisions) and the revisions of its pods, for rolloutOf; null without a
  // Kubernetes API.
  async function statefulSetRollout() {
    if (!kube?.getStatefulSetRollout) return null;
    const [statefulSet, pods] = await Promise.all([kube.getStatefulSetRollout(), kube.listRethinkDbPods()]);
    return { statefulSet, pods };
  }

  // Where each RethinkDB pod runs, for GET /v1/cluster and the status page. Kubernetes being down only costs
  // this part of the answer (within the adapter's time limit), never the cluster view.
  async function podPlacement() {
    if (!kube) return { pods: null };
    try {
      const pods = await kube.listRethinkDbPods();
      return { pods: pods.map((p) => ({ pod: p.name, node: p.nodeName, hostname: p.hostname, phase: p.phase, ready: p.ready })) };
    } catch (err) {
      return { pods: null, podsError: err.message };
    }
  }

  return {
    existingPod, knownPods, serversForPods, serversOnNode, serverByRef, serversOf, statefulSetRollout, podPlacement,
  };
}
