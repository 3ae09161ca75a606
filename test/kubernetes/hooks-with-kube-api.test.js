// The hooks with the real Kubernetes adapter talking HTTP to an API server that answers with recorded
// responses (RethinkDB side: the sandbox). PRESTOP resolves the pod through the API, persists the draining
// mark as a pod annotation and creates an Event on the pod.

import request from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { recordedKubeRoutes, startFakeKubeApi } from '../helpers/fake-kube-api.js';
import { createLogSink, createVirtualClock, eventually, primaryMap } from '../helpers/harness.js';

let api;
afterEach(async () => { await api?.close(); api = null; });

async function managerOnFakeApi() {
  api = await startFakeKubeApi(recordedKubeRoutes());
  const clock = createVirtualClock();
  const config = loadConfig({ LOG_LEVEL: 'info' });
  const kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock });
  const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock })), managedTables: [] });
  const m = createManager({ config, store, kube, clock, logger: createLogger({ level: 'info', destination: createLogSink().stream }) });
  // As src/server.js does: the persisted state is loaded before the manager takes work.
  await m.reconcile();
  return m;
}

describe('hooks with the Kubernetes adapter over HTTP', () => {
  test('when PRESTOP arrives for rethinkdb-2, then the pod is read from the API, its primaries move, the mark is annotated and an Event is created', async () => {
    const m = await managerOnFakeApi();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: 'rethinkdb_2', primariesOff: true, outcome: 'completed' });
    expect(await primaryMap(m.store)).not.toContain('rethinkdb_2');
    await m.marks.flush();
    // The Event is posted without waiting for it: until the API has received it.
    await eventually(() => api.requests.some((r) => r.method === 'POST' && r.path.endsWith('/events')), { intervalMs: 2, what: 'the Event posted' });
    const calls = api.requests.map((r) => `${r.method} ${r.path}`);
    expect(calls).toContain('GET /api/v1/namespaces/rethinkdb/pods/rethinkdb-2');
    const patch = api.requests.find((r) => r.method === 'PATCH');
    expect(patch).toMatchObject({ path: '/api/v1/namespaces/rethinkdb/pods/rethinkdb-2', contentType: 'application/merge-patch+json' });
    expect(JSON.parse(patch.body.metadata.annotations['rethinkdb-manager.io/draining'])).toMatchObject({ serverName: 'rethinkdb_2', reason: expect.stringMatching(/pod rethinkdb-2 is stopping/) });
    const event = api.requests.find((r) => r.method === 'POST' && r.path.endsWith('/events'));
    expect(event.body).toMatchObject({ involvedObject: { kind: 'Pod', name: 'rethinkdb-2' }, reason: 'MovePrimariesFromServer', type: 'Normal' });
  });

  test('when the API answers 404 for the pod, then PRESTOP is 404 POD_NOT_FOUND and nothing changes', async () => {
    const m = await managerOnFakeApi();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-9');
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('POD_NOT_FOUND');
    // The RethinkDB pods the API lists are named, so that a typo shows what was meant.
    expect(res.body.message).toBe('pod "rethinkdb-9" does not exist in namespace rethinkdb (RethinkDB pods: rethinkdb-0, rethinkdb-1, rethinkdb-2, rethinkdb-3)');
    expect(await primaryMap(m.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
    expect(api.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });

  test('when the metrics API is absent, then a monitor poll fails, is counted, and changes nothing', async () => {
    api = await startFakeKubeApi(recordedKubeRoutes({ metricsAvailable: false }));
    const clock = createVirtualClock();
    const kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock });
    const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock })), managedTables: [] });
    const m = createManager({ config: loadConfig({}), store, kube, clock, logger: createLogger({ level: 'silent' }) });
    const result = await m.monitor.pollOnce();
    expect(result.error).toMatch(/404 page not found/);
    expect(m.monitor.view()).toMatchObject({ polls: 0, failures: 1 });
    expect(await primaryMap(store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });
});
