// The sandbox's Kubernetes: nodes, RethinkDB pods (node, hostname, CPU request and limit, annotations), a
// StatefulSet whose scale can be patched, Events, and CPU usage that can be driven from outside. It answers
// the same port as src/kubernetes/kube-adapter.js, so the manager cannot tell it from a real API server.
// New pods join the sandbox RethinkDB model and then call POSTSTART, as the real pods' hooks do.

import { appError } from '../errors.js';
import { REPLICAS_READY_CONDITION } from '../policy/rollout.js';
import { createNodeCordons } from './node-cordons.js';

const POD_CPU_REQUEST_CORES = 0.5;
const POD_CPU_LIMIT_CORES = 1;
const NODE_ALLOCATABLE_CORES = 2;
const BASELINE_POD_CPU_CORES = 0.3;

// A pod's RethinkDB server name: RethinkDB names allow no '-', so rethinkdb-1 runs server rethinkdb_1.
const serverNameOf = (podName) => podName.replace(/-/g, '_');

// nodeOfPod(ordinal): the node a pod runs on; by default each pod on a node of its own.
// readinessGate: the pods list REPLICAS_READY_CONDITION in their readiness gates, as the chart's do; a pod is Ready
// only once the manager has set it True (its container is always ready here).
export function createSandboxKube({
  model, clock, podCount = 4, namespace = 'rethinkdb', maxEvents = 500, nodeOfPod = (ordinal) => `node-${ordinal}`, readinessGate = false,
}) {
  const nodes = new Map();
  const pods = new Map();
  const events = [];
  let replicas = 0;
  let nextOrdinal = 0;
  let uid = 0;
  // The StatefulSet's revisions: a rollout (rolloutRestart) makes pods again on the update revision.
  let generation = 1;
  let currentRevision = 'rethinkdb-1';
  let updateRevision = 'rethinkdb-1';
  // Set by the wiring: how a started pod calls POSTSTART (and a stopping one PRESTOP), like the pods' exec hooks.
  let hookCaller = { postStart: async () => {}, preStop: async () => {} };
  // The hook calls not answered yet (a scale-out's pods call POSTSTART without the caller waiting for them).
  const pendingHooks = new Set();
  function callHook(kind, name) {
    const call = Promise.resolve().then(() => hookCaller[kind](name));
    const tracked = call.catch(() => {}).finally(() => pendingHooks.delete(tracked));
    pendingHooks.add(tracked);
    return call;
  }
  const cordons = createNodeCordons();

  const notFound = (what, name) => appError('sandboxObjectNotFound', { what, name });

  function addNode(name) {
    nodes.set(name, { name, allocatableCpuCores: NODE_ALLOCATABLE_CORES, interferenceCores: 0, ready: true });
    return nodes.get(name);
  }

  // A pod on its node (by default a new one); its RethinkDB server joins the cluster unless the model already has it.
  function createPod(ordinal = nextOrdinal++) {
    const name = `rethinkdb-${ordinal}`;
    const nodeName = nodeOfPod(ordinal);
    if (!nodes.has(nodeName)) addNode(nodeName);
    uid += 1;
    pods.set(name, {
      name, uid: `sandbox-pod-${uid}`, nodeName, podIp: `198.18.0.${10 + ordinal}`, hostname: name, phase: 'Running', ready: !readinessGate,
      annotations: {}, cpuRequestCores: POD_CPU_REQUEST_CORES, cpuLimitCores: POD_CPU_LIMIT_CORES, cpuDemandCores: BASELINE_POD_CPU_CORES,
      revision: updateRevision, readinessGates: readinessGate ? { [REPLICAS_READY_CONDITION]: null } : {},
    });
    const serverName = serverNameOf(name);
    if (!model.serverNames().includes(serverName)) model.addServer({ name: serverName, hostname: name, tags: ['default', serverNameOf(nodeName)] });
    return pods.get(name);
  }

  for (let i = 0; i < podCount; i += 1) createPod();
  replicas = podCount;

  const publicPod = (p) => {
    const { cpuDemandCores, ...pod } = p;
    return structuredClone(pod);
  };

  function podOrThrow(name) {
    const pod = pods.get(name);
    if (!pod) throw notFound('pod', name);
    return pod;
  }

  // CPU the pods on a node get: each wants min(demand, limit); interference takes its share first and the
  // pods share what is left in proportion to their demand. A starved pod shows *less* usage, not more.
  function nodeUsage(nodeName) {
    const node = nodes.get(nodeName);
    const onNode = [...pods.values()].filter((p) => p.nodeName === nodeName && p.phase === 'Running');
    const interference = Math.min(node.interferenceCores, node.allocatableCpuCores);
    const wanted = onNode.map((p) => Math.min(p.cpuDemandCores, p.cpuLimitCores));
    const total = wanted.reduce((a, b) => a + b, 0);
    const available = Math.max(0, node.allocatableCpuCores - interference);
    const scale = total > available ? available / total : 1;
    const perPod = new Map(onNode.map((p, i) => [p.name, wanted[i] * scale]));
    return { perPod, nodeCores: interference + total * scale };
  }

  function record(event) {
    events.push(event);
    if (events.length > maxEvents) events.shift();
  }

  return {
    kind: 'sandbox',
    async getPod(name) {
      return publicPod(podOrThrow(name));
    },
    async listRethinkDbPods() {
      return [...pods.values()].map(publicPod);
    },
    async listRethinkDbPodsOnNode(nodeName) {
      return [...pods.values()].filter((p) => p.nodeName === nodeName).map(publicPod);
    },
    // The sandbox models RethinkDB pods only: no proxy pods, so no query gates to hold.
    async listPodsBySelector() {
      return [];
    },
    async getNode(name) {
      const node = nodes.get(name);
      if (!node) throw notFound('node', name);
      return { name, allocatableCpuCores: node.allocatableCpuCores };
    },
    async nodeExists(name) {
      return nodes.has(name);
    },
    watchNodes: (watcher) => cordons.watch(watcher, [...nodes.keys()]),
    async listPodMetrics() {
      const timestamp = new Date(clock.now()).toISOString();
      return [...nodes.keys()].flatMap((n) => [...nodeUsage(n).perPod].map(([name, cpuCores]) => ({ name, cpuCores, memoryBytes: 512 * 2 ** 20, timestamp, window: '15s' })));
    },
    async listNodeMetrics() {
      const timestamp = new Date(clock.now()).toISOString();
      return [...nodes.values()].filter((n) => n.ready).map((n) => ({ name: n.name, cpuCores: nodeUsage(n.name).nodeCores, memoryBytes: 4 * 2 ** 30, timestamp }));
    },
    async getStatefulSetScale() {
      return { replicas, currentReplicas: pods.size };
    },
    async getStatefulSetRollout() {
      const all = [...pods.values()];
      return {
        name: 'rethinkdb', generation, observedGeneration: generation, replicas, readyReplicas: all.filter((p) => p.ready).length,
        updatedReplicas: all.filter((p) => p.revision === updateRevision).length, currentRevision, updateRevision,
        strategy: { type: 'RollingUpdate', partition: 0 },
      };
    },
    async setPodCondition(name, { type, status }) {
      const pod = podOrThrow(name);
      if (!(type in pod.readinessGates)) pod.readinessGates[type] = null;
      pod.readinessGates[type] = status;
      pod.ready = Object.values(pod.readinessGates).every((v) => v === 'True');
      return publicPod(pod);
    },
    // Scaling up starts pods that join and call POSTSTART; scaling down stops the highest ordinals after PRESTOP.
    async patchStatefulSetScale(next) {
      const started = [];
      while (replicas < next) { started.push(createPod().name); replicas += 1; }
      const stopping = [];
      while (replicas > next) {
        const pod = [...pods.values()].at(-1);
        stopping.push(pod.name);
        replicas -= 1;
      }
      for (const name of stopping) await this.stopPod(name);
      for (const name of started) callHook('postStart', name);
      return { replicas };
    },
    async annotatePod(name, annotations) {
      const pod = podOrThrow(name);
      for (const [key, value] of Object.entries(annotations)) {
        if (value === null) delete pod.annotations[key]; else pod.annotations[key] = value;
      }
      return publicPod(pod);
    },
    async reviewToken() {
      throw appError('sandboxNoTokenReview');
    },
    async createPodEvent({ pod, reason, message, type = 'Normal' }) {
      record({ pod: pod.name, reason, message: message.slice(0, 1024), type, namespace, time: new Date(clock.now()).toISOString() });
      return {};
    },

    // Sandbox controls (admin endpoints, scenarios, tests).
    setHookCaller(caller) { hookCaller = { ...hookCaller, ...caller }; },
    // Resolves once every hook call the pods made has been answered (tests wait on it rather than on time).
    async hooksAnswered() {
      while (pendingHooks.size > 0) await Promise.all([...pendingHooks]);
    },
    events: () => [...events],
    setPodCpu(name, cores) { podOrThrow(name).cpuDemandCores = cores; },
    setInterference(nodeName, cores) {
      const node = nodes.get(nodeName);
      if (!node) throw notFound('node', nodeName);
      node.interferenceCores = cores;
    },
    podNames: () => [...pods.keys()],
    // kubectl cordon / uncordon: the node's spec.unschedulable, and the taint Kubernetes adds with it.
    setNodeUnschedulable(nodeName, unschedulable) {
      if (!nodes.has(nodeName)) throw notFound('node', nodeName);
      cordons.set(nodeName, unschedulable);
    },
    // An unannounced failure of a node: its servers vanish from the network (election after the heartbeat
    // timeout), its node drops out of the metrics, and its pods are gone.
    crashNode(nodeName) {
      const node = nodes.get(nodeName);
      if (!node) throw notFound('node', nodeName);
      node.ready = false;
      for (const pod of [...pods.values()].filter((p) => p.nodeName === nodeName)) {
        model.crashServer(serverNameOf(pod.name), { mode: 'cut' });
        pods.delete(pod.name);
      }
    },
    // A replacement pod on a fresh node (the ReplicaSet mechanism of the paper's testbed): it joins and calls POSTSTART.
    startReplacementPod() {
      const pod = createPod();
      callHook('postStart', pod.name);
      return publicPod(pod);
    },
    // `kubectl rollout restart`, as the StatefulSet controller runs it (OrderedReady, RollingUpdate): highest ordinal
    // first, each pod stopped (PRESTOP, SIGTERM), made again on the new revision on its data (its server comes back and
    // calls POSTSTART), and the next one only once waitReady(pod) resolves (the scenario advances time and ticks the
    // manager until the pod is Ready). onStep({ pod, step }) reports each step. The revision becomes current at the end.
    async rolloutRestart({ waitReady, onStep = async () => {} }) {
      generation += 1;
      updateRevision = `rethinkdb-${generation}`;
      const names = [...pods.keys()].sort((a, b) => Number(b.split('-').at(-1)) - Number(a.split('-').at(-1)));
      for (const name of names) {
        const ordinal = Number(name.split('-').at(-1));
        const answer = await this.stopPod(name);
        await onStep({ pod: name, step: 'stopped', prestop: answer });
        createPod(ordinal);
        model.restoreServer(serverNameOf(name));
        await callHook('postStart', name);
        await onStep({ pod: name, step: 'started' });
        await waitReady(name);
        await onStep({ pod: name, step: 'ready' });
      }
      currentRevision = updateRevision;
    },
    // A graceful stop: PRESTOP first (the container waits for it), then SIGTERM.
    async stopPod(name) {
      podOrThrow(name);
      const answer = await callHook('preStop', name);
      model.crashServer(serverNameOf(name), { mode: 'term' });
      pods.delete(name);
      return answer;
    },
  };
}
