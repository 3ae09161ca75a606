// Rolling restarts on the sandbox, in virtual time, through the manager's real routes and tick: the readiness gate
// the manager sets on RethinkDB pods, and the PRESTOP that waits for a ready voting majority. A returning server
// catches up for 3 s (returnBackfillMs), as a real one does for a moment.

import request from 'supertest';
import { AppError } from '../../src/errors.js';
import { REPLICAS_READY_CONDITION } from '../../src/policy/rollout.js';
import { createSandboxHarness } from '../helpers/harness.js';

const gated = (env = {}) => createSandboxHarness({ env, model: { returnBackfillMs: 3000 }, kube: { readinessGate: true } });
const gate = async (h, pod) => (await h.kube.getPod(pod)).readinessGates[REPLICAS_READY_CONDITION];

describe('the readiness gate', () => {
  test('when pods carry the gate, then the tick sets it True once every replica is ready, and False while a restarted server catches up', async () => {
    const h = createSandboxHarness({ model: { returnBackfillMs: 10000 }, kube: { readinessGate: true } });
    expect(await gate(h, 'rethinkdb-1')).toBeNull();
    expect((await h.kube.getPod('rethinkdb-1')).ready).toBe(false);
    const first = await h.tick({ poll: false });
    expect(first.readiness.map((c) => c.status)).toEqual(['True', 'True', 'True', 'True']);
    expect((await h.kube.getPod('rethinkdb-1')).ready).toBe(true);

    h.model.crashServer('rethinkdb_1', { mode: 'term' });
    h.clock.advance(1000);
    h.model.restoreServer('rethinkdb_1');
    // Its container did not restart (the pod stays Ready): the gate is checked again within 5 s.
    h.clock.advance(3000);
    expect((await h.tick({ poll: false })).readiness).toBeNull();
    h.clock.advance(1000);
    const during = await h.tick({ poll: false });
    expect(during.readiness).toEqual([{ pod: 'rethinkdb-1', status: 'False', reason: expect.stringMatching(/rethinkdb_1 has replicas that are not ready yet: ycsb.usertable shard \d \((backfilling|transitioning)\)/) }]);
    expect((await h.kube.getPod('rethinkdb-1')).ready).toBe(false);
    h.clock.advance(6500);
    const after = await h.tick({ poll: false });
    expect(after.readiness).toEqual([{ pod: 'rethinkdb-1', status: 'True', reason: 'rethinkdb_1 is connected and every replica it holds is ready' }]);
    const records = h.audit.list({ limit: 20 }).filter((e) => e.action === 'set-pod-readiness' && e.pod === 'rethinkdb-1');
    expect(records.map((e) => e.target.status)).toEqual(['True', 'False', 'True']);
    expect(h.kube.events().filter((e) => e.pod === 'rethinkdb-1' && e.reason === 'SetPodReadiness')).toHaveLength(3);
    const metrics = (await request(h.app).get('/metrics')).text;
    expect(metrics).toMatch(/rethinkdb_manager_pod_replicas_ready\{pod="rethinkdb-1"\} 1/);
  });

  test('when a pod stays unready past READINESS_MAX_WAIT_SECONDS, then it is made Ready anyway, as a Warning that names what it waited for', async () => {
    const h = createSandboxHarness({ env: { READINESS_MAX_WAIT_SECONDS: '5' }, model: { returnBackfillMs: 60000 }, kube: { readinessGate: true } });
    await h.tick({ poll: false });
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    h.clock.advance(5000);
    expect((await h.tick({ poll: false })).readiness).toEqual([expect.objectContaining({ pod: 'rethinkdb-2', status: 'False' })]);
    h.clock.advance(4000);
    expect((await h.tick({ poll: false })).readiness).toEqual([]); // not settled: read again each tick, nothing changed yet
    h.clock.advance(1000);
    const forced = await h.tick({ poll: false });
    expect(forced.readiness).toEqual([{ pod: 'rethinkdb-2', status: 'True', reason: expect.stringMatching(/after 5 s; ready anyway \(READINESS_MAX_WAIT_SECONDS\)/) }]);
    expect(h.kube.events().filter((e) => e.pod === 'rethinkdb-2' && e.reason === 'SetPodReadiness').at(-1).type).toBe('Warning');
    // It stays Ready while the backfill goes on: no flapping back to False at the next checks.
    for (let i = 0; i < 3; i += 1) {
      h.clock.advance(5000);
      expect((await h.tick({ poll: false })).readiness ?? []).toEqual([]);
      expect(await gate(h, 'rethinkdb-2')).toBe('True');
    }
  });

  test('when a pod\'s server has not joined for longer than the maximum, then its clock has not run: it is not Ready the moment it starts to backfill', async () => {
    const h = createSandboxHarness({ env: { READINESS_MAX_WAIT_SECONDS: '5' }, model: { returnBackfillMs: 60000 }, kube: { readinessGate: true } });
    await h.tick({ poll: false });
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.clock.advance(5000);
    expect((await h.tick({ poll: false })).readiness).toEqual([{ pod: 'rethinkdb-2', status: 'False', reason: 'no connected RethinkDB server for pod rethinkdb-2 yet' }]);
    h.clock.advance(60000);
    await h.tick({ poll: false });
    h.model.restoreServer('rethinkdb_2');
    h.clock.advance(1000);
    const joined = await h.tick({ poll: false });
    expect(joined.readiness ?? []).toEqual([]);
    expect(await gate(h, 'rethinkdb-2')).toBe('False');
    h.clock.advance(5000);
    expect((await h.tick({ poll: false })).readiness).toEqual([expect.objectContaining({ pod: 'rethinkdb-2', status: 'True' })]);
  });

  test('when READINESS_GATE_ENABLED is false, then the gate is never set', async () => {
    const h = createSandboxHarness({ env: { READINESS_GATE_ENABLED: 'false' }, kube: { readinessGate: true } });
    expect((await h.tick({ poll: false })).readiness).toBeNull();
    expect(await gate(h, 'rethinkdb-0')).toBeNull();
  });
});

describe('PRESTOP waits for a ready voting majority', () => {
  test('when another replica of its shards is still catching up, then PRESTOP waits for it before demoting, and says so in its answer, an Event and a metric', async () => {
    const h = gated();
    await h.tick({ poll: false });
    // rethinkdb_2 restarted a moment ago: its replicas (shards 1, 2 and 3 hold it with rethinkdb_1 in two of them) catch up for 3 s.
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    h.clock.advance(100);
    const dry = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true');
    expect(dry.status).toBe(200);
    expect(dry.body.majorityWait).toMatchObject({ outcome: 'would_wait', waitedMs: 0, short: expect.arrayContaining([expect.objectContaining({ table: 'ycsb.usertable' })]) });
    const started = h.clock.now();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.majorityWait.outcome).toBe('waited');
    expect(res.body.majorityWait.waitedMs).toBeGreaterThanOrEqual(2900);
    expect(res.body.majorityWait.reason).toMatch(/without rethinkdb_1, ycsb.usertable shard \d.* would have no ready voting majority .*the majority was back after \d+ ms/);
    expect(res.body.majorityWait.short).toEqual(dry.body.majorityWait.short);
    expect(res.body.primariesOff).toBe(true);
    expect(h.clock.now() - started).toBeGreaterThanOrEqual(2900);
    expect(h.audit.list({ limit: 20 }).find((e) => e.action === 'wait-for-majority')).toMatchObject({ pod: 'rethinkdb-1', outcome: 'completed' });
    expect(h.kube.events().find((e) => e.reason === 'WaitForMajority')).toMatchObject({ pod: 'rethinkdb-1', type: 'Normal' });
    expect((await request(h.app).get('/metrics')).text).toMatch(/rethinkdb_manager_prestop_majority_waits_total\{outcome="waited"\} 1/);
  });

  test('when the handover has the secondaries catch up with their new primaries, then PRESTOP waits for them after the demotion, so that the server does not stop while they do', async () => {
    // 2.4.4 shows a new primary's secondaries `backfilling` for a moment after a handover; here the old primary (the
    // stopping server) catches up first, so that the demotion's own wait is met while the other still catches up.
    const h = createSandboxHarness({ model: { handoverResyncMs: 600, oldPrimaryResyncMs: 100 } });
    const started = h.clock.now();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(res.body.majorityWait.outcome).toBe('none');
    expect(res.body.settleWait).toMatchObject({ outcome: 'waited', short: expect.arrayContaining([expect.objectContaining({ table: 'ycsb.usertable' })]) });
    expect(res.body.settleWait.waitedMs).toBeGreaterThan(0);
    expect(res.body.settleWait.reason).toMatch(/without rethinkdb_1, .* would have no ready voting majority .*the majority was back after \d+ ms/);
    // When it answers, every shard has a ready voting majority without rethinkdb_1.
    const status = (await h.store.readCluster()).tables.flatMap((t) => t.shards);
    const id = (await h.store.readCluster()).servers.find((s) => s.name === 'rethinkdb_1').id;
    for (const shard of status) {
      const others = shard.replicas.filter((r) => r !== id);
      expect(others.filter((r) => shard.states[r] === 'ready').length * 2).toBeGreaterThan(shard.replicas.length);
    }
    expect(h.clock.now() - started).toBeGreaterThanOrEqual(600);
    expect(h.audit.list({ limit: 20 }).find((e) => e.action === 'wait-for-majority')?.reason).toMatch(/^after its demotion: /);
    // A dry run moves nothing, so there is nothing to wait for after it.
    const dry = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-2&dryRun=true');
    expect(dry.body.settleWait).toMatchObject({ outcome: 'none', waitedMs: 0 });
  });

  test('when the cluster cannot be read after the demotion (a frozen server stalls the system tables), then the hook still answers 200 with what the demotion did', async () => {
    let written = false;
    let failed = 0;
    const h = createSandboxHarness({
      model: { handoverResyncMs: 600 },
      wrapSource: (source) => ({
        ...source,
        updateTableShards: async (...args) => { const out = await source.updateTableShards(...args); written = true; return out; },
        readSystemTables: async (...args) => {
          if (written) { failed += 1; throw new AppError('DATA_STORE_UNAVAILABLE', 'RethinkDB did not answer "read system tables" within 3000 ms'); }
          return source.readSystemTables(...args);
        },
      }),
    });
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(failed).toBeGreaterThan(0);
    expect(res.status).toBe(200);
    expect(res.body.report.changes.length).toBeGreaterThan(0);
    expect(res.body.settleWait).toMatchObject({ outcome: 'unread', reason: expect.stringMatching(/the cluster could not be read .*so the hook answers without waiting/) });
  });

  test('when no secondary catches up after the handover, then PRESTOP does not wait after the demotion', async () => {
    const res = await request(createSandboxHarness().app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.body.settleWait).toMatchObject({ outcome: 'none', waitedMs: 0 });
    const off = await request(createSandboxHarness({ env: { PRESTOP_MAJORITY_WAIT_SECONDS: '0' } }).app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(off.body).toMatchObject({ majorityWait: { outcome: 'off' }, settleWait: { outcome: 'off' } });
  });

  test('when the catch-up outlasts the wait, then PRESTOP gives up within its budget, demotes anyway, and reports it as a Warning', async () => {
    const h = createSandboxHarness({ env: { PRESTOP_MAJORITY_WAIT_SECONDS: '2' }, model: { returnBackfillMs: 60000 } });
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    const started = h.clock.now();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.majorityWait).toMatchObject({ outcome: 'gave_up' });
    expect(res.body.majorityWait.waitedMs).toBeGreaterThanOrEqual(2000);
    expect(res.body.majorityWait.waitedMs).toBeLessThan(3000);
    expect(res.body.majorityWait.reason).toMatch(/the deadline leaves no time to wait/);
    expect(h.clock.now() - started).toBeLessThan(20000);
    expect(h.kube.events().find((e) => e.reason === 'WaitForMajority')).toMatchObject({ type: 'Warning' });
  });

  test('when PRESTOP_MAJORITY_WAIT_SECONDS is 0, then PRESTOP never waits and reports no wait, without an Event', async () => {
    const h = createSandboxHarness({ env: { PRESTOP_MAJORITY_WAIT_SECONDS: '0' }, model: { returnBackfillMs: 60000 } });
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.body.majorityWait).toEqual({ outcome: 'off', waitedMs: 0, short: [], reason: 'PRESTOP_MAJORITY_WAIT_SECONDS is 0' });
    expect(h.kube.events().filter((e) => e.reason === 'WaitForMajority')).toEqual([]);
  });

  test('when the cluster cannot be read during the wait, then the wait ends and the demotion goes ahead on what was read', async () => {
    let failReads = false;
    const h = createSandboxHarness({
      model: { returnBackfillMs: 60000 },
      // One read fails: the first after the wait's first sleep.
      wrapSource: (source) => ({
        ...source,
        readSystemTables: async () => {
          if (failReads) { failReads = false; throw new Error('connection refused'); }
          return source.readSystemTables();
        },
      }),
    });
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    const sleep = h.clock.sleep;
    let slept = false;
    h.clock.sleep = async (ms) => { if (!slept) { slept = true; failReads = true; } await sleep(ms); };
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    h.clock.sleep = sleep;
    expect(res.body.majorityWait).toMatchObject({ outcome: 'unread', reason: expect.stringMatching(/the cluster could not be read .*so the demotion goes ahead/) });
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect((await request(h.app).get('/metrics')).text).toMatch(/rethinkdb_manager_prestop_majority_waits_total\{outcome="unread"\} 1/);
    expect(h.audit.list().find((r) => r.action === 'wait-for-majority' && r.reason.startsWith('before its demotion'))).toMatchObject({ outcome: 'failed' });
  });

  test('when the PRESTOP waits, then the server is marked draining first, so that nothing hands it a primary meanwhile', async () => {
    const h = gated();
    h.model.crashServer('rethinkdb_2', { mode: 'term' });
    h.model.restoreServer('rethinkdb_2');
    const sleep = h.clock.sleep;
    let markedDuringWait = null;
    h.clock.sleep = async (ms) => { markedDuringWait ??= Boolean(await h.marks.getDraining(h.model.serverId('rethinkdb_1'))); await sleep(ms); };
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    h.clock.sleep = sleep;
    expect(res.body.majorityWait.outcome).toBe('waited');
    expect(markedDuringWait).toBe(true);
  });

  test('when every shard keeps a ready majority, then PRESTOP does not wait', async () => {
    const h = gated();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.body.majorityWait).toEqual({ outcome: 'none', waitedMs: 0, short: [], reason: 'every shard keeps a ready voting majority without rethinkdb_1' });
  });
});

describe('DELETE /v1/hooks/perfwarning?node=', () => {
  test('when a node-wide warning is withdrawn, then every pod of the node ends its warning and gets its primaries back; again, 404', async () => {
    const h = createSandboxHarness();
    const raised = await request(h.app).post('/v1/hooks/perfwarning').send({ node: 'node-1', durationSeconds: 3600 });
    expect(raised.status).toBe(200);
    const ended = await request(h.app).delete('/v1/hooks/perfwarning?node=node-1');
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ event: 'PERFWARNING_END', node: 'node-1', ended: true, pods: [{ pod: 'rethinkdb-1', ended: true }] });
    expect(await h.marks.perfWarnings()).toEqual([]);
    const again = await request(h.app).delete('/v1/hooks/perfwarning?node=node-1');
    expect(again.status).toBe(404);
    expect(again.body.message).toBe('no active perf warning on any RethinkDB pod of node node-1');
  });

  test.each([
    ['both pod and node', '?pod=rethinkdb-1&node=node-1'],
    ['neither', ''],
  ])('when %s are given, then 400 and nothing changes', async (_, query) => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/hooks/perfwarning').send({ node: 'node-1', durationSeconds: 3600 });
    const res = await request(h.app).delete(`/v1/hooks/perfwarning${query}`);
    expect(res.status).toBe(400);
    expect(await h.marks.perfWarnings()).toHaveLength(1);
  });

  test('when the node does not exist, then 404 NODE_NOT_FOUND', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).delete('/v1/hooks/perfwarning?node=node-9');
    expect(res.status).toBe(404);
    expect(res.body.error).toBe('NODE_NOT_FOUND');
  });
});
