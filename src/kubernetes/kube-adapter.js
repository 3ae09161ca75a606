// The Kubernetes adapter: the calls the manager makes, through @kubernetes/client-node 1.4, with the API's
// shapes and errors turned into ours. KUBE_CALLS lists every call; the RBAC rules are derived from it.

import {
  AppsV1Api, AuthenticationV1Api, CoordinationV1Api, CoreV1Api, CustomObjectsApi, PatchStrategy, makeInformer, setHeaderOptions,
} from '@kubernetes/client-node';
import { appError, AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { backoffMs } from '../lib/retry.js';
import { parseOptionalQuantity, parseQuantity } from './quantity.js';
import { createSharedAgentAuth } from './shared-agents.js';

// The entry point loads its KubeConfig from here rather than from the package itself: a static, named import is
// what lets the bundle (scripts/build.js) keep only the client-node code these names reach, not its whole index.
export { KubeConfig } from '@kubernetes/client-node';

// Every API call the adapter makes: the single source for the RBAC manifest and its test.
export const KUBE_CALLS = Object.freeze([
  // patch: the manager keeps its state (draining, perf warnings, migrations) in annotations on the pods concerned.
  { apiGroup: '', resource: 'pods', verbs: ['get', 'list', 'patch'], namespaced: true },
  { apiGroup: '', resource: 'events', verbs: ['create'], namespaced: true },
  { apiGroup: 'apps', resource: 'statefulsets/scale', verbs: ['get', 'patch'], namespaced: true },
  // get: the StatefulSet's revisions tell a rollout under way (POSTSTART defers its hand-back to the rollout's end).
  { apiGroup: 'apps', resource: 'statefulsets', verbs: ['get'], namespaced: true },
  // patch: the readiness gate's condition on RethinkDB pods (replicas ready), which only the manager sets.
  { apiGroup: '', resource: 'pods/status', verbs: ['patch'], namespaced: true },
  // list and watch: the node informer (cordons and drain taints announce a node's maintenance).
  { apiGroup: '', resource: 'nodes', verbs: ['get', 'list', 'watch'], namespaced: false },
  { apiGroup: 'metrics.k8s.io', resource: 'pods', verbs: ['list'], namespaced: true },
  { apiGroup: 'metrics.k8s.io', resource: 'nodes', verbs: ['get', 'list'], namespaced: false },
  { apiGroup: 'authentication.k8s.io', resource: 'tokenreviews', verbs: ['create'], namespaced: false },
  // Leader election between the manager's replicas (LEADER_ELECTION_ENABLED): one Lease, read, created once, renewed.
  { apiGroup: 'coordination.k8s.io', resource: 'leases', verbs: ['get', 'create', 'update'], namespaced: true },
]);

// The KubeConfig as the generated clients see it, its authentication replaced by one that shares keep-alive agents
// and gives every call a time limit that also cancels it (./shared-agents.js); makeApiClient is the library's own.
function sharingAgents(kubeConfig, requestTimeoutMs) {
  const auth = createSharedAgentAuth(kubeConfig, { requestTimeoutMs });
  return Object.create(kubeConfig, { applySecurityAuthentication: { value: auth.applySecurityAuthentication } });
}

export function createKubeAdapter({
  kubeConfig, namespace, podLabelSelector = 'app=rethinkdb', statefulSetName = 'rethinkdb', component = 'rethinkdb-k8s-manager', clock, requestTimeoutMs = 5000,
}) {
  const clients = sharingAgents(kubeConfig, requestTimeoutMs);
  const core = clients.makeApiClient(CoreV1Api);
  const apps = clients.makeApiClient(AppsV1Api);
  const custom = clients.makeApiClient(CustomObjectsApi);
  const authn = clients.makeApiClient(AuthenticationV1Api);
  const coordination = clients.makeApiClient(CoordinationV1Api);
  // Every call has a time limit: an API server that accepts and never answers is a 503, not a hang.
  const call = (what, fn) => withinMs(fn(), requestTimeoutMs, () => appError('kubeSlow', { what, ms: requestTimeoutMs })).catch((err) => { throw translateKubeError(err, what); });

  async function getPod(name) {
    return toPod(await call(`get pod ${name}`, () => core.readNamespacedPod({ name, namespace })));
  }

  async function listRethinkDbPods({ nodeName } = {}) {
    const list = await call('list pods', () => core.listNamespacedPod({
      namespace, labelSelector: podLabelSelector, ...(nodeName ? { fieldSelector: `spec.nodeName=${nodeName}` } : {}),
    }));
    return list.items.map(toPod);
  }

  // Pods of another selector in the namespace (the query gates' proxy pods, for holds).
  async function listPodsBySelector(labelSelector) {
    const list = await call(`list pods ${labelSelector}`, () => core.listNamespacedPod({ namespace, labelSelector }));
    return list.items.map(toPod);
  }

  async function getNode(name) {
    const node = await call(`get node ${name}`, () => core.readNode({ name }));
    return { name: node.metadata.name, allocatableCpuCores: parseOptionalQuantity(node.status?.allocatable?.cpu) };
  }

  // An informer on the nodes (list, then watch from that version; the client re-lists after a 410). onNode gets
  // every node as listed and each change, onDelete the name of a node deleted; a failed list or watch is reported to onError and started again after
  // a doubling backoff (retry: { minMs, maxMs }), the informer's cache kept. Returns { stop }.
  function watchNodes({
    onNode, onDelete = () => {}, onError = () => {}, onConnect = () => {}, retry = { minMs: 500, maxMs: 30000 },
  }) {
    const informer = makeInformer(kubeConfig, '/api/v1/nodes', () => core.listNode());
    let stopped = false;
    let failures = 0;
    let timer = null;
    const start = () => informer.start().catch(restart);
    function restart(err) {
      if (stopped) return;
      failures += 1;
      const delayMs = backoffMs(failures, retry);
      onError(translateKubeError(err, 'watch nodes'), { failures, retryInMs: delayMs });
      clearTimeout(timer);
      timer = setTimeout(start, delayMs);
    }
    const deliver = (node) => { failures = 0; onNode(toNode(node)); };
    informer.on('add', deliver);
    informer.on('update', deliver);
    informer.on('delete', (node) => onDelete(node.metadata.name));
    informer.on('error', restart);
    informer.on('connect', () => onConnect());
    start();
    return {
      async stop() {
        stopped = true;
        clearTimeout(timer);
        await informer.stop();
      },
    };
  }

  async function nodeExists(name) {
    try {
      await getNode(name);
      return true;
    } catch (err) {
      if (err.code === 'NOT_FOUND') return false;
      throw err;
    }
  }

  async function listPodMetrics() {
    const list = await call('list pod metrics', () => custom.listNamespacedCustomObject({
      group: 'metrics.k8s.io', version: 'v1beta1', namespace, plural: 'pods', labelSelector: podLabelSelector,
    }));
    return list.items.map((item) => ({
      name: item.metadata.name,
      cpuCores: item.containers.reduce((sum, c) => sum + parseQuantity(c.usage.cpu), 0),
      memoryBytes: item.containers.reduce((sum, c) => sum + parseQuantity(c.usage.memory), 0),
      timestamp: item.timestamp,
      window: item.window,
    }));
  }

  async function listNodeMetrics() {
    const list = await call('list node metrics', () => custom.listClusterCustomObject({ group: 'metrics.k8s.io', version: 'v1beta1', plural: 'nodes' }));
    return list.items.map((item) => ({ name: item.metadata.name, cpuCores: parseQuantity(item.usage.cpu), memoryBytes: parseQuantity(item.usage.memory), timestamp: item.timestamp }));
  }

  async function getStatefulSetScale() {
    const scale = await call('get statefulset scale', () => apps.readNamespacedStatefulSetScale({ name: statefulSetName, namespace }));
    return { replicas: scale.spec?.replicas ?? 0, currentReplicas: scale.status?.replicas ?? 0 };
  }

  // What rolloutOf (src/policy/rollout.js) reads: the StatefulSet's generations, revisions and updated count.
  async function getStatefulSetRollout() {
    const sts = await call('get statefulset', () => apps.readNamespacedStatefulSet({ name: statefulSetName, namespace }));
    return {
      name: statefulSetName,
      generation: sts.metadata?.generation ?? null,
      observedGeneration: sts.status?.observedGeneration ?? null,
      replicas: sts.spec?.replicas ?? 0,
      readyReplicas: sts.status?.readyReplicas ?? 0,
      updatedReplicas: sts.status?.updatedReplicas ?? 0,
      currentRevision: sts.status?.currentRevision ?? null,
      updateRevision: sts.status?.updateRevision ?? null,
      strategy: { type: sts.spec?.updateStrategy?.type ?? 'RollingUpdate', partition: sts.spec?.updateStrategy?.rollingUpdate?.partition ?? 0 },
    };
  }

  // What src/policy/attachment.js checks of the StatefulSet's pod template; null when there is no such StatefulSet.
  async function getStatefulSetPodTemplate() {
    let sts;
    try {
      sts = await call('get statefulset', () => apps.readNamespacedStatefulSet({ name: statefulSetName, namespace }));
    } catch (err) {
      if (err.code === 'NOT_FOUND') return null;
      throw err;
    }
    return toPodTemplate(statefulSetName, sts.spec?.template ?? {});
  }

  // Sets one condition in a pod's status (a strategic merge by type: the kubelet's own conditions stay); its
  // transition time changes only with its status.
  async function setPodCondition(name, { type, status, reason, message, previous = null }) {
    const now = new Date(clock.now()).toISOString();
    const condition = {
      type, status, reason, message: message.slice(0, 1000), lastProbeTime: null, lastTransitionTime: previous === status ? undefined : now,
    };
    const pod = await call(`patch pod ${name} status`, () => core.patchNamespacedPodStatus(
      { name, namespace, body: { status: { conditions: [condition] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    ));
    return toPod(pod);
  }

  async function patchStatefulSetScale(replicas) {
    const scale = await call('patch statefulset scale', () => apps.patchNamespacedStatefulSetScale(
      { name: statefulSetName, namespace, body: { spec: { replicas } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ));
    return { replicas: scale.spec?.replicas ?? replicas };
  }

  // A merge patch of metadata.annotations: a null value removes that annotation.
  async function annotatePod(name, annotations) {
    const pod = await call(`annotate pod ${name}`, () => core.patchNamespacedPod(
      { name, namespace, body: { metadata: { annotations } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    ));
    return toPod(pod);
  }

  // TokenReview: who holds this bearer token, for these audiences. An invalid token is an answer, not an error.
  async function reviewToken(token, audiences) {
    const review = await call('create token review', () => authn.createTokenReview({
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, audiences } },
    }));
    const status = review.status ?? {};
    return {
      authenticated: status.authenticated === true,
      username: status.user?.username ?? null,
      groups: status.user?.groups ?? [],
      extra: status.user?.extra ?? {},
      audiences: status.audiences ?? [],
      error: status.error ?? null,
    };
  }

  // The election's Lease; null when there is none.
  async function getLease(name) {
    try {
      return toLease(await call(`get lease ${name}`, () => coordination.readNamespacedLease({ name, namespace })));
    } catch (err) {
      if (err.code === 'NOT_FOUND') return null;
      throw err;
    }
  }

  // Creates the Lease, or updates it if it is still at `resourceVersion` (optimistic concurrency). Resolves null when
  // another replica wrote it first (409 Conflict): that replica won this round.
  async function writeLease(name, { resourceVersion = null, spec, annotations }) {
    const body = { metadata: { name, namespace, annotations: dropNulls(annotations), ...(resourceVersion ? { resourceVersion } : {}) }, spec };
    try {
      return toLease(await call(`write lease ${name}`, () => (resourceVersion
        ? coordination.replaceNamespacedLease({ name, namespace, body })
        : coordination.createNamespacedLease({ namespace, body }))));
    } catch (err) {
      if ([409, 404].includes(err.cause?.code)) return null;
      throw err;
    }
  }

  async function createPodEvent({ pod, reason, message, type = 'Normal' }) {
    const now = new Date(clock.now()).toISOString();
    return call(`create event on ${pod.name}`, () => core.createNamespacedEvent({
      namespace,
      body: {
        metadata: { generateName: `${pod.name}.` },
        involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace, name: pod.name, ...(pod.uid ? { uid: pod.uid } : {}) },
        reason,
        message: message.slice(0, 1024),
        type,
        source: { component },
        firstTimestamp: now,
        lastTimestamp: now,
        count: 1,
      },
    }));
  }

  return {
    kind: 'kubernetes',
    getPod,
    listRethinkDbPods: () => listRethinkDbPods(),
    listRethinkDbPodsOnNode: (nodeName) => listRethinkDbPods({ nodeName }),
    listPodsBySelector,
    getNode,
    nodeExists,
    watchNodes,
    listPodMetrics,
    listNodeMetrics,
    getStatefulSetScale,
    getStatefulSetRollout,
    getStatefulSetPodTemplate,
    setPodCondition,
    patchStatefulSetScale,
    annotatePod,
    reviewToken,
    createPodEvent,
    getLease,
    writeLease,
  };
}

function toPod(pod) {
  const containers = pod.spec?.containers ?? [];
  const sum = (pick) => {
    const values = containers.map((c) => parseOptionalQuantity(pick(c.resources ?? {})));
    return values.some((v) => v === null) ? null : values.reduce((a, b) => a + b, 0);
  };
  return {
    name: pod.metadata.name,
    uid: pod.metadata.uid ?? null,
    nodeName: pod.spec?.nodeName ?? null,
    podIp: pod.status?.podIP ?? null,
    hostname: pod.spec?.hostname ?? pod.metadata.name,
    phase: pod.status?.phase ?? null,
    ready: (pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True'),
    annotations: pod.metadata.annotations ?? {},
    deleting: Boolean(pod.metadata.deletionTimestamp),
    cpuRequestCores: sum((r) => r.requests?.cpu),
    cpuLimitCores: sum((r) => r.limits?.cpu),
    // The StatefulSet revision the pod was made from, and its readiness gates with their conditions' status (null:
    // not set yet).
    revision: pod.metadata.labels?.['controller-revision-hash'] ?? null,
    readinessGates: Object.fromEntries((pod.spec?.readinessGates ?? []).map((g) => [
      g.conditionType, (pod.status?.conditions ?? []).find((c) => c.type === g.conditionType)?.status ?? null,
    ])),
  };
}

// A pod template as src/policy/attachment.js reads it: labels, grace period, readiness gates, which volumes carry a
// service-account token for which audiences, and per container its ports, its command and arguments, its hooks (an
// exec hook's command, an HTTP hook's path) and the volumes it mounts.
export function toPodTemplate(name, template) {
  const spec = template.spec ?? {};
  const hook = (h) => (h?.exec ? (h.exec.command ?? []).join(' ') : h?.httpGet ? `http ${h.httpGet.path ?? '/'}` : null);
  return {
    name,
    podLabels: template.metadata?.labels ?? {},
    terminationGracePeriodSeconds: spec.terminationGracePeriodSeconds ?? null,
    readinessGates: (spec.readinessGates ?? []).map((g) => g.conditionType),
    volumes: (spec.volumes ?? []).map((v) => ({
      name: v.name,
      tokenAudiences: (v.projected?.sources ?? []).filter((src) => src.serviceAccountToken).map((src) => src.serviceAccountToken.audience ?? null),
    })),
    containers: (spec.containers ?? []).map((c) => ({
      name: c.name,
      ports: (c.ports ?? []).map((p) => p.containerPort),
      text: [...(c.command ?? []), ...(c.args ?? [])].join(' '),
      preStop: hook(c.lifecycle?.preStop),
      postStart: hook(c.lifecycle?.postStart),
      volumeMounts: (c.volumeMounts ?? []).map((m) => m.name),
    })),
  };
}

// A Lease as the election reads it (times as the API server wrote them).
function toLease(lease) {
  const time = (t) => (t instanceof Date ? t.toISOString() : (t ?? null));
  return {
    resourceVersion: lease.metadata.resourceVersion,
    annotations: lease.metadata.annotations ?? {},
    holderIdentity: lease.spec?.holderIdentity || null,
    leaseDurationSeconds: lease.spec?.leaseDurationSeconds ?? null,
    acquireTime: time(lease.spec?.acquireTime),
    renewTime: time(lease.spec?.renewTime),
    leaseTransitions: lease.spec?.leaseTransitions ?? 0,
  };
}

const dropNulls = (object) => Object.fromEntries(Object.entries(object).filter(([, v]) => v !== null && v !== undefined));

// What the maintenance signals read of a node.
function toNode(node) {
  return {
    name: node.metadata.name,
    unschedulable: node.spec?.unschedulable === true,
    taints: (node.spec?.taints ?? []).map((t) => ({ key: t.key, effect: t.effect ?? null })),
  };
}

// A Kubernetes API error in our error model. The client's ApiException carries `code` and a Status body.
function translateKubeError(err, what) {
  if (err instanceof AppError) return err;
  const status = err?.code;
  const body = typeof err?.body === 'string' ? safeJson(err.body) : err?.body;
  const detail = body?.message ?? (typeof err?.body === 'string' ? err.body.trim() : err?.message);
  if (status === 404) return appError('kubeNotFound', { what, detail }, { cause: err });
  if (status === 401 || status === 403) {
    return appError('kubeForbidden', { what, status, detail }, { cause: err });
  }
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return appError('kubeRejected', { what, status, detail }, { cause: err });
  }
  return appError('kubeUnavailable', { what, detail: detail ?? err }, { cause: err });
}

function safeJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
