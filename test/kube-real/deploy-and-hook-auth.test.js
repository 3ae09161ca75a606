// deploy/k8s applied to a real kube-apiserver, then the manager wired as deployed (its ConfigMap, its
// ServiceAccount's token, its RBAC) running the PRESTOP path and the hook authentication end to end: bound
// tokens minted by this API server and verified by TokenReview against it. The RethinkDB side is the sandbox.

import { createSign } from 'node:crypto';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import request from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { findResource, renderKustomization } from '../helpers/deploy-files.js';
import { createLogSink, createVirtualClock, primaryMap } from '../helpers/harness.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import {
  NAMESPACE, applyObjects, mintServiceAccountToken, seedRethinkDbCluster,
} from '../helpers/kube-objects.js';

const AUDIENCE = 'rethinkdb-manager';
// Pods rethinkdb-0..3 hold the sandbox's servers rethinkdb_0..3.
const PLAN = [0, 1, 2, 3].map((i) => ({ pod: `rethinkdb-${i}`, node: `node-${i}`, podIp: `198.18.0.${10 + i}`, hostIp: `198.18.1.${10 + i}` }));
const INITIAL_PRIMARIES = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'];

const { resources } = renderKustomization();
let api;
let core;
let pods;
let m;

const mintToken = (serviceAccount, { audiences = [AUDIENCE], pod = null } = {}) => mintServiceAccountToken(api.kubeConfig, serviceAccount, { audiences, pod });

// The same token with new time claims, signed with the API server's own key: what a stolen token looks like
// once it has expired. Re-signing with unchanged claims must still be accepted (the control in the test).
function resign(token, claims = {}) {
  const [header, payload] = token.split('.');
  const body = `${header}.${Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload, 'base64url')), ...claims })).toString('base64url')}`;
  return `${body}.${createSign('RSA-SHA256').update(body).sign(api.serviceAccountSigningKey).toString('base64url')}`;
}

const podNamed = (name) => pods.find((p) => p.metadata.name === name);
const bearer = (token) => ({ authorization: `Bearer ${token}` });
const annotationsOf = async (name) => (await core.readNamespacedPod({ name, namespace: NAMESPACE })).metadata.annotations ?? {};

beforeAll(async () => {
  api = await startKubeApiServer();
  core = api.kubeConfig.makeApiClient(CoreV1Api);
  await applyObjects(api.kubeConfig, resources.map(({ doc }) => doc));
  // No controller-manager or kubelet: the test plays them, with pods that run as the StatefulSet's ServiceAccount.
  pods = await seedRethinkDbCluster(api.kubeConfig, { plan: PLAN, withNamespace: false, withStatefulSet: false, serviceAccountName: 'rethinkdb' });
  // The manager as deployed: the ConfigMap plus what its Deployment adds, acting with its ServiceAccount's token.
  const configMap = findResource(resources, 'ConfigMap', 'rethinkdb-manager');
  const config = loadConfig({ ...configMap.data, KUBERNETES_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '198.19.192.1', AUTH_CACHE_SECONDS: '0' });
  const clock = createVirtualClock();
  const kube = createKubeAdapter({
    kubeConfig: api.kubeConfigForToken(await mintToken('rethinkdb-manager', { audiences: [] }), 'rethinkdb-manager'),
    namespace: config.kubernetes.namespace, podLabelSelector: config.kubernetes.podLabelSelector, statefulSetName: config.kubernetes.statefulSetName, clock,
  });
  const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock })), managedTables: [] });
  m = createManager({ config, store, kube, clock, logger: createLogger({ level: 'info', destination: createLogSink().stream }) });
  // As src/server.js does: the persisted state is loaded before the manager takes work.
  await m.reconcile();
}, 120000);

afterAll(async () => { await api?.stop(); });

describe('deploy/k8s on a real API server', () => {
  test('when every manifest is server-side applied, then each is stored, and applying again changes nothing', async () => {
    const again = await applyObjects(api.kubeConfig, resources.map(({ doc }) => doc));
    expect(again.map((o) => `${o.kind}/${o.metadata.name}`)).toEqual(resources.map(({ doc }) => `${doc.kind}/${doc.metadata.name}`));
    for (const object of again) expect(object.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    const third = await applyObjects(api.kubeConfig, resources.map(({ doc }) => doc));
    expect(third.map((o) => o.metadata.resourceVersion)).toEqual(again.map((o) => o.metadata.resourceVersion));
  });

  test('when the StatefulSet is read back, then its hooks, token projection and grace period are as written (nothing pruned)', async () => {
    const written = findResource(resources, 'StatefulSet', 'rethinkdb');
    const stored = await api.kubeConfig.makeApiClient(AppsV1Api).readNamespacedStatefulSet({ name: 'rethinkdb', namespace: NAMESPACE });
    const container = (s) => s.spec.template.spec.containers.find((c) => c.name === 'rethinkdb');
    expect(container(stored).lifecycle).toEqual(container(written).lifecycle);
    expect(stored.spec.template.spec.terminationGracePeriodSeconds).toBe(written.spec.template.spec.terminationGracePeriodSeconds);
    const projection = stored.spec.template.spec.volumes.find((v) => v.name === 'manager-token').projected.sources[0].serviceAccountToken;
    expect(projection).toEqual({ audience: AUDIENCE, expirationSeconds: 600, path: 'token' });
  });
});

describe('hook authentication end to end, TokenReview against the real API server', () => {
  test('when pod rethinkdb-2 calls PRESTOP for itself with its bound token, then it authenticates as that pod and the PRESTOP path runs through the API server', async () => {
    const token = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-2') });
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer(token));
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: 'rethinkdb_2', primariesOff: true, outcome: 'completed' });
    expect(await primaryMap(m.store)).not.toContain('rethinkdb_2');
    expect(m.audit.list()[0].actor).toBe('hook:prestop:rethinkdb-2 (system:serviceaccount:rethinkdb:rethinkdb (pod rethinkdb-2))');
    await m.marks.flush();
    expect(JSON.parse((await annotationsOf('rethinkdb-2'))['rethinkdb-manager.io/draining'])).toMatchObject({ serverName: 'rethinkdb_2' });
    let events = [];
    for (let i = 0; i < 50 && events.length === 0; i += 1) {
      events = (await core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: 'involvedObject.name=rethinkdb-2' })).items;
      if (events.length === 0) await new Promise((resolve) => { setTimeout(resolve, 100); });
    }
    expect(events).toEqual([expect.objectContaining({ reason: 'MovePrimariesFromServer', type: 'Normal', source: expect.objectContaining({ component: 'rethinkdb-k8s-manager' }) })]);
  });

  test('when pod rethinkdb-2\'s token is used to drain pod rethinkdb-1, then 403 and rethinkdb-1 keeps its primary and its annotations', async () => {
    const token = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-2') });
    const before = await primaryMap(m.store);
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1').set(bearer(token));
    expect(res.status).toBe(403);
    expect(res.body.message).toBe('pod rethinkdb-2 may only act on itself, not on "rethinkdb-1"');
    expect(await primaryMap(m.store)).toEqual(before);
    expect(before).toContain('rethinkdb_1');
    expect(await annotationsOf('rethinkdb-1')).toEqual({});
  });

  test('when a pod-bound token was minted for another audience, then 401 and the API server\'s reason', async () => {
    const token = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-1'), audiences: ['something-else'] });
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1').set(bearer(token));
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/token audiences \["something-else"\] is invalid for the target audiences \["rethinkdb-manager"\]/);
  });

  test('when a bound token has expired, then 401; the same token re-signed unexpired is accepted (the control)', async () => {
    const token = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-1') });
    const control = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true').set(bearer(resign(token)));
    expect(control.status).toBe(200);
    const nowSeconds = Math.floor(Date.now() / 1000);
    const expired = resign(token, { iat: nowSeconds - 7200, nbf: nowSeconds - 7200, exp: nowSeconds - 3600 });
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1').set(bearer(expired));
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/expired/);
    expect(await primaryMap(m.store)).toContain('rethinkdb_1');
  });

  test('when the token is the hook service account\'s but bound to no pod, then 403: a hook must prove which pod it is', async () => {
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1').set(bearer(await mintToken('rethinkdb')));
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/not bound to a pod/);
  });

  test('when a pod\'s token asks for an operator action, then 403; the operator ServiceAccount from deploy/k8s may', async () => {
    const podToken = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-1') });
    const refused = await request(m.app).post('/v1/actions/release-server').set(bearer(podToken)).send({ server: 'rethinkdb_2' });
    expect(refused.status).toBe(403);
    const operatorToken = await mintToken('rethinkdb-manager-operator');
    const res = await request(m.app).post('/v1/actions/release-server').set(bearer(operatorToken)).send({ server: 'rethinkdb_2' });
    expect(res.status).toBe(200);
    expect(m.audit.list()[0].actor).toBe('system:serviceaccount:rethinkdb:rethinkdb-manager-operator');
  });

  // The API server caches a successful verdict for 10 s (its token cache), so the token is used first after the
  // deletion; its bound-pod check then answers from an informer that lags the deletion a little.
  test('when the pod a token is bound to is deleted, then its token is refused (401, invalidated)', async () => {
    const token = await mintToken('rethinkdb', { pod: podNamed('rethinkdb-3') });
    await core.deleteNamespacedPod({ name: 'rethinkdb-3', namespace: NAMESPACE, gracePeriodSeconds: 0 });
    let res;
    for (let i = 0; i < 20; i += 1) {
      res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-3&dryRun=true').set(bearer(token));
      if (res.status === 401) break;
      await new Promise((resolve) => { setTimeout(resolve, 100); });
    }
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/service account token has been invalidated/);
  });
});
