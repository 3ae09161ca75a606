import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { startFakeKubeApi, recordedKubeRoutes, recordedValidToken } from '../helpers/fake-kube-api.js';
import { loadKubeFixture } from '../helpers/fixtures.js';
import { createVirtualClock } from '../helpers/harness.js';

let api;
let kube;

async function start(options) {
  api = await startFakeKubeApi(recordedKubeRoutes(options));
  kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock: createVirtualClock() });
}

afterEach(async () => { await api?.close(); api = null; });

describe('Kubernetes adapter (real client, recorded API responses)', () => {
  test('when listing the RethinkDB pods on a node, then the label and field selectors are sent and pods are parsed', async () => {
    await start();
    const pods = await kube.listRethinkDbPodsOnNode('node-1');
    expect(api.requests[0]).toMatchObject({
      method: 'GET', path: '/api/v1/namespaces/rethinkdb/pods',
      query: { labelSelector: 'app=rethinkdb', fieldSelector: 'spec.nodeName=node-1' }, authorization: 'Bearer test-token',
    });
    expect(pods).toEqual([expect.objectContaining({ name: 'rethinkdb-1', nodeName: 'node-1', podIp: '198.18.0.11', cpuRequestCores: 0.5, cpuLimitCores: 1 })]);
  });

  test('when resolving a pod, then its node, IP, hostname and CPU request and limit are returned', async () => {
    await start();
    expect(await kube.getPod('rethinkdb-2')).toEqual({
      name: 'rethinkdb-2', uid: 'b729d5ae-1a31-447a-af6b-ce1e621e4152', nodeName: 'node-2', podIp: '198.18.0.12',
      hostname: 'rethinkdb-2', phase: 'Running', ready: true, annotations: {}, deleting: false, cpuRequestCores: 0.5, cpuLimitCores: 1, revision: null, readinessGates: {},
    });
  });

  test('when a pod is missing, then the recorded 404 Status becomes NOT_FOUND naming it', async () => {
    await start();
    await expect(kube.getPod('rethinkdb-99')).rejects.toMatchObject({ code: 'NOT_FOUND', statusCode: 404, message: 'Kubernetes: get pod rethinkdb-99: pods "rethinkdb-99" not found' });
  });

  test('when a node has no allocatable (no kubelet), then allocatable CPU is null; an unknown node does not exist', async () => {
    await start();
    expect(await kube.getNode('node-1')).toEqual({ name: 'node-1', allocatableCpuCores: null });
    expect(await kube.nodeExists('node-1')).toBe(true);
    expect(await kube.nodeExists('node-9')).toBe(false);
  });

  test('when reading and patching the StatefulSet scale, then a merge patch of spec.replicas is sent', async () => {
    await start();
    expect(await kube.getStatefulSetScale()).toEqual({ replicas: 4, currentReplicas: 0 });
    expect(await kube.patchStatefulSetScale(5)).toEqual({ replicas: 5 });
    expect(api.requests.at(-1)).toMatchObject({
      method: 'PATCH', path: '/apis/apps/v1/namespaces/rethinkdb/statefulsets/rethinkdb/scale',
      contentType: 'application/merge-patch+json', body: { spec: { replicas: 5 } },
    });
  });

  test('when an Event is created, then it names the pod in the same namespace with reason, message and source', async () => {
    await start();
    await kube.createPodEvent({ pod: { name: 'rethinkdb-2', uid: 'b729d5ae-1a31-447a-af6b-ce1e621e4152' }, reason: 'PrimariesMoved', message: 'moved 1 primary' });
    expect(api.requests.at(-1)).toMatchObject({
      method: 'POST', path: '/api/v1/namespaces/rethinkdb/events',
      body: {
        metadata: { generateName: 'rethinkdb-2.' }, reason: 'PrimariesMoved', message: 'moved 1 primary', type: 'Normal',
        involvedObject: { kind: 'Pod', apiVersion: 'v1', namespace: 'rethinkdb', name: 'rethinkdb-2', uid: 'b729d5ae-1a31-447a-af6b-ce1e621e4152' },
        source: { component: 'rethinkdb-k8s-manager' },
      },
    });
  });

  test('when annotating a pod, then a merge patch of metadata.annotations is sent and the patched pod returned', async () => {
    await start();
    const pod = await kube.annotatePod('rethinkdb-2', { 'example.com/draining': 'true', 'example.com/gone': null });
    expect(api.requests.at(-1)).toMatchObject({
      method: 'PATCH', path: '/api/v1/namespaces/rethinkdb/pods/rethinkdb-2', contentType: 'application/merge-patch+json',
      body: { metadata: { annotations: { 'example.com/draining': 'true', 'example.com/gone': null } } },
    });
    expect(pod.annotations).toEqual({ 'example.com/draining': 'true' });
  });

  test('when reviewing a token, then the recorded verdicts come back: pod identity, wrong audience, garbage', async () => {
    await start();
    const valid = await kube.reviewToken(recordedValidToken(), ['rethinkdb-manager']);
    expect(api.requests.at(-1)).toMatchObject({ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', body: { kind: 'TokenReview', spec: { audiences: ['rethinkdb-manager'] } } });
    expect(valid).toMatchObject({ authenticated: true, username: 'system:serviceaccount:rethinkdb:default', audiences: ['rethinkdb-manager'], error: null });
    expect(valid.extra['authentication.kubernetes.io/pod-name']).toEqual(['rethinkdb-2']);
    expect(await kube.reviewToken(recordedValidToken(), ['something-else'])).toMatchObject({ authenticated: false, error: expect.stringContaining('is invalid for the target audiences') });
    expect(await kube.reviewToken('garbage', ['rethinkdb-manager'])).toMatchObject({ authenticated: false, username: null, error: 'invalid bearer token' });
  });

  test('when reading pod metrics, then CPU in n, u and m and memory in Ki, Mi and Gi are summed per pod', async () => {
    await start();
    const metrics = await kube.listPodMetrics();
    expect(api.requests[0].query).toEqual({ labelSelector: 'app=rethinkdb' });
    expect(metrics.map((m) => [m.name, Number(m.cpuCores.toFixed(9))])).toEqual([
      ['rethinkdb-0', 0.212437118], ['rethinkdb-1', 0.934112876], ['rethinkdb-2', 0.000198], ['rethinkdb-3', 0.24],
    ]);
    expect(metrics[2].memoryBytes).toBe(2 ** 30);
  });

  test('when metrics-server is absent (recorded plain-text 404), then the error says the metrics API is missing', async () => {
    await start({ metricsAvailable: false });
    await expect(kube.listPodMetrics()).rejects.toMatchObject({ code: 'NOT_FOUND', message: 'Kubernetes: list pod metrics: 404 page not found' });
  });

  test('when the API server is down, then KUBERNETES_UNAVAILABLE (503)', async () => {
    await start();
    await api.close();
    await expect(kube.getPod('rethinkdb-2')).rejects.toMatchObject({ code: 'KUBERNETES_UNAVAILABLE', statusCode: 503 });
    api = null;
  });
});

describe('Kubernetes adapter: recorded refusals', () => {
  test('when RBAC forbids a call (recorded 403), then 503 KUBERNETES_UNAVAILABLE pointing at RBAC', async () => {
    api = await startFakeKubeApi([{ method: 'GET', path: '/api/v1/namespaces/rethinkdb/pods', answer: loadKubeFixture('forbidden-example.json') }]);
    kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock: createVirtualClock() });
    await expect(kube.listRethinkDbPods()).rejects.toMatchObject({
      code: 'KUBERNETES_UNAVAILABLE', message: expect.stringMatching(/\(403\): pods is forbidden: User "system:serviceaccount:rethinkdb:default" cannot list.*check the manager's ServiceAccount and RBAC$/),
    });
  });

  test('when the API rejects an Event (recorded 422), then the rejection is an error, not a silent success', async () => {
    api = await startFakeKubeApi([{ method: 'POST', path: '/api/v1/namespaces/rethinkdb/events', answer: loadKubeFixture('event-create-invalid.json') }]);
    kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock: createVirtualClock() });
    await expect(kube.createPodEvent({ pod: { name: 'x' }, reason: 'R', message: 'm' })).rejects.toMatchObject({
      code: 'INTERNAL', message: expect.stringContaining('(422): Event "x.fpqqv" is invalid'),
    });
  });
});

describe('Kubernetes adapter: time limits', () => {
  test('when the API server accepts and never answers, then KUBERNETES_UNAVAILABLE after the request timeout', async () => {
    api = await startFakeKubeApi([{ method: 'GET', path: '/api/v1/nodes/node-1', answer: () => new Promise(() => {}) }]);
    const { createServer } = await import('node:http');
    const silent = createServer(() => {});
    await new Promise((resolve) => silent.listen(0, '127.0.0.1', resolve));
    api.kubeConfig.clusters[0].server = `http://127.0.0.1:${silent.address().port}`;
    kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock: createVirtualClock(), requestTimeoutMs: 100 });
    await expect(kube.nodeExists('node-1')).rejects.toMatchObject({ code: 'KUBERNETES_UNAVAILABLE', message: 'Kubernetes API did not answer "get node node-1" within 100 ms' });
    silent.closeAllConnections();
    await new Promise((resolve) => silent.close(resolve));
  });
});

describe('RBAC derived from the adapter', () => {
  test('when deriving rules from KUBE_CALLS, then namespaced and cluster-scoped calls are split, one rule per resource', async () => {
    const { rbacRulesFromKubeCalls } = await import('../../src/kubernetes/rbac.js');
    const rules = rbacRulesFromKubeCalls([
      { apiGroup: '', resource: 'pods', verbs: ['list', 'get'], namespaced: true },
      { apiGroup: '', resource: 'nodes', verbs: ['get'], namespaced: false },
    ]);
    expect(rules).toEqual({
      namespaced: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] }],
      cluster: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get'] }],
    });
  });
});
