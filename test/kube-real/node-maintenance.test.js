// Node maintenance through a real kube-apiserver: the manager, wired as deployed (deploy/k8s applied, its
// ServiceAccount's token and RBAC), watches the nodes and drains a cordoned or tainted node's servers before any
// preStop; and the API server calls the manager's eviction webhook over TLS before it admits an eviction.
// The RethinkDB side is the sandbox (on the system clock: the API server waits in real time).

import { jest } from '@jest/globals';
import { CoreV1Api, PatchStrategy, PolicyV1Api, setHeaderOptions } from '@kubernetes/client-node';
import { loadConfig } from '../../src/config.js';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { startWebhookServer } from '../../src/webhook-server.js';
import { findResource, renderKustomization } from '../helpers/deploy-files.js';
import { createLogSink, eventually, primaryShardsOf } from '../helpers/harness.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import { NAMESPACE, applyObjects, mintServiceAccountToken, seedRethinkDbCluster } from '../helpers/kube-objects.js';
import { makeWebhookCertificate } from '../helpers/webhook-tls.js';

jest.setTimeout(60000);

const PLAN = [0, 1, 2, 3].map((i) => ({ pod: `rethinkdb-${i}`, node: `node-${i}`, podIp: `198.18.0.${10 + i}`, hostIp: `198.18.1.${10 + i}` }));
const WEBHOOK = 'rethinkdb-manager-eviction';

const { resources } = renderKustomization();
let api;
let core;
let m;
let nodeWatch;
let webhook;
let tls;
let webhookCalls = 0;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const serverIdOf = async (name) => (await m.store.readCluster()).servers.find((s) => s.name === name).id;

const primariesOn = (name) => primaryShardsOf(m.store, name);

// No disruption controller runs here: the test writes the PodDisruptionBudget's status as it would, one
// disruption allowed, so that the API server's own PDB check lets an eviction through after the webhook.
async function allowOneDisruption() {
  const policy = api.kubeConfig.makeApiClient(PolicyV1Api);
  const pdb = await policy.readNamespacedPodDisruptionBudget({ name: 'rethinkdb', namespace: NAMESPACE });
  await policy.patchNamespacedPodDisruptionBudgetStatus({
    name: 'rethinkdb', namespace: NAMESPACE,
    body: { status: { observedGeneration: pdb.metadata.generation, disruptionsAllowed: 1, currentHealthy: 4, desiredHealthy: 3, expectedPods: 4 } },
  }, mergePatch);
}

const evict = (pod) => core.createNamespacedPodEviction({
  name: pod, namespace: NAMESPACE, body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace: NAMESPACE } },
});

// The API server's answer to a refused eviction: its status code and message.
async function refusal(promise) {
  try {
    await promise;
  } catch (err) {
    const body = typeof err.body === 'string' ? JSON.parse(err.body) : err.body;
    return { code: err.code, message: body?.message };
  }
  throw new Error('the eviction was admitted');
}

beforeAll(async () => {
  api = await startKubeApiServer();
  core = api.kubeConfig.makeApiClient(CoreV1Api);
  tls = makeWebhookCertificate();
  // Everything in deploy/k8s but the webhook, which is applied below pointing at this test's listener.
  await applyObjects(api.kubeConfig, resources.map(({ doc }) => doc).filter((doc) => doc.kind !== 'ValidatingWebhookConfiguration'));
  await seedRethinkDbCluster(api.kubeConfig, { plan: PLAN, withNamespace: false, withStatefulSet: false, serviceAccountName: 'rethinkdb' });
  const configMap = findResource(resources, 'ConfigMap', 'rethinkdb-manager');
  const config = loadConfig({ ...configMap.data, KUBERNETES_NAMESPACE: NAMESPACE, KUBERNETES_SERVICE_HOST: '198.19.192.1', AUTH_CACHE_SECONDS: '0' });
  const clock = createSystemClock();
  const token = await mintServiceAccountToken(api.kubeConfig, 'rethinkdb-manager', { audiences: [] });
  const kube = createKubeAdapter({
    kubeConfig: api.kubeConfigForToken(token, 'rethinkdb-manager'), namespace: NAMESPACE, podLabelSelector: config.kubernetes.podLabelSelector, clock,
  });
  const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock, handoverMs: 50 })), managedTables: [] });
  const logger = createLogger({ level: 'info', destination: createLogSink().stream });
  m = createManager({ config, store, kube, clock, logger });
  await m.reconcile();
  nodeWatch = m.watchNodes();
  // Counts the API server's calls, so that the tests start once it has picked the webhook configuration up.
  const app = (req, res) => { webhookCalls += 1; m.webhookApp(req, res); };
  webhook = await startWebhookServer({ app, certFile: tls.certFile, keyFile: tls.keyFile, port: 0, host: '127.0.0.1', logger });
  const shipped = findResource(resources, 'ValidatingWebhookConfiguration', WEBHOOK);
  const clientConfig = { url: `https://127.0.0.1:${webhook.port}/v1/admission/eviction`, caBundle: tls.ca.toString('base64') };
  await applyObjects(api.kubeConfig, [{ ...shipped, webhooks: shipped.webhooks.map((w) => ({ ...w, clientConfig })) }]);
  // A dry-run eviction reaches the webhook (which answers it without acting) once the API server uses it.
  await eventually(async () => {
    await core.createNamespacedPodEviction({
      name: 'rethinkdb-3', namespace: NAMESPACE, dryRun: 'All', body: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: 'rethinkdb-3', namespace: NAMESPACE } },
    }).catch(() => null);
    return webhookCalls > 0;
  }, { what: 'the API server calls the webhook' });
}, 120000);

afterAll(async () => {
  await nodeWatch?.stop();
  await webhook?.close();
  await api?.stop();
  tls?.remove();
});

describe('node signals from the real API server', () => {
  test('when node-1 is cordoned, then rethinkdb_1 is drained (no primary, marked for the node), and uncordoning it gives the primaries back', async () => {
    expect(await primariesOn('rethinkdb_1')).not.toEqual([]);
    await core.patchNode({ name: 'node-1', body: { spec: { unschedulable: true } } }, mergePatch);
    await eventually(async () => (await primariesOn('rethinkdb_1')).length === 0, { what: 'rethinkdb_1 loses its primaries' });
    const mark = await m.marks.getDraining(await serverIdOf('rethinkdb_1'));
    expect(mark.origin).toMatchObject({ kind: 'node', node: 'node-1', signal: 'cordon' });
    // The primaries are off before the drain has waited for the new ones to act, and the audit comes after that.
    const record = await eventually(() => m.audit.list().find((r) => r.action === 'drain-node'), { what: 'the drain-node audit record' });
    expect(record).toMatchObject({ actor: 'manager:node-watch', pod: 'rethinkdb-1', outcome: 'completed', target: { node: 'node-1', server: 'rethinkdb_1', signal: 'cordon' } });
    expect(record.reason).toMatch(/^node node-1 is cordoned \(spec\.unschedulable\): its pods will be evicted; demote the primaries on rethinkdb_1 now, before any preStop/);
    const annotations = await eventually(async () => {
      const pod = await core.readNamespacedPod({ name: 'rethinkdb-1', namespace: NAMESPACE });
      return pod.metadata.annotations?.['rethinkdb-manager.io/draining'] && pod.metadata.annotations;
    }, { what: 'the draining mark persisted on the pod' });
    expect(JSON.parse(annotations['rethinkdb-manager.io/draining'])).toMatchObject({ origin: { kind: 'node', node: 'node-1' } });
    const events = await eventually(async () => {
      const list = (await core.listNamespacedEvent({ namespace: NAMESPACE, fieldSelector: 'involvedObject.name=rethinkdb-1' })).items;
      return list.some((e) => e.reason === 'DrainNode') && list;
    }, { what: 'a DrainNode Event on rethinkdb-1' });
    expect(events.map((e) => e.reason)).toContain('MovePrimariesFromNode');

    await core.patchNode({ name: 'node-1', body: { spec: { unschedulable: false } } }, mergePatch);
    await eventually(async () => (await primariesOn('rethinkdb_1')).length > 0, { what: 'rethinkdb_1 gets primaries back' });
    expect(await m.marks.getDraining(await serverIdOf('rethinkdb_1'))).toBeNull();
    await eventually(() => m.audit.list()[0].action === 'end-node-drain', { what: 'the end-node-drain audit record' });
    expect(m.audit.list()[0]).toMatchObject({ action: 'end-node-drain', pod: 'rethinkdb-1', outcome: 'completed' });
  });

  test('when the cluster autoscaler\'s ToBeDeletedByClusterAutoscaler taint is put on node-2, then rethinkdb_2 is drained; when it goes, released', async () => {
    await core.patchNode({ name: 'node-2', body: { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', value: '1700000000', effect: 'NoSchedule' }] } } }, mergePatch);
    await eventually(async () => (await primariesOn('rethinkdb_2')).length === 0, { what: 'rethinkdb_2 loses its primaries' });
    expect((await m.marks.getDraining(await serverIdOf('rethinkdb_2'))).origin).toMatchObject({ kind: 'node', node: 'node-2', signal: 'ToBeDeletedByClusterAutoscaler' });
    await core.patchNode({ name: 'node-2', body: { spec: { taints: null } } }, mergePatch);
    // Taken off while the drain may still be waiting for the new primaries to act: handled right after it.
    await eventually(async () => !(await m.marks.getDraining(await serverIdOf('rethinkdb_2'))), { what: 'rethinkdb_2 released' });
    await eventually(async () => (await primariesOn('rethinkdb_2')).length > 0, { what: 'rethinkdb_2 gets primaries back' });
    await eventually(() => m.audit.list().some((r) => r.action === 'end-node-drain' && r.pod === 'rethinkdb-2'), { what: 'the node-2 drain ended (its rebalance done)' });
  });
});

describe('the eviction webhook called by the real API server over TLS', () => {
  test('when rethinkdb-2 is evicted, then its primaries are off before the eviction is admitted, and the pod is being deleted', async () => {
    expect(await primariesOn('rethinkdb_2')).not.toEqual([]);
    await allowOneDisruption();
    await evict('rethinkdb-2');
    // Read as soon as the API server answered: the webhook answered first, so the demotion is already done.
    expect(await primariesOn('rethinkdb_2')).toEqual([]);
    const pod = await core.readNamespacedPod({ name: 'rethinkdb-2', namespace: NAMESPACE });
    expect(pod.metadata.deletionTimestamp).toBeTruthy();
    expect((await m.marks.getDraining(await serverIdOf('rethinkdb_2'))).origin.kind).toBe('eviction');
    expect(m.audit.list().find((r) => r.action === 'eviction-review')).toMatchObject({
      pod: 'rethinkdb-2', outcome: 'allowed', actor: 'hook:eviction:rethinkdb-2 (admin)', target: { pod: 'rethinkdb-2', server: 'rethinkdb_2' },
    });
  });

  test('when rethinkdb-3 is evicted while rethinkdb-2 is still leaving (they share shards of 3 replicas), then 429 with the manager\'s reason, and nothing changed', async () => {
    const before = await primariesOn('rethinkdb_3');
    await allowOneDisruption();
    const { code, message } = await refusal(evict('rethinkdb-3'));
    expect(code).toBe(429);
    expect(message).toMatch(/^admission webhook "eviction\.rethinkdb-manager\.io" denied the request: rethinkdb-k8s-manager: evicting pod rethinkdb-3 now is not safe, retry later: ycsb\.usertable\[1\] would lose its majority: besides rethinkdb_3, rethinkdb_2 \(leaving: its pod is stopping or being evicted\)/);
    expect(await primariesOn('rethinkdb_3')).toEqual(before);
    expect(await m.marks.getDraining(await serverIdOf('rethinkdb_3'))).toBeNull();
    const pod = await core.readNamespacedPod({ name: 'rethinkdb-3', namespace: NAMESPACE });
    expect(pod.metadata.deletionTimestamp).toBeUndefined();
    expect(m.audit.list()[0]).toMatchObject({ action: 'eviction-review', pod: 'rethinkdb-3', outcome: 'denied_refused' });
  });

  test('when a pod of the namespace that is not a RethinkDB pod is evicted, then it is allowed at once', async () => {
    await core.createNamespacedPod({ namespace: NAMESPACE, body: { metadata: { name: 'client' }, spec: { nodeName: 'node-0', containers: [{ name: 'c', image: 'busybox' }] } } });
    await evict('client');
    expect((await core.readNamespacedPod({ name: 'client', namespace: NAMESPACE })).metadata.deletionTimestamp).toBeTruthy();
  });

  test('when the manager is down, then the eviction goes ahead without demotion (failurePolicy Ignore, as deploy/k8s documents)', async () => {
    expect(findResource(resources, 'ValidatingWebhookConfiguration', WEBHOOK).webhooks[0].failurePolicy).toBe('Ignore');
    await webhook.close();
    webhook = null;
    const before = await primariesOn('rethinkdb_0');
    expect(before).not.toEqual([]);
    await allowOneDisruption();
    await evict('rethinkdb-0');
    expect((await core.readNamespacedPod({ name: 'rethinkdb-0', namespace: NAMESPACE })).metadata.deletionTimestamp).toBeTruthy();
    expect(await primariesOn('rethinkdb_0')).toEqual(before);
  });
});
