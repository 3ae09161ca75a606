// POSTSTART, PERFWARNING, the monitor and persisted state, end to end on the sandbox through the routes.

import request from 'supertest';
import { createSandboxCluster } from '../../src/sandbox/sandbox-cluster.js';
import { createSandboxKube } from '../../src/sandbox/sandbox-kube.js';
import {
  createSandboxHarness, createVirtualClock, primaryMap, readCounter,
} from '../helpers/harness.js';

const INITIAL = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'];
const json = (req, body) => req.set('content-type', 'application/json').send(JSON.stringify(body));

// Until the pods' hook calls (made over HTTP in the background) are answered and the operations they started, and any
// those started in turn, have finished.
async function settle(h) {
  for (let round = 0; round < 100; round += 1) {
    await h.kube.hooksAnswered();
    await h.operations.drain();
    if (h.operations.runningCount() === 0) return h.operations.list();
  }
  throw new Error('operations did not finish');
}

async function replicasOf(h, serverName) {
  const cluster = await h.store.readCluster();
  const id = cluster.servers.find((s) => s.name === serverName)?.id;
  return cluster.tables[0].shards.filter((s) => s.replicas.includes(id)).map((s) => s.index);
}

// rethinkdb-1's perf warning as a monitor leaves it on the pod, raised 2 minutes ago (short, unknown duration).
async function leaveMonitorWarning(h, reason) {
  const server = (await h.store.readCluster()).servers.find((s) => s.name === 'rethinkdb_1');
  await h.marks.setPerfWarning(server.id, {
    source: 'monitor', signal: 'interference', reason, durationSeconds: null, long: false, since: new Date(h.clock.now() - 120000).toISOString(), expiresAt: null,
  }, { serverName: 'rethinkdb_1', pod: 'rethinkdb-1' });
}

describe('POST /v1/hooks/poststart', () => {
  test('when the StatefulSet scales out, then the new pod calls POSTSTART and is brought in as an expansion', async () => {
    const h = createSandboxHarness();
    await h.kube.patchStatefulSetScale(5);
    await settle(h);
    const op = h.operations.list().find((o) => o.kind === 'poststart');
    expect(op).toMatchObject({ status: 'succeeded', params: { pod: 'rethinkdb-4' } });
    expect(op.report.decision.kind).toBe('expansion');
    expect((await replicasOf(h, 'rethinkdb_4')).length).toBe(2); // 12 replicas over 5 servers
    expect(new Set(await primaryMap(h.store)).size).toBe(4); // 4 primaries stay on 4 different servers
  });

  const returnPod = async (h) => {
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
  };
  // The sandbox models no traffic (its stats are empty, so the choice falls back to counts); what is checked here is
  // that the levelling the manager starts itself asks RethinkDB for traffic, and the operator's does not.
  test.each([
    ['an expansion', true, {}, async (h) => { await h.kube.patchStatefulSetScale(5); }],
    ['a returning server (POSTSTART_GIVE_BACK=balance, the default)', true, {}, returnPod],
    ['a returning server with POSTSTART_GIVE_BACK=always', false, { POSTSTART_GIVE_BACK: 'always' }, returnPod],
  ])('when primaries are levelled for %s, then client traffic is read to choose them: %p', async (_, readsTraffic, env, act) => {
    let statsReads = 0;
    const h = createSandboxHarness({ env, wrapSource: (source) => ({ ...source, readTableServerStats: async () => { statsReads += 1; return []; } }) });
    await act(h);
    await settle(h);
    expect(h.operations.list().find((o) => o.kind === 'poststart')).toMatchObject({ status: 'succeeded' });
    expect(statsReads > 0).toBe(readsTraffic);
    await request(h.app).post('/v1/actions/rebalance-primaries').set('content-type', 'application/json').send('{}');
    expect(statsReads > 0).toBe(readsTraffic);
  });

  test('when called, then 202 at once with an operation; a repeat while it runs returns the same operation', async () => {
    let hold = null;
    const h = createSandboxHarness({
      // While `hold` is set, reads wait on it: the first POSTSTART stays in its join wait.
      wrapSource: (source) => ({ ...source, readSystemTables: async () => { if (hold) await hold.promise; return source.readSystemTables(); } }),
    });
    hold = {};
    hold.promise = new Promise((resolve) => { hold.resolve = resolve; });
    const first = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    expect(first.status).toBe(202);
    expect(first.headers.location).toBe(`/v1/operations/${first.body.operation.id}`);
    const again = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    expect(again.status).toBe(202);
    expect(again.body).toMatchObject({ repeated: true, operation: { id: first.body.operation.id } });
    const { resolve } = hold;
    hold = null;
    resolve();
    await settle(h);
    expect(h.operations.list().filter((o) => o.kind === 'poststart')).toHaveLength(1);
    const op = (await request(h.app).get(first.headers.location)).body;
    expect(op.report.decision.kind).toBe('returning');
    expect(await primaryMap(h.store)).toEqual(INITIAL);
  });

  test('when the StatefulSet scales in, then the stopping pod gets PRESTOP before it stops, and no shard loses its primary', async () => {
    const h = createSandboxHarness();
    await h.kube.patchStatefulSetScale(3);
    expect(h.kube.podNames()).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
    const primaries = await primaryMap(h.store);
    expect(primaries).not.toContain('rethinkdb_3');
    const cluster = (await request(h.app).get('/v1/cluster')).body;
    expect(cluster.tables[0].readyForWrites).toBe(true);
    expect(cluster.tables[0].shards.map((s) => s.acting[0])).toEqual(primaries);
  });

  test.each([['Bad_Pod'], ['']])('when the pod is %j, then 400 and no operation starts', async (pod) => {
    const h = createSandboxHarness();
    const res = await request(h.app).post(`/v1/hooks/poststart?pod=${pod}`);
    expect(res.status).toBe(400);
    expect(h.operations.list()).toEqual([]);
  });

  test('when the pod does not exist, then 404 POD_NOT_FOUND, as for PRESTOP, and no operation starts', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-77');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'POD_NOT_FOUND', message: expect.stringContaining('rethinkdb-77') });
    expect(h.operations.list()).toEqual([]);
  });

  test('when a replacement joins while the lost server\'s shards are still electing, then the unfinished work is retried until the lost server is gone from the configs', async () => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/sandbox/nodes/node-1/crash');
    h.clock.advance(2000);
    await request(h.app).post('/v1/sandbox/pods');
    await settle(h);
    const replaced = h.operations.list().find((o) => o.kind === 'replace-server');
    expect(replaced.report.outcome).toBe('partial');
    expect(replaced.report.notDone).toEqual([expect.objectContaining({ shard: 1, reason: expect.stringMatching(/waiting_for_primary/) })]);
    // The election ends; the periodic work retries what could not be done yet.
    for (let i = 0; i < 10 && (await replicasOf(h, 'rethinkdb_1')).length > 0; i += 1) {
      h.clock.advance(h.config.retry.maxMs);
      await h.tick({ poll: false });
      await settle(h);
    }
    expect(await replicasOf(h, 'rethinkdb_1')).toEqual([]);
    const cluster = await h.store.readCluster();
    const newId = cluster.servers.find((s) => s.name === 'rethinkdb_4').id;
    expect(cluster.tables[0].shards.filter((s) => s.replicas.includes(newId) && !s.nonvoting.includes(newId)).map((s) => s.index)).toContain(1);
    expect(await h.marks.migrations()).toEqual([]);
    const retries = h.operations.list().filter((o) => o.kind === 'replace-server');
    expect(retries.at(-1).report.outcome).toBe('completed');
  });

  test('when the pod exists but no server ever joins for it, then the operation fails at the join deadline saying so', async () => {
    const h = createSandboxHarness({ env: { POSTSTART_JOIN_TIMEOUT_SECONDS: '5' } });
    h.model.crashServer('rethinkdb_1', { mode: 'kill' });
    const res = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    expect(res.status).toBe(202);
    await settle(h);
    expect(h.operations.get(res.body.operation.id)).toMatchObject({ status: 'failed', error: { error: 'DEADLINE_EXCEEDED', message: 'no RethinkDB server for pod rethinkdb-1 joined within 5 s' } });
  });
});

// A 30 s warning on rethinkdb-1 whose server is killed before it expires: the restore waits for it.
async function warningExpiredWhileDown() {
  const h = createSandboxHarness();
  await json(request(h.app).post('/v1/hooks/perfwarning'), { pod: 'rethinkdb-1', durationSeconds: 30 });
  h.model.crashServer('rethinkdb_1', { mode: 'kill' });
  h.clock.advance(31000);
  const [expired] = await h.events.expireDue();
  expect(expired.restore.action).toBe('wait');
  return h;
}

describe('PERFWARNING', () => {
  test.each([
    [{}, /exactly one of pod, node/],
    [{ pod: 'rethinkdb-1', node: 'node-1' }, /exactly one of pod, node/],
    [{ pod: 'rethinkdb-1', durationSeconds: 0 }, /durationSeconds must be >= 1/],
    [{ pod: 'rethinkdb-1', durationSeconds: '60' }, /durationSeconds must be integer/],
    [{ pod: 'rethinkdb-1', extra: true }, /extra is not an accepted field/],
  ])('when the body is %j, then 400 naming the problem and nothing changes', async (body, message) => {
    const h = createSandboxHarness();
    const res = await json(request(h.app).post('/v1/hooks/perfwarning'), body);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect(await primaryMap(h.store)).toEqual(INITIAL);
    expect(await h.marks.perfWarnings()).toEqual([]);
  });

  test('when a node is warned, then every RethinkDB pod on it is demoted, and DELETE restores it', async () => {
    const h = createSandboxHarness();
    const res = await json(request(h.app).post('/v1/hooks/perfwarning'), { node: 'node-2', reason: 'kernel upgrade' });
    expect(res.status).toBe(200);
    expect(res.body.pods).toEqual([expect.objectContaining({ pod: 'rethinkdb-2', server: 'rethinkdb_2', outcome: 'completed', expiresAt: null })]);
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_2');
    const ended = await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2');
    expect(ended.status).toBe(200);
    expect(ended.body.restore.action).toBe('rebalance-primaries');
    expect(await primaryMap(h.store)).toEqual(INITIAL);
    const again = await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2');
    expect(again.status).toBe(404);
  });

  test('when a long warning is raised, then the answer links the replica migration it started', async () => {
    const h = createSandboxHarness();
    const res = await json(request(h.app).post('/v1/hooks/perfwarning'), { pod: 'rethinkdb-1', durationSeconds: 3600 });
    const { migration } = res.body.pods[0];
    expect(migration).toEqual({ id: expect.any(String), status: 'running', href: `/v1/operations/${migration.id}` });
    expect((await request(h.app).get(migration.href)).body).toMatchObject({ id: migration.id, kind: 'migrate-replicas-off' });
    await settle(h);
  });

  test('when primaries are rebalanced while a warning is active, then none goes back onto the warned server until it ends', async () => {
    const h = createSandboxHarness();
    await json(request(h.app).post('/v1/hooks/perfwarning'), { pod: 'rethinkdb-1' });
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    const rebalanced = await json(request(h.app).post('/v1/actions/rebalance-primaries'), {});
    expect(rebalanced.status).toBe(200);
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1');
    expect(await primaryMap(h.store)).toEqual(INITIAL);
  });

  test('when a node with two RethinkDB pods is warned, then one plan demotes both: one handover per shard, none onto the other pod', async () => {
    const clock = createVirtualClock();
    const model = createSandboxCluster({ clock });
    // rethinkdb-1 and rethinkdb-2 share node-1; shard 1 (primary rethinkdb_1) also has a replica on rethinkdb_2.
    const kube = createSandboxKube({ model, clock, nodeOfPod: (ordinal) => (ordinal === 2 ? 'node-1' : `node-${ordinal}`) });
    const primariesWritten = [];
    const h = createSandboxHarness({
      clock,
      existing: { model, kube },
      wrapSource: (source) => ({
        ...source,
        updateTableShards: async (tableId, shards) => { primariesWritten.push({ tableId, primaries: shards.map((s) => s.primary_replica) }); return source.updateTableShards(tableId, shards); },
      }),
    });
    await h.reconcile();
    const cluster = await h.store.readCluster();
    const nameOf = (ref) => cluster.servers.find((s) => s.id === ref || s.name === ref).name;
    const res = await json(request(h.app).post('/v1/hooks/perfwarning'), { node: 'node-1' });
    expect(res.status).toBe(200);
    expect(res.body.pods.map((p) => p.pod)).toEqual(['rethinkdb-1', 'rethinkdb-2']);
    const after = await primaryMap(h.store);
    expect(after).not.toContain('rethinkdb_1');
    expect(after).not.toContain('rethinkdb_2');
    // Each shard's primary changed at most once over every write made to ycsb.usertable.
    const usertable = cluster.tables.find((t) => t.name === 'usertable').id;
    const writes = primariesWritten.filter((w) => w.tableId === usertable).map((w) => w.primaries);
    const changesPerShard = INITIAL.map((initial, shard) => {
      let current = initial;
      let changes = 0;
      for (const written of writes) {
        if (nameOf(written[shard]) !== current) { changes += 1; current = nameOf(written[shard]); }
      }
      return changes;
    });
    expect(changesPerShard).toEqual([0, 1, 1, 0]);
    const demotions = h.audit.list({ limit: 10 }).filter((e) => e.action.startsWith('move-primaries'));
    expect(demotions).toHaveLength(1);
    expect((await h.marks.perfWarnings()).map((w) => w.pod).sort()).toEqual(['rethinkdb-1', 'rethinkdb-2']);
  });

  test('when a warning ends while the server is down, then primaries return only once it is healthy again', async () => {
    const h = await warningExpiredWhileDown();
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    h.model.restoreServer('rethinkdb_1');
    const [retried] = await h.events.expireDue();
    expect(retried.restore.action).toBe('rebalance-primaries');
    expect(await primaryMap(h.store)).toEqual(INITIAL);
  });

  test('when every action runs, then each is audited: a log line, a Kubernetes Event on the pod, and GET /v1/events', async () => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-3');
    const events = (await request(h.app).get('/v1/events')).body.events;
    expect(events[0]).toMatchObject({ actor: 'hook:prestop:rethinkdb-3 (anonymous)', action: 'move-primaries-from-server', pod: 'rethinkdb-3', outcome: 'completed', reason: expect.stringMatching(/pod rethinkdb-3 is stopping/) });
    await new Promise((resolve) => { setImmediate(resolve); });
    expect(h.kube.events()).toEqual([expect.objectContaining({ pod: 'rethinkdb-3', reason: 'MovePrimariesFromServer', type: 'Normal' })]);
    expect(h.logs.some((l) => l.audit && l.action === 'move-primaries-from-server')).toBe(true);
  });
});

describe('HEARTBEAT_TIMEOUT_SECONDS', () => {
  const heartbeatOf = async (h) => (await h.store.readCluster()).heartbeatTimeoutSecs;
  test('when it is set, then the leading manager keeps the cluster at it, checked every 30 s; a PRESTOP\'s lowering comes first and gives it back', async () => {
    const h = createSandboxHarness({ env: { HEARTBEAT_TIMEOUT_SECONDS: '3' } });
    expect(await heartbeatOf(h)).not.toBe(3);
    expect((await h.tick()).heartbeat).toMatchObject({ event: 'HEARTBEAT_STEADY', heartbeatTimeoutSecs: 3 });
    expect(await heartbeatOf(h)).toBe(3);
    // Changed by hand: put back at the next check, not before.
    await h.store.writeHeartbeatTimeout(10);
    expect((await h.tick()).heartbeat).toBeNull();
    h.clock.advance(30000);
    expect((await h.tick()).heartbeat).toMatchObject({ event: 'HEARTBEAT_STEADY' });
    expect(await heartbeatOf(h)).toBe(3);
    // A PRESTOP lowers it to 2 until its server has left; the steady value does not fight it.
    const prestop = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-2');
    expect(prestop.body.heartbeat).toMatchObject({ lowered: true, from: 3, to: 2 });
    h.clock.advance(30000);
    await h.tick();
    expect(await heartbeatOf(h)).toBe(2);
    expect(h.logs.filter((l) => l.msg === 'heartbeat timeout set to the configured value')).toHaveLength(2);
  });

  test('when it is off (the default), then the cluster\'s value is left alone', async () => {
    const h = createSandboxHarness();
    const before = await heartbeatOf(h);
    h.clock.advance(60000);
    expect((await h.tick()).heartbeat).toBeNull();
    expect(await heartbeatOf(h)).toBe(before);
  });
});

describe('PRESTOP with no eligible replica left', () => {
  test('when a stopping server holds the last eligible replica of a shard, then it demotes what it can and reports the rest', async () => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-0');
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-3');
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(false);
    expect(res.body.report.changes.length).toBeGreaterThan(0);
    expect(res.body.report.skipped).toEqual([expect.objectContaining({ shard: 3, reason: expect.stringMatching(/draining/) })]);
  });
});

describe('the monitor', () => {
  test('when a poll fails, then it is counted and logged and the next poll works', async () => {
    const h = createSandboxHarness();
    const real = h.kube.listPodMetrics;
    h.kube.listPodMetrics = async () => { throw new Error('metrics API unavailable'); };
    expect(await h.monitor.pollOnce()).toEqual({ error: 'metrics API unavailable' });
    h.kube.listPodMetrics = real;
    await h.monitor.pollOnce();
    const view = (await request(h.app).get('/v1/monitor')).body;
    expect(view).toMatchObject({ polls: 1, failures: 1, lastError: null });
    expect(view.pods.map((p) => p.pod)).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2', 'rethinkdb-3']);
  });

  // What the prober reads (src/policy/suspicion.js: a busy server is suspected later): the pods the last poll found at
  // or above MONITOR_HOT_UTILIZATION on either signal, while that poll is at most three intervals old.
  test('when a poll finds pods busy, then busyPods names them until the poll is three intervals old', async () => {
    const h = createSandboxHarness({ env: { MONITOR_SCALE_OUT: 'false' } });
    expect(h.monitor.busyPods()).toEqual([]);
    h.kube.setPodCpu('rethinkdb-2', 0.95);
    h.kube.setInterference('node-1', 1.8);
    await h.monitor.pollOnce();
    expect(h.monitor.busyPods().sort()).toEqual(['rethinkdb-1', 'rethinkdb-2']);
    h.clock.advance(3 * 15000);
    expect(h.monitor.busyPods().sort()).toEqual(['rethinkdb-1', 'rethinkdb-2']);
    h.clock.advance(1);
    expect(h.monitor.busyPods()).toEqual([]);
  });

  test('when a hot-spot the monitor raised is still hot PERFWARNING_LONG_SECONDS later, then it is escalated once: the replicas migrate off, and the end of the warning moves a share of them back', async () => {
    const h = createSandboxHarness({ env: { PERFWARNING_LONG_SECONDS: '60', MONITOR_SCALE_OUT: 'false' } });
    // A noisy neighbour on rethinkdb-1's node (the interference signal).
    h.kube.setInterference('node-1', 1.8);
    const poll = async () => { const result = await h.monitor.pollOnce(); await settle(h); return (result.decisions ?? []).map((d) => d.type); };
    const raised = [...await poll()];
    h.clock.advance(15000);
    raised.push(...await poll());
    expect(raised).toEqual(['raise']);
    expect(await replicasOf(h, 'rethinkdb_1')).not.toEqual([]);
    const raisedAt = Date.parse((await h.marks.perfWarnings())[0].since);
    // Under 60 s after the warning: not yet.
    while (h.clock.now() + 15000 < raisedAt + 60000) { h.clock.advance(15000); expect(await poll()).toEqual([]); }
    h.clock.advance(15000);
    expect(await poll()).toEqual(['escalate']);
    const escalation = h.monitor.view().lastDecisions.at(-1);
    expect(escalation.result).toMatchObject({ event: 'PERFWARNING_ESCALATION', escalated: true, migration: { id: expect.any(String) } });
    expect(h.operations.list().find((o) => o.id === escalation.result.migration.id)).toMatchObject({ kind: 'migrate-replicas-off', status: 'succeeded' });
    expect(await replicasOf(h, 'rethinkdb_1')).toEqual([]);
    const [warning] = await h.marks.perfWarnings();
    expect(warning).toMatchObject({ pod: 'rethinkdb-1', source: 'monitor', long: true, escalatedAt: expect.any(String), demoted: expect.any(Array) });
    expect(warning.demoted.length).toBeGreaterThan(0);
    // Still hot: no second escalation.
    h.clock.advance(15000);
    expect(await poll()).toEqual([]);
    // The hot-spot ends: after the cooldown the warning ends, and as a long one its end moves replicas back.
    h.kube.setInterference('node-1', 0);
    const decided = [];
    for (let i = 0; i < 6; i += 1) { h.clock.advance(15000); decided.push(...await poll()); }
    expect(decided).toEqual(['clear']);
    expect(h.monitor.view().lastDecisions.at(-1).result.restore).toMatchObject({ action: 'add-server' });
    expect((await replicasOf(h, 'rethinkdb_1')).length).toBeGreaterThan(0);
    expect(h.audit.list({ limit: 500 }).filter((r) => r.actor === 'monitor').map((r) => r.action)).toContain('migrate-replicas-off');
  });

  test('when the monitor\'s warning was raised by another manager (a new leader, a restart), then this one escalates it when due and ends it when the hot-spot clears', async () => {
    const h = createSandboxHarness({ env: { PERFWARNING_LONG_SECONDS: '60', MONITOR_SCALE_OUT: 'false' } });
    h.kube.setInterference('node-1', 1.8);
    // The warning as a monitor left it on the pod, 2 minutes ago; this monitor has never polled.
    await leaveMonitorWarning(h, 'monitor: an earlier leader');
    const poll = async () => { const result = await h.monitor.pollOnce(); await settle(h); return (result.decisions ?? []).map((d) => d.type); };
    const decided = [];
    for (let i = 0; i < 3; i += 1) { decided.push(...await poll()); h.clock.advance(15000); }
    expect(decided).toEqual(['escalate']);
    expect(await replicasOf(h, 'rethinkdb_1')).toEqual([]);
    h.kube.setInterference('node-1', 0);
    const ended = [];
    for (let i = 0; i < 6; i += 1) { ended.push(...await poll()); h.clock.advance(15000); }
    expect(ended).toEqual(['clear']);
    expect(await h.marks.perfWarnings()).toEqual([]);
  });

  test('when the monitor\'s warning is ended (DELETE) while its escalation demotes, then no migration starts and the warning does not come back long', async () => {
    let h = null;
    let deleted = false;
    // The first table_config write of the escalation (its demotion) lets an operator's DELETE of the warning in first.
    h = createSandboxHarness({
      env: { PERFWARNING_LONG_SECONDS: '60', MONITOR_SCALE_OUT: 'false' },
      wrapSource: (source) => ({
        ...source,
        updateTableShards: async (...args) => {
          if (h?.armed && !deleted) { deleted = (await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1')).body; }
          return source.updateTableShards(...args);
        },
      }),
    });
    // rethinkdb_1 holds primaries (as if given back meanwhile), so that the escalation's demotion writes first.
    expect((await primaryMap(h.store))).toContain('rethinkdb_1');
    await leaveMonitorWarning(h, 'monitor: r');
    h.armed = true;
    const result = await h.events.escalateFromMonitor({ pod: 'rethinkdb-1', reason: 'r' });
    await settle(h);
    // The DELETE came during the demotion: nothing was migrating yet, so its restore gave the primaries back.
    expect(deleted).toMatchObject({ ended: true, restore: { action: 'rebalance-primaries' } });
    expect(result).toMatchObject({ event: 'PERFWARNING_ESCALATION', escalated: false, reason: 'the perf warning ended before the migration started' });
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toEqual([]);
    expect(await h.marks.perfWarnings()).toEqual([]);
    expect(await replicasOf(h, 'rethinkdb_1')).not.toEqual([]);
  });

  test('when the monitor\'s warning is ended (DELETE) while its escalation\'s migration runs, then the restore waits for the migration to end and then moves the replicas back', async () => {
    let h = null;
    let deleted = null;
    let writes = 0;
    // The escalation's second table_config write (the first is its demotion of rethinkdb_1's primary; the second
    // stages the migration's first replica) lets an operator's DELETE of the warning in.
    h = createSandboxHarness({
      env: { PERFWARNING_LONG_SECONDS: '60', MONITOR_SCALE_OUT: 'false' },
      wrapSource: (source) => ({
        ...source,
        updateTableShards: async (...args) => {
          if (h?.armed) writes += 1;
          if (writes === 2 && !deleted) deleted = (await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1')).body;
          return source.updateTableShards(...args);
        },
      }),
    });
    expect(await primaryMap(h.store)).toContain('rethinkdb_1');
    await leaveMonitorWarning(h, 'monitor: r');
    h.armed = true;
    await h.events.escalateFromMonitor({ pod: 'rethinkdb-1', reason: 'r' });
    await settle(h);
    expect(deleted).toMatchObject({ ended: true, restore: { action: 'wait' } });
    expect(await replicasOf(h, 'rethinkdb_1')).toEqual([]);
    const [retried] = await h.events.expireDue();
    expect(retried).toMatchObject({ event: 'PERFWARNING_RESTORE_RETRY', restore: { action: 'add-server' } });
    await settle(h);
    expect((await replicasOf(h, 'rethinkdb_1')).length).toBeGreaterThan(0);
  });

  test('when the monitor is reset (its replica stopped leading), then a hot streak from before counts no more: a raise needs its polls again', async () => {
    const h = createSandboxHarness({ env: { MONITOR_SCALE_OUT: 'false', MONITOR_IMMEDIATE_UTILIZATION: '0' } });
    h.kube.setInterference('node-1', 1.8);
    const poll = async () => { h.clock.advance(15000); return ((await h.monitor.pollOnce()).decisions ?? []).map((d) => d.type); };
    expect(await poll()).toEqual([]);
    expect(h.monitor.view().pods.find((p) => p.pod === 'rethinkdb-1').hotStreak).toBe(1);
    h.monitor.reset();
    expect(await poll()).toEqual([]);
    expect(await poll()).toEqual(['raise']);
  });

  test('when an operator\'s warning (not the monitor\'s) lasts past PERFWARNING_LONG_SECONDS with the pod hot, then the monitor does not escalate it: its duration was given', async () => {
    const h = createSandboxHarness({ env: { PERFWARNING_LONG_SECONDS: '60', MONITOR_SCALE_OUT: 'false' } });
    // Of unknown duration: short, and it does not expire.
    await json(request(h.app).post('/v1/hooks/perfwarning'), { pod: 'rethinkdb-1' });
    h.kube.setInterference('node-1', 1.8);
    const decided = [];
    for (let i = 0; i < 6; i += 1) { decided.push(...((await h.monitor.pollOnce()).decisions ?? []).map((d) => d.type)); h.clock.advance(15000); }
    expect(decided).toEqual([]);
    expect(await replicasOf(h, 'rethinkdb_1')).not.toEqual([]);
  });

  test('when the whole cluster is overloaded and triggers race, then exactly one pod is added and brought in', async () => {
    const h = createSandboxHarness();
    for (const pod of h.kube.podNames()) h.kube.setPodCpu(pod, 0.95);
    await h.monitor.pollOnce();
    h.clock.advance(15000);
    const results = await Promise.all([h.monitor.pollOnce(), h.monitor.pollOnce(), h.monitor.pollOnce()]);
    expect(results.filter((r) => r.skipped)).toHaveLength(2);
    await settle(h);
    for (let i = 0; i < 3; i += 1) { h.clock.advance(15000); await h.monitor.pollOnce(); }
    expect(await h.kube.getStatefulSetScale()).toEqual({ replicas: 5, currentReplicas: 5 });
    const view = h.monitor.view();
    expect(view.scaleOut.inFlight).toBeNull();
    // lastDecisions is a short history across polls, each decision with its time: the scale-out, then the suppressed ones.
    expect(view.lastDecisions.map((d) => d.type)).toEqual(['scale-out', 'scale-out-suppressed', 'scale-out-suppressed', 'scale-out-suppressed']);
    expect(view.lastDecisions.at(-1)).toMatchObject({ type: 'scale-out-suppressed', reason: expect.stringMatching(/cooldown/), time: expect.stringMatching(/^\d{4}-/) });
    expect(view.lastDecisions[0].time < view.lastDecisions.at(-1).time).toBe(true);
    for (let i = 0; i < 20; i += 1) { h.clock.advance(15000); await h.monitor.pollOnce(); }
    expect(h.monitor.view().lastDecisions.map((d) => d.type)).toEqual(Array(20).fill('scale-out-suppressed'));
    expect(h.operations.list().find((o) => o.kind === 'poststart').report.decision.kind).toBe('expansion');
    const scaleOuts = h.audit.list({ limit: 500 }).filter((r) => r.action === 'scale-out');
    expect(scaleOuts).toEqual([expect.objectContaining({ actor: 'monitor', target: { replicas: 5 }, outcome: 'completed', reason: expect.stringMatching(/./) })]);
    expect(h.logs.filter((l) => l.audit && l.action === 'scale-out')).toHaveLength(1);
  });
});

// A first manager that stops making progress after its third table_config write, in the middle of a long
// hot-spot migration off rethinkdb_1, with rethinkdb-3 drained by PRESTOP; release() lets its writes go on.
async function managerMidMigration() {
  let writes = 0;
  let release;
  const gate = new Promise((resolve) => { release = resolve; });
  const first = createSandboxHarness({
    wrapSource: (source) => ({ ...source, updateTableShards: async (...args) => { writes += 1; if (writes > 3) await gate; return source.updateTableShards(...args); } }),
  });
  await request(first.app).post('/v1/hooks/prestop?pod=rethinkdb-3');
  await json(request(first.app).post('/v1/hooks/perfwarning'), { pod: 'rethinkdb-1', durationSeconds: 3600 });
  // Until the migration is held at its fourth write.
  for (let turns = 0; writes <= 3; turns += 1) {
    if (turns > 100000) throw new Error(`the migration never reached its fourth write (${writes} writes)`);
    await new Promise((resolve) => { setImmediate(resolve); });
  }
  await first.marks.flush();
  return { first, release };
}

// A manager whose pod rethinkdb-1 carries the migration record recordFor(its server's id) returns, and a second
// manager over the same cluster and pods (not reconciled yet).
async function restartWithMigrationOnRethinkdb1(recordFor, options = {}) {
  const first = createSandboxHarness();
  const id1 = (await first.store.readCluster()).servers.find((s) => s.name === 'rethinkdb_1').id;
  await first.kube.annotatePod('rethinkdb-1', {
    'rethinkdb-manager.io/migration': JSON.stringify({ serverId: id1, serverName: 'rethinkdb_1', ...recordFor(id1) }),
  });
  const second = createSandboxHarness({ clock: first.clock, existing: { model: first.model, kube: first.kube }, ...options });
  return { first, second };
}

describe('state that survives the manager', () => {
  test('when the manager restarts in the middle of a long hot-spot migration, then the new one reloads the marks from the pods and finishes the migration', async () => {
    const { first, release } = await managerMidMigration();
    expect((await replicasOf(first, 'rethinkdb_1')).length).toBeGreaterThan(0);
    const pod1 = await first.kube.getPod('rethinkdb-1');
    expect(Object.keys(pod1.annotations).sort()).toEqual(['rethinkdb-manager.io/migration', 'rethinkdb-manager.io/perfwarning']);

    // A new manager over the same cluster and pods; the first one is abandoned, as if killed.
    const second = createSandboxHarness({ clock: first.clock, existing: { model: first.model, kube: first.kube } });
    const reconciled = await second.reconcile();
    expect(reconciled.loaded.map((l) => `${l.pod}:${l.kind}`).sort()).toEqual(['rethinkdb-1:migration', 'rethinkdb-1:perfwarning', 'rethinkdb-3:departing', 'rethinkdb-3:draining']);
    expect(reconciled.resumed).toEqual([expect.objectContaining({
      server: 'rethinkdb_1', action: 'migrate-replicas-off', outcome: 'resumed', halfDoneMove: expect.objectContaining({ status: 'succeeded' }),
    })]);
    await settle(second);
    // Shard 0 lives on rethinkdb_0, _1 and _2 and rethinkdb_3 is draining: no server can take that replica, and the
    // migration reports it rather than weakening the shard. Every other replica has left rethinkdb_1.
    expect(await replicasOf(second, 'rethinkdb_1')).toEqual([0]);
    const resumedOp = second.operations.get(reconciled.resumed[0].operation);
    expect(resumedOp.report.skipped).toEqual([expect.objectContaining({ shard: 0, reason: expect.stringMatching(/no connected server without a replica of this shard that the manager does not keep off/) })]);
    expect((await second.marks.perfWarnings())[0]).toMatchObject({ pod: 'rethinkdb-1', long: true, durationSeconds: 3600 });
    expect((await second.marks.list())[0]).toMatchObject({ serverName: 'rethinkdb_3' });
    const primaries = await primaryMap(second.store);
    expect(primaries).not.toContain('rethinkdb_1');
    expect(primaries).not.toContain('rethinkdb_3');
    await second.marks.flush();
    expect(Object.keys((await second.kube.getPod('rethinkdb-1')).annotations)).toEqual(['rethinkdb-manager.io/perfwarning']);
    release();
  });

  test('when the manager restarts while a restore waits for the warned server to be healthy, then the new one gives the primaries back', async () => {
    const first = await warningExpiredWhileDown();
    await first.marks.flush();

    // A new manager over the same cluster and pods; the first one is abandoned, as if killed.
    const second = createSandboxHarness({ clock: first.clock, existing: { model: first.model, kube: first.kube } });
    await second.reconcile();
    expect((await request(second.app).get('/v1/cluster')).body.pendingRestores).toEqual([expect.objectContaining({ pod: 'rethinkdb-1' })]);
    second.model.restoreServer('rethinkdb_1');
    await second.tick({ poll: false });
    expect(await primaryMap(second.store)).toEqual(INITIAL);
    expect((await request(second.app).get('/v1/cluster')).body.pendingRestores).toEqual([]);
    await second.marks.flush();
    expect((await second.kube.getPod('rethinkdb-1')).annotations).toEqual({});
  });

  test('when a pod carries a migration record without a version (raw call arguments), then it is dropped with the reason, not replayed', async () => {
    const { second } = await restartWithMigrationOnRethinkdb1(() => ({ action: 'migrate-replicas-off', params: { server: 'rethinkdb_1' } }));
    const reconciled = await second.reconcile();
    expect(reconciled.resumed).toEqual([expect.objectContaining({ server: 'rethinkdb_1', outcome: 'dropped', reason: expect.stringMatching(/version none, not 1/) })]);
    expect(second.operations.list()).toEqual([]);
    await second.marks.flush();
    expect((await second.kube.getPod('rethinkdb-1')).annotations).toEqual({});
  });

  test('when a restarted manager finds a draining mark whose server has left the cluster, then it releases the mark and its annotation', async () => {
    const first = createSandboxHarness();
    first.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' });
    const res = await json(request(first.app).post('/v1/actions/migrate-replicas-off'), { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    await settle(first);
    expect(await replicasOf(first, 'rethinkdb_3')).toEqual([]);
    // Holding nothing, a stopped server is no longer listed by RethinkDB.
    first.model.crashServer('rethinkdb_3', { mode: 'kill' });
    await first.marks.flush();
    expect(Object.keys((await first.kube.getPod('rethinkdb-3')).annotations)).toEqual(['rethinkdb-manager.io/draining']);

    const second = createSandboxHarness({ clock: first.clock, existing: { model: first.model, kube: first.kube } });
    const reconciled = await second.reconcile();
    expect(reconciled.released).toEqual([{ server: 'rethinkdb_3', pod: 'rethinkdb-3', reason: 'its server is no longer in the cluster' }]);
    expect(await second.marks.list()).toEqual([]);
    await second.marks.flush();
    expect((await second.kube.getPod('rethinkdb-3')).annotations).toEqual({});
  });

  test('when a restarted manager resumes a migration, then it plans on the cluster it read to reconcile and reads it again only under the table lock', async () => {
    const { reads, wrapSource } = readCounter();
    const { first, second } = await restartWithMigrationOnRethinkdb1((id1) => ({
      version: 1, action: 'migrate-replicas-off', intent: { type: 'migrate-replicas-off', serverId: id1 }, operationId: 'gone', reason: null, inFlight: null,
    }), { wrapSource });
    const before = await replicasOf(first, 'rethinkdb_1');
    const reconciled = await second.reconcile();
    expect(reconciled.resumed).toEqual([expect.objectContaining({ server: 'rethinkdb_1', outcome: 'resumed' })]);
    await settle(second);
    expect(reads.beforeWrite).toBe(2);
    expect((await replicasOf(second, 'rethinkdb_1')).length).toBeLessThan(before.length);
  });

  test('when reconciling fails twice at start-up, then it is retried until it succeeds: until then no work and /readyz 503, then the state is loaded and the migration resumed', async () => {
    const { first, release } = await managerMidMigration();
    const before = await primaryMap(first.store);
    // Each pod listing waits for the test to let it fail or succeed.
    const listings = [];
    const kube = {
      ...first.kube,
      listRethinkDbPods: () => new Promise((resolve, reject) => { listings.push({ resolve, reject }); }).then(() => first.kube.listRethinkDbPods()),
    };
    const second = createSandboxHarness({ clock: first.clock, existing: { model: first.model, kube } });
    const reconciling = second.reconcile();
    const failures = [
      Object.assign(new Error('the Kubernetes API did not answer'), { code: 'KUBERNETES_UNAVAILABLE', statusCode: 503 }),
      new Error('socket hang up'),
    ];
    for (const [attempt, failure] of failures.entries()) {
      while (listings.length <= attempt) await new Promise((resolve) => { setTimeout(resolve, 1); });
      const ready = await request(second.app).get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.error).toBe('STARTING');
      if (attempt > 0) expect(ready.body.message).toMatch(/attempt 1 failed: the Kubernetes API did not answer/);
      const prestop = await request(second.app).post('/v1/hooks/prestop?pod=rethinkdb-2');
      expect(prestop.status).toBe(503);
      expect(prestop.body.error).toBe('STARTING');
      expect(await second.tick()).toEqual({
        expired: [], heartbeat: null, retried: [], votes: [], nodes: [], holds: [], readiness: null, levelling: null, polled: null,
      });
      listings[attempt].reject(failure);
    }
    while (listings.length < 3) await new Promise((resolve) => { setTimeout(resolve, 1); });
    expect(second.operations.list()).toEqual([]);
    expect(second.audit.list({ limit: 10 })).toEqual([]);
    expect(await primaryMap(second.store)).toEqual(before);
    listings[2].resolve();
    const reconciled = await reconciling;
    expect(reconciled.loaded.map((l) => `${l.pod}:${l.kind}`).sort()).toEqual(['rethinkdb-1:migration', 'rethinkdb-1:perfwarning', 'rethinkdb-3:departing', 'rethinkdb-3:draining']);
    expect(reconciled.resumed).toEqual([expect.objectContaining({ server: 'rethinkdb_1', action: 'migrate-replicas-off', outcome: 'resumed' })]);
    expect((await request(second.app).get('/readyz')).status).toBe(200);
    await settle(second);
    expect(await replicasOf(second, 'rethinkdb_1')).toEqual([0]);
    release();
  });
});
