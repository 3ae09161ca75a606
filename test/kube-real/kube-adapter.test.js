// The Kubernetes adapter against a real kube-apiserver 1.34 and etcd: selectors, reads, the scale subresource,
// Events, annotations, TokenReview, and metrics.k8s.io through the CRD stand-in.

import { AppsV1Api, CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createVirtualClock } from '../helpers/harness.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import {
  NAMESPACE, clusterPlan, installMetricsStandIn, putNodeMetrics, putPodMetrics, seedRethinkDbCluster,
} from '../helpers/kube-objects.js';

let api;
let kube;
let core;
const clock = createVirtualClock(Date.parse('2026-11-21T12:00:00Z'));

beforeAll(async () => {
  api = await startKubeApiServer();
  await seedRethinkDbCluster(api.kubeConfig);
  // A pod of another app on node-1: the label selector must leave it out.
  core = api.kubeConfig.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({
    namespace: NAMESPACE, body: { metadata: { name: 'other-1', labels: { app: 'other' } }, spec: { nodeName: 'node-1', containers: [{ name: 'c', image: 'busybox' }] } },
  });
  kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: NAMESPACE, clock });
}, 120000);

afterAll(async () => { await api?.stop(); });

describe('Kubernetes adapter against a real kube-apiserver', () => {
  test('when listing the RethinkDB pods on a node, then only that node\'s pods with the app label come back', async () => {
    const pods = await kube.listRethinkDbPodsOnNode('node-1');
    expect(pods).toEqual([expect.objectContaining({ name: 'rethinkdb-1', nodeName: 'node-1', podIp: '198.18.0.11', cpuRequestCores: 0.5, cpuLimitCores: 1 })]);
    expect(await kube.listRethinkDbPodsOnNode('node-9')).toEqual([]);
  });

  test('when listing all RethinkDB pods, then the four pods come back and the other app\'s pod does not', async () => {
    const pods = await kube.listRethinkDbPods();
    expect(pods.map((p) => p.name).sort()).toEqual(clusterPlan().map((p) => p.pod));
  });

  test('when resolving a pod, then its uid, node, IP, readiness and resources come from the stored object and status', async () => {
    const stored = await core.readNamespacedPod({ name: 'rethinkdb-2', namespace: NAMESPACE });
    expect(await kube.getPod('rethinkdb-2')).toEqual({
      name: 'rethinkdb-2', uid: stored.metadata.uid, nodeName: 'node-2', podIp: '198.18.0.12', hostname: 'rethinkdb-2',
      phase: 'Running', ready: true, annotations: {}, deleting: false, cpuRequestCores: 0.5, cpuLimitCores: 1, revision: null, readinessGates: {},
    });
  });

  test('when watching nodes, then each is delivered as listed, and a cordon arrives as a change', async () => {
    const seen = [];
    const watch = kube.watchNodes({ onNode: (node) => seen.push(node) });
    try {
      for (let i = 0; i < 100 && !seen.some((n) => n.name === 'node-3'); i += 1) await new Promise((resolve) => { setTimeout(resolve, 50); });
      expect(seen.find((n) => n.name === 'node-3')).toEqual({ name: 'node-3', unschedulable: false, taints: expect.any(Array) });
      await core.patchNode({ name: 'node-3', body: { spec: { unschedulable: true } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
      for (let i = 0; i < 100 && !seen.some((n) => n.name === 'node-3' && n.unschedulable); i += 1) await new Promise((resolve) => { setTimeout(resolve, 50); });
      expect(seen.filter((n) => n.name === 'node-3').at(-1)).toMatchObject({ unschedulable: true });
    } finally {
      await watch.stop();
      await core.patchNode({ name: 'node-3', body: { spec: { unschedulable: false } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    }
  });

  test('when a pod is missing, then the API server\'s 404 becomes NOT_FOUND naming it', async () => {
    await expect(kube.getPod('rethinkdb-99')).rejects.toMatchObject({
      code: 'NOT_FOUND', statusCode: 404, message: 'Kubernetes: get pod rethinkdb-99: pods "rethinkdb-99" not found',
    });
  });

  test('when reading a node, then its allocatable CPU is parsed; an unknown node does not exist', async () => {
    expect(await kube.getNode('node-3')).toEqual({ name: 'node-3', allocatableCpuCores: 4 });
    expect(await kube.nodeExists('node-3')).toBe(true);
    expect(await kube.nodeExists('node-9')).toBe(false);
  });

  test('when the StatefulSet is scaled through the scale subresource, then the StatefulSet\'s spec changes', async () => {
    expect(await kube.getStatefulSetScale()).toEqual({ replicas: 4, currentReplicas: 0 });
    expect(await kube.patchStatefulSetScale(5)).toEqual({ replicas: 5 });
    const apps = api.kubeConfig.makeApiClient(AppsV1Api);
    expect((await apps.readNamespacedStatefulSet({ name: 'rethinkdb', namespace: NAMESPACE })).spec.replicas).toBe(5);
    expect(await kube.getStatefulSetScale()).toMatchObject({ replicas: 5 });
    await kube.patchStatefulSetScale(4);
  });

  test('when the StatefulSet rolls out, then its generations, revisions and updated count come back as rolloutOf reads them', async () => {
    const apps = api.kubeConfig.makeApiClient(AppsV1Api);
    const before = await apps.readNamespacedStatefulSet({ name: 'rethinkdb', namespace: NAMESPACE });
    await apps.patchNamespacedStatefulSetStatus({
      name: 'rethinkdb', namespace: NAMESPACE,
      body: { status: { observedGeneration: before.metadata.generation, replicas: 4, updatedReplicas: 1, currentRevision: 'rethinkdb-aaa', updateRevision: 'rethinkdb-bbb' } },
    }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    expect(await kube.getStatefulSetRollout()).toEqual({
      name: 'rethinkdb', generation: before.metadata.generation, observedGeneration: before.metadata.generation, replicas: 4, readyReplicas: 0,
      updatedReplicas: 1, currentRevision: 'rethinkdb-aaa', updateRevision: 'rethinkdb-bbb', strategy: { type: 'RollingUpdate', partition: 0 },
    });
  });

  test('when the StatefulSet\'s pod template is read, then it comes back as src/policy/attachment.js reads it; another name reads null', async () => {
    const template = await kube.getStatefulSetPodTemplate();
    expect(template).toMatchObject({ name: 'rethinkdb', podLabels: { app: 'rethinkdb' }, terminationGracePeriodSeconds: 30, readinessGates: [], volumes: [] });
    expect(template.containers).toEqual([expect.objectContaining({ name: 'rethinkdb', preStop: null, postStart: null, volumeMounts: [] })]);
    const other = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: NAMESPACE, clock, statefulSetName: 'no-such-set' });
    expect(await other.getStatefulSetPodTemplate()).toBeNull();
  });

  test('when a pod has a readiness gate, then the manager\'s condition is set by a status patch, keeping the others, with its transition time only on a change', async () => {
    await core.createNamespacedPod({
      namespace: NAMESPACE,
      body: {
        metadata: { name: 'rethinkdb-gated', labels: { app: 'rethinkdb', 'controller-revision-hash': 'rethinkdb-bbb' } },
        spec: { nodeName: 'node-1', readinessGates: [{ conditionType: 'rethinkdb-manager.io/replicas-ready' }], containers: [{ name: 'c', image: 'busybox' }] },
      },
    });
    // An adapter of its own, on a clock of its own: the Event test below reads the shared clock's time.
    const gateClock = createVirtualClock(Date.parse('2026-11-21T13:00:00Z'));
    const gated = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: NAMESPACE, clock: gateClock });
    try {
      await core.patchNamespacedPodStatus({
        name: 'rethinkdb-gated', namespace: NAMESPACE, body: { status: { conditions: [{ type: 'Ready', status: 'False' }] } },
      }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch));
      expect(await kube.getPod('rethinkdb-gated')).toMatchObject({ revision: 'rethinkdb-bbb', readinessGates: { 'rethinkdb-manager.io/replicas-ready': null } });
      const set = await gated.setPodCondition('rethinkdb-gated', {
        type: 'rethinkdb-manager.io/replicas-ready', status: 'False', reason: 'ReplicasNotReady', message: 'backfilling', previous: null,
      });
      expect(set.readinessGates).toEqual({ 'rethinkdb-manager.io/replicas-ready': 'False' });
      gateClock.advance(5000);
      await gated.setPodCondition('rethinkdb-gated', {
        type: 'rethinkdb-manager.io/replicas-ready', status: 'False', reason: 'ReplicasNotReady', message: 'still backfilling', previous: 'False',
      });
      let conditions = (await core.readNamespacedPod({ name: 'rethinkdb-gated', namespace: NAMESPACE })).status.conditions;
      expect(conditions.map((c) => c.type).sort()).toEqual(['Ready', 'rethinkdb-manager.io/replicas-ready']);
      const gate = () => conditions.find((c) => c.type === 'rethinkdb-manager.io/replicas-ready');
      expect(gate()).toMatchObject({ status: 'False', reason: 'ReplicasNotReady', message: 'still backfilling' });
      expect(new Date(gate().lastTransitionTime).toISOString()).toBe(new Date(gateClock.now() - 5000).toISOString().replace(/\.\d+Z$/, '.000Z'));
      await gated.setPodCondition('rethinkdb-gated', {
        type: 'rethinkdb-manager.io/replicas-ready', status: 'True', reason: 'ReplicasReady', message: 'ready', previous: 'False',
      });
      conditions = (await core.readNamespacedPod({ name: 'rethinkdb-gated', namespace: NAMESPACE })).status.conditions;
      expect(gate()).toMatchObject({ status: 'True', reason: 'ReplicasReady' });
      expect(new Date(gate().lastTransitionTime).toISOString()).toBe(new Date(gateClock.now()).toISOString().replace(/\.\d+Z$/, '.000Z'));
    } finally {
      await core.deleteNamespacedPod({ name: 'rethinkdb-gated', namespace: NAMESPACE, gracePeriodSeconds: 0 });
    }
  });

  test('when an Event is created on a pod, then it can be read back with its reason, message, source and pod uid', async () => {
    const pod = await kube.getPod('rethinkdb-3');
    const created = await kube.createPodEvent({ pod, reason: 'PrimariesMoved', message: 'moved 3 primaries off rethinkdb_3', type: 'Normal' });
    const event = await core.readNamespacedEvent({ name: created.metadata.name, namespace: NAMESPACE });
    expect(event).toMatchObject({
      reason: 'PrimariesMoved', message: 'moved 3 primaries off rethinkdb_3', type: 'Normal', count: 1,
      source: { component: 'rethinkdb-k8s-manager' },
      involvedObject: { kind: 'Pod', name: 'rethinkdb-3', namespace: NAMESPACE, uid: pod.uid },
    });
    expect(new Date(event.firstTimestamp).toISOString()).toBe('2026-11-21T12:00:00.000Z');
    const onPod = await core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: 'involvedObject.name=rethinkdb-3' });
    expect(onPod.items.map((e) => e.metadata.name)).toContain(created.metadata.name);
  });

  test('when a pod is annotated, then the annotation is stored and a null value removes it', async () => {
    expect((await kube.annotatePod('rethinkdb-4', { 'rethinkdb.example/draining': 'true' })).annotations).toEqual({ 'rethinkdb.example/draining': 'true' });
    expect((await core.readNamespacedPod({ name: 'rethinkdb-4', namespace: NAMESPACE })).metadata.annotations).toEqual({ 'rethinkdb.example/draining': 'true' });
    expect((await kube.annotatePod('rethinkdb-4', { 'rethinkdb.example/draining': null })).annotations).toEqual({});
  });

  test('when annotating a missing pod, then NOT_FOUND', async () => {
    await expect(kube.annotatePod('rethinkdb-99', { a: 'b' })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });
});

describe('TokenReview through the adapter, with a token bound to a pod', () => {
  let token;

  beforeAll(async () => {
    const pod = await core.readNamespacedPod({ name: 'rethinkdb-2', namespace: NAMESPACE });
    const request = await core.createNamespacedServiceAccountToken({
      name: 'default', namespace: NAMESPACE,
      body: { spec: { audiences: ['rethinkdb-manager'], expirationSeconds: 600, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'rethinkdb-2', uid: pod.metadata.uid } } },
    });
    token = request.status.token;
  });

  test('when the audience matches, then the caller is the pod\'s service account and extra names the pod and node', async () => {
    const review = await kube.reviewToken(token, ['rethinkdb-manager']);
    expect(review).toMatchObject({ authenticated: true, username: 'system:serviceaccount:rethinkdb:default', audiences: ['rethinkdb-manager'], error: null });
    expect(review.groups).toEqual(expect.arrayContaining(['system:serviceaccounts', 'system:serviceaccounts:rethinkdb', 'system:authenticated']));
    expect(review.extra).toMatchObject({ 'authentication.kubernetes.io/pod-name': ['rethinkdb-2'], 'authentication.kubernetes.io/node-name': ['node-2'] });
  });

  test('when the audience differs, or the token is garbage, then not authenticated, with an error', async () => {
    for (const [candidate, audiences] of [[token, ['someone-else']], ['not-a-token', ['rethinkdb-manager']]]) {
      const review = await kube.reviewToken(candidate, audiences);
      expect(review).toMatchObject({ authenticated: false, username: null });
      expect(review.error).toEqual(expect.any(String));
    }
  });
});

describe('metrics.k8s.io through the CRD stand-in', () => {
  test('when metrics-server is absent, then listing pod metrics is a 404 NOT_FOUND, as recorded', async () => {
    await expect(kube.listPodMetrics()).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  test('when PodMetrics and NodeMetrics are served, then the adapter sums containers, selects by label and parses units', async () => {
    await installMetricsStandIn(api.kubeConfig);
    const timestamp = '2026-11-21T11:59:50Z';
    await putPodMetrics(api.kubeConfig, { name: 'rethinkdb-1', timestamp, containers: [{ name: 'rethinkdb', usage: { cpu: '212437118n', memory: '412344Ki' } }, { name: 'sidecar', usage: { cpu: '250m', memory: '1Mi' } }] });
    await putPodMetrics(api.kubeConfig, { name: 'rethinkdb-2', timestamp, containers: [{ name: 'rethinkdb', usage: { cpu: '198u', memory: '1Gi' } }] });
    await putPodMetrics(api.kubeConfig, { name: 'other-1', labels: { app: 'other' }, timestamp, containers: [{ name: 'c', usage: { cpu: '1', memory: '1Mi' } }] });
    await putNodeMetrics(api.kubeConfig, { name: 'node-1', timestamp, usage: { cpu: '1500m', memory: '8Gi' } });

    const pods = await kube.listPodMetrics();
    expect(pods.map((p) => p.name).sort()).toEqual(['rethinkdb-1', 'rethinkdb-2']);
    const one = pods.find((p) => p.name === 'rethinkdb-1');
    expect(one.cpuCores).toBeCloseTo(0.462437118, 9);
    expect(one.memoryBytes).toBe(412344 * 1024 + 1024 * 1024);
    expect(one).toMatchObject({ timestamp, window: '15s' });
    expect(pods.find((p) => p.name === 'rethinkdb-2')).toMatchObject({ cpuCores: 0.000198, memoryBytes: 1024 ** 3 });
    expect(await kube.listNodeMetrics()).toEqual([{ name: 'node-1', cpuCores: 1.5, memoryBytes: 8 * 1024 ** 3, timestamp }]);
  });
});
