// API objects for the real-API-server tests: the RethinkDB cluster as Kubernetes sees it (nodes, pods with status
// written the way a kubelet would, a StatefulSet), the metrics.k8s.io stand-in, and generic apply for manifests.

import { writeFileSync } from 'node:fs';
import {
  ApiextensionsV1Api, AppsV1Api, CoreV1Api, CustomObjectsApi, KubernetesObjectApi, PatchStrategy, loadYaml, setHeaderOptions,
} from '@kubernetes/client-node';

export const NAMESPACE = 'rethinkdb';
const POD_COUNT = 4;
const podLabels = { app: 'rethinkdb' };

// What the recorded cluster held (../shared/fixtures/kubernetes-1.34): pod rethinkdb-i on node node-i,
// podIP 198.18.0.(10+i), CPU request 500m and limit 1, 4 allocatable cores per node.
export function clusterPlan(count = POD_COUNT) {
  return Array.from({ length: count }, (_, k) => {
    const i = k + 1;
    return { pod: `rethinkdb-${i}`, node: `node-${i}`, podIp: `198.18.0.${10 + i}`, hostIp: `198.18.1.${10 + i}` };
  });
}

// Namespace, its default ServiceAccount (no controller-manager creates it, and pod admission needs it),
// Ready nodes, Running pods bound to them, and the StatefulSet they nominally belong to. Returns the created pods.
// withNamespace / withStatefulSet false: those come from applied manifests (deploy/k8s) instead.
export async function seedRethinkDbCluster(kubeConfig, {
  namespace = NAMESPACE, plan = clusterPlan(), withNamespace = true, withStatefulSet = true, serviceAccountName = undefined,
} = {}) {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const apps = kubeConfig.makeApiClient(AppsV1Api);
  if (withNamespace) await core.createNamespace({ body: { metadata: { name: namespace } } });
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: 'default' } } });
  for (const { node, hostIp } of plan) {
    await core.createNode({ body: { metadata: { name: node, labels: { 'kubernetes.io/hostname': node } } } });
    await core.patchNodeStatus({ name: node, body: { status: nodeStatus(hostIp) } }, mergePatch());
  }
  const pods = [];
  for (const { pod, node, podIp, hostIp } of plan) {
    await core.createNamespacedPod({ namespace, body: podManifest(pod, node, serviceAccountName) });
    pods.push(await core.patchNamespacedPodStatus({ name: pod, namespace, body: { status: runningStatus(podIp, hostIp) } }, mergePatch()));
  }
  if (withStatefulSet) await apps.createNamespacedStatefulSet({ namespace, body: statefulSetManifest(plan.length) });
  return pods;
}

function mergePatch() {
  return setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
}

function nodeStatus(hostIp) {
  const resources = { cpu: '4', memory: '16Gi', pods: '110' };
  return {
    capacity: resources,
    allocatable: resources,
    addresses: [{ type: 'InternalIP', address: hostIp }],
    conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'written by the test, no kubelet runs' }],
  };
}

function rethinkDbContainer() {
  return {
    name: 'rethinkdb',
    image: 'rethinkdb:2.4.4',
    ports: [{ name: 'driver', containerPort: 28015 }, { name: 'cluster', containerPort: 29015 }],
    resources: { requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '1', memory: '2Gi' } },
  };
}

function podManifest(name, nodeName, serviceAccountName) {
  return {
    metadata: { name, labels: podLabels },
    spec: {
      nodeName, hostname: name, containers: [rethinkDbContainer()], ...(serviceAccountName ? { serviceAccountName, automountServiceAccountToken: false } : {}),
    },
  };
}

function runningStatus(podIp, hostIp) {
  const now = new Date().toISOString();
  return {
    phase: 'Running',
    hostIP: hostIp,
    podIP: podIp,
    podIPs: [{ ip: podIp }],
    startTime: now,
    conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: now }],
    containerStatuses: [{
      name: 'rethinkdb', ready: true, started: true, restartCount: 0, image: 'rethinkdb:2.4.4', imageID: '', state: { running: { startedAt: now } },
    }],
  };
}

function statefulSetManifest(replicas) {
  return {
    metadata: { name: 'rethinkdb', labels: podLabels },
    spec: {
      replicas,
      serviceName: 'rethinkdb',
      selector: { matchLabels: podLabels },
      template: { metadata: { labels: podLabels }, spec: { containers: [rethinkDbContainer()] } },
    },
  };
}

// The metrics.k8s.io stand-in: PodMetrics and NodeMetrics as CRDs in the real group and version, so the
// manager's requests take the same paths, with the same label selectors and the same RBAC, as against
// metrics-server. Names under *.k8s.io need the api-approved annotation; this one says it is not approved.
export async function installMetricsStandIn(kubeConfig, { timeoutMs = 20000 } = {}) {
  const ext = kubeConfig.makeApiClient(ApiextensionsV1Api);
  const usage = { type: 'object', additionalProperties: { 'x-kubernetes-int-or-string': true } };
  const common = { timestamp: { type: 'string', format: 'date-time' }, window: { type: 'string' } };
  const definitions = [
    metricsCrd('pods', 'PodMetrics', 'Namespaced', { ...common, containers: { type: 'array', items: { type: 'object', required: ['name', 'usage'], properties: { name: { type: 'string' }, usage } } } }),
    metricsCrd('nodes', 'NodeMetrics', 'Cluster', { ...common, usage }),
  ];
  for (const body of definitions) await ext.createCustomResourceDefinition({ body });
  const deadline = Date.now() + timeoutMs;
  for (const { metadata: { name } } of definitions) {
    for (;;) {
      const crd = await ext.readCustomResourceDefinition({ name });
      if ((crd.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline) throw new Error(`CRD ${name} not Established within ${timeoutMs} ms: ${JSON.stringify(crd.status)}`);
      await new Promise((resolve) => { setTimeout(resolve, 50); });
    }
  }
}

function metricsCrd(plural, kind, scope, properties) {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: {
      name: `${plural}.metrics.k8s.io`,
      annotations: { 'api-approved.kubernetes.io': 'unapproved, test stand-in for metrics-server' },
    },
    spec: {
      group: 'metrics.k8s.io',
      scope,
      names: { plural, singular: kind.toLowerCase(), kind, listKind: `${kind}List` },
      versions: [{ name: 'v1beta1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties } } }],
    },
  };
}

// What metrics-server would report for a pod: its labels copied, one usage per container.
export async function putPodMetrics(kubeConfig, { name, namespace = NAMESPACE, labels = podLabels, containers, timestamp, window = '15s' }) {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  return custom.createNamespacedCustomObject({
    group: 'metrics.k8s.io', version: 'v1beta1', namespace, plural: 'pods',
    body: { apiVersion: 'metrics.k8s.io/v1beta1', kind: 'PodMetrics', metadata: { name, labels }, timestamp, window, containers },
  });
}

export async function putNodeMetrics(kubeConfig, { name, usage, timestamp, window = '20s' }) {
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  return custom.createClusterCustomObject({
    group: 'metrics.k8s.io', version: 'v1beta1', plural: 'nodes',
    body: { apiVersion: 'metrics.k8s.io/v1beta1', kind: 'NodeMetrics', metadata: { name }, timestamp, window, usage },
  });
}

// Server-side apply of objects as a manifest writes them (the API's field names), in order: the hook for tests that
// apply deploy/ manifests. Namespaced objects without a namespace go to the kubeconfig context's (rethinkdb).
// The client serializes through its models, whose names differ from the API's in places (a NetworkPolicy rule's
// `from` is `_from` there) and drops what they do not name, so each object is read into the models first.
export async function applyObjects(kubeConfig, objects, { fieldManager = 'kube-real-tests' } = {}) {
  const client = KubernetesObjectApi.makeApiClient(kubeConfig);
  const applied = [];
  for (const object of objects) {
    applied.push(await client.patch(loadYaml(JSON.stringify(object)), undefined, undefined, fieldManager, true, PatchStrategy.ServerSideApply));
  }
  return applied;
}

// A token for a ServiceAccount through TokenRequest, as the kubelet gets a projected one: for these audiences
// (none: the API server's own), optionally bound to a pod (then it names the pod in TokenReview's user.extra).
export async function mintServiceAccountToken(kubeConfig, serviceAccount, {
  audiences = [], pod = null, namespace = NAMESPACE, expirationSeconds = 600,
} = {}) {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const boundObjectRef = pod ? { kind: 'Pod', apiVersion: 'v1', name: pod.metadata.name, uid: pod.metadata.uid } : undefined;
  const answer = await core.createNamespacedServiceAccountToken({
    name: serviceAccount, namespace, body: { spec: { audiences, expirationSeconds, boundObjectRef } },
  });
  return answer.status.token;
}

// The manager's ServiceAccount (created if missing) and a token for the relay's audience written to a file, as the
// Deployment's projected volume gives it: the env a replica needs to relay to the leader and to check relays.
export async function writeRelayToken(kubeConfig, file, { serviceAccount = 'rethinkdb-manager', namespace = NAMESPACE } = {}) {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name: serviceAccount } } }).catch((err) => {
    if (err.code !== 409) throw err;
  });
  const token = await mintServiceAccountToken(kubeConfig, serviceAccount, { audiences: ['rethinkdb-manager-relay'], namespace, expirationSeconds: 7200 });
  writeFileSync(file, token, { mode: 0o600 });
  return { RELAY_TOKEN_FILE: file };
}
