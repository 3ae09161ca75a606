// Least privilege against a real kube-apiserver with RBAC: the manager's ServiceAccount, bound by the RBAC that
// deploy/k8s ships (equal to the rules derived from KUBE_CALLS), can make every adapter call, and is refused
// everything else that was tried.

import {
  AuthorizationV1Api, CoreV1Api, PatchStrategy, RbacAuthorizationV1Api, setHeaderOptions,
} from '@kubernetes/client-node';
import { KUBE_CALLS, createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { rbacRulesFromKubeCalls } from '../../src/kubernetes/rbac.js';
import { renderKustomization } from '../helpers/deploy-files.js';
import { createVirtualClock } from '../helpers/harness.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import {
  NAMESPACE, applyObjects, installMetricsStandIn, mintServiceAccountToken, putNodeMetrics, putPodMetrics, seedRethinkDbCluster,
} from '../helpers/kube-objects.js';

const SA = 'rethinkdb-manager';
const SA_USER = `system:serviceaccount:${NAMESPACE}:${SA}`;
let api;
let managerKubeConfig;
let kube;

const mintToken = (core, name, audiences = []) => mintServiceAccountToken(api.kubeConfig, name, { audiences });

// The manager's ServiceAccount and RBAC exactly as shipped in deploy/k8s (manager-serviceaccount.yaml and
// manager-rbac.yaml, rendered through the kustomization), server-side applied.
function managerRbacObjects() {
  return renderKustomization().resources
    .filter(({ file }) => ['manager-serviceaccount.yaml', 'manager-rbac.yaml'].includes(file))
    .map(({ doc }) => doc);
}

beforeAll(async () => {
  api = await startKubeApiServer();
  await seedRethinkDbCluster(api.kubeConfig);
  await installMetricsStandIn(api.kubeConfig);
  const timestamp = '2026-11-21T11:59:50Z';
  await putPodMetrics(api.kubeConfig, { name: 'rethinkdb-1', timestamp, containers: [{ name: 'rethinkdb', usage: { cpu: '240m', memory: '398Mi' } }] });
  await putNodeMetrics(api.kubeConfig, { name: 'node-1', timestamp, usage: { cpu: '1', memory: '4Gi' } });
  await applyObjects(api.kubeConfig, managerRbacObjects());
  const core = api.kubeConfig.makeApiClient(CoreV1Api);
  managerKubeConfig = api.kubeConfigForToken(await mintToken(core, SA), SA);
  kube = createKubeAdapter({ kubeConfig: managerKubeConfig, namespace: NAMESPACE, clock: createVirtualClock() });
}, 120000);

afterAll(async () => { await api?.stop(); });

describe('the manager\'s ServiceAccount with only the rules derived from KUBE_CALLS', () => {
  // One entry per adapter function: a new adapter call without an entry here fails the first test.
  const calls = {
    getPod: () => kube.getPod('rethinkdb-1'),
    listRethinkDbPods: () => kube.listRethinkDbPods(),
    listRethinkDbPodsOnNode: () => kube.listRethinkDbPodsOnNode('node-1'),
    // The query gates' proxy pods, for holds (GATE_HOLD_POD_SELECTOR).
    listPodsBySelector: () => kube.listPodsBySelector('app=rethinkdb-proxy'),
    getNode: () => kube.getNode('node-1'),
    nodeExists: () => kube.nodeExists('node-1'),
    listPodMetrics: () => kube.listPodMetrics(),
    listNodeMetrics: () => kube.listNodeMetrics(),
    getStatefulSetScale: () => kube.getStatefulSetScale(),
    patchStatefulSetScale: () => kube.patchStatefulSetScale(4),
    annotatePod: () => kube.annotatePod('rethinkdb-1', { 'rethinkdb.example/test': 'x' }),
    reviewToken: async () => {
      const core = api.kubeConfig.makeApiClient(CoreV1Api);
      const review = await kube.reviewToken(await mintToken(core, 'default', ['rethinkdb-manager']), ['rethinkdb-manager']);
      expect(review).toMatchObject({ authenticated: true, username: `system:serviceaccount:${NAMESPACE}:default` });
      return review;
    },
    // The informer lists, then watches, with the manager's token: a cordon made after the list arrives only
    // through the watch.
    watchNodes: async () => {
      const admin = api.kubeConfig.makeApiClient(CoreV1Api);
      const cordon = (unschedulable) => admin.patchNode({ name: 'node-2', body: { spec: { unschedulable } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
      let watch;
      let listed;
      const seen = new Promise((resolve, reject) => {
        listed = new Promise((onListed) => {
          watch = kube.watchNodes({
            onNode: (n) => { if (n.name === 'node-2') { onListed(); if (n.unschedulable) resolve(n); } },
            onError: reject,
            retry: { minMs: 100, maxMs: 100 },
          });
        });
      });
      try {
        await listed;
        await cordon(true);
        return await seen;
      } finally {
        await watch.stop();
        await cordon(false);
      }
    },
    // The election's calls in turn: a read of no Lease, a create, a read of it, and an update at its version.
    getLease: async () => {
      expect(await kube.getLease('least-privilege')).toBeNull();
      const created = await kube.writeLease('least-privilege', { spec: { holderIdentity: 'a', leaseDurationSeconds: 15 }, annotations: {} });
      expect(await kube.getLease('least-privilege')).toMatchObject({ holderIdentity: 'a', resourceVersion: created.resourceVersion });
      return created;
    },
    writeLease: async () => {
      const lease = await kube.getLease('least-privilege') ?? await kube.writeLease('least-privilege', { spec: { holderIdentity: 'a' }, annotations: {} });
      const updated = await kube.writeLease('least-privilege', { resourceVersion: lease.resourceVersion, spec: { holderIdentity: 'b', leaseDurationSeconds: 15 }, annotations: { x: 'y' } });
      expect(updated).toMatchObject({ holderIdentity: 'b', annotations: { x: 'y' } });
      // A write at a version that is no longer current is a lost race, not an error.
      expect(await kube.writeLease('least-privilege', { resourceVersion: lease.resourceVersion, spec: { holderIdentity: 'c' }, annotations: {} })).toBeNull();
      return updated;
    },
    createPodEvent: async () => kube.createPodEvent({ pod: await kube.getPod('rethinkdb-1'), reason: 'Test', message: 'least privilege' }),
    getStatefulSetRollout: async () => kube.getStatefulSetRollout(),
    getStatefulSetPodTemplate: async () => kube.getStatefulSetPodTemplate(),
    setPodCondition: async () => kube.setPodCondition('rethinkdb-1', {
      type: 'rethinkdb-manager.io/replicas-ready', status: 'True', reason: 'Test', message: 'least privilege', previous: null,
    }),
  };

  test('when listing the adapter\'s calls, then each one is exercised below', () => {
    const adapterCalls = Object.entries(kube).filter(([, v]) => typeof v === 'function').map(([k]) => k).sort();
    expect(Object.keys(calls).sort()).toEqual(adapterCalls);
  });

  test.each(Object.keys(calls))('when the manager calls %s, then the API server allows it', async (name) => {
    await expect(calls[name]()).resolves.toBeDefined();
  });

  test('when it lists secrets or deletes a pod with its own token, then the API server answers 403', async () => {
    const core = managerKubeConfig.makeApiClient(CoreV1Api);
    await expect(core.listNamespacedSecret({ namespace: NAMESPACE })).rejects.toMatchObject({ code: 403 });
    await expect(core.deleteNamespacedPod({ name: 'rethinkdb-1', namespace: NAMESPACE })).rejects.toMatchObject({ code: 403 });
    await expect(core.readNamespacedPod({ name: 'rethinkdb-1', namespace: NAMESPACE })).resolves.toMatchObject({ metadata: { name: 'rethinkdb-1' } });
  });

  // RBAC's own verdict for the manager's user, asked as admin through SubjectAccessReview.
  async function allowed({ group, resource, verb, namespace, subresource }) {
    const authz = api.kubeConfig.makeApiClient(AuthorizationV1Api);
    const review = await authz.createSubjectAccessReview({
      body: { spec: { user: SA_USER, groups: ['system:serviceaccounts', `system:serviceaccounts:${NAMESPACE}`, 'system:authenticated'], resourceAttributes: { group, resource, verb, namespace, subresource } } },
    });
    return review.status.allowed;
  }
  const describeAccess = ({ group, resource, verb, namespace, subresource }) => `${verb} ${group || 'core'}/${resource}${subresource ? `/${subresource}` : ''}${namespace ? ` in ${namespace}` : ''}`;

  // The positive control for the refusals below: the same question about each KUBE_CALLS verb gets a yes.
  test.each(KUBE_CALLS.flatMap((c) => c.verbs.map((verb) => {
    const [resource, subresource] = c.resource.split('/');
    return { group: c.apiGroup, resource, subresource, verb, namespace: c.namespaced ? NAMESPACE : undefined };
  })).map((a) => [describeAccess(a), a]))('when asked whether it may %s, then RBAC says yes', async (_, access) => {
    expect(await allowed(access)).toBe(true);
  });

  // Near misses of what it needs: other verbs on the same resources, subresources, other namespaces.
  test.each([
    { group: '', resource: 'pods', verb: 'delete', namespace: NAMESPACE },
    { group: '', resource: 'pods', verb: 'create', namespace: NAMESPACE },
    { group: '', resource: 'pods', verb: 'watch', namespace: NAMESPACE },
    { group: '', resource: 'pods', subresource: 'status', verb: 'update', namespace: NAMESPACE },
    { group: '', resource: 'pods', subresource: 'status', verb: 'patch', namespace: 'default' },
    { group: '', resource: 'pods', subresource: 'eviction', verb: 'create', namespace: NAMESPACE },
    { group: '', resource: 'pods', verb: 'get', namespace: 'default' },
    { group: '', resource: 'secrets', verb: 'get', namespace: NAMESPACE },
    { group: '', resource: 'events', verb: 'delete', namespace: NAMESPACE },
    { group: '', resource: 'nodes', verb: 'delete' },
    { group: '', resource: 'nodes', verb: 'patch' },
    { group: 'apps', resource: 'statefulsets', verb: 'patch', namespace: NAMESPACE },
    { group: 'apps', resource: 'statefulsets', verb: 'list', namespace: NAMESPACE },
    { group: 'apps', resource: 'statefulsets', verb: 'get', namespace: 'default' },
    { group: 'metrics.k8s.io', resource: 'pods', verb: 'create', namespace: NAMESPACE },
    { group: 'authentication.k8s.io', resource: 'tokenreviews', verb: 'delete' },
    { group: 'coordination.k8s.io', resource: 'leases', verb: 'delete', namespace: NAMESPACE },
    { group: 'coordination.k8s.io', resource: 'leases', verb: 'get', namespace: 'kube-system' },
    { group: '', resource: 'serviceaccounts', subresource: 'token', verb: 'create', namespace: NAMESPACE },
  ].map((a) => [describeAccess(a), a]))('when asked whether it may %s, then RBAC says no', async (_, access) => {
    expect(await allowed(access)).toBe(false);
  });

  test('when the RBAC objects are applied again, then nothing changes and the Role holds exactly the derived rules', async () => {
    const rbac = api.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    const before = await rbac.readNamespacedRole({ name: SA, namespace: NAMESPACE });
    const applied = await applyObjects(api.kubeConfig, managerRbacObjects());
    expect(applied.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`)).toEqual([
      `ServiceAccount/${NAMESPACE}/${SA}`, `Role/${NAMESPACE}/${SA}`, `RoleBinding/${NAMESPACE}/${SA}`, `ClusterRole//${SA}`, `ClusterRoleBinding//${SA}`,
    ]);
    const after = await rbac.readNamespacedRole({ name: SA, namespace: NAMESPACE });
    expect(after.metadata.resourceVersion).toBe(before.metadata.resourceVersion);
    expect(after.rules).toEqual(rbacRulesFromKubeCalls(KUBE_CALLS).namespaced);
  });

  test('when a ServiceAccount has no rules, then the adapter reports the refusal as KUBERNETES_UNAVAILABLE naming RBAC', async () => {
    const core = api.kubeConfig.makeApiClient(CoreV1Api);
    const unboundKube = createKubeAdapter({ kubeConfig: api.kubeConfigForToken(await mintToken(core, 'default'), 'default'), namespace: NAMESPACE, clock: createVirtualClock() });
    await expect(unboundKube.listRethinkDbPods()).rejects.toMatchObject({
      code: 'KUBERNETES_UNAVAILABLE',
      message: expect.stringMatching(/refused "list pods" \(403\): pods is forbidden: User "system:serviceaccount:rethinkdb:default" cannot list resource "pods".*check the manager's ServiceAccount and RBAC/),
    });
  });
});
