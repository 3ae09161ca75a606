import request from 'supertest';
import { AppError } from '../../src/errors.js';
import {
  createSandboxHarness, primaryMap, readCounter, waitForOperation,
} from '../helpers/harness.js';

const prestop = (app, pod) => request(app).post(`/v1/hooks/prestop?pod=${pod}`);

describe('POST /v1/hooks/prestop', () => {
  test('when a pod is about to stop, then its server\'s primaries move off before the answer, and a repeat is a no-op', async () => {
    const h = createSandboxHarness();
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ event: 'PRESTOP', pod: 'rethinkdb-1', server: 'rethinkdb_1', outcome: 'completed', primariesOff: true });
    expect(res.body.report.changes).toEqual([expect.objectContaining({ shard: 1, from: 'rethinkdb_1', to: 'rethinkdb_2' })]);
    const cluster = (await request(h.app).get('/v1/cluster')).body;
    expect(cluster.tables[0].shards[1].acting).toEqual(['rethinkdb_2']);
    const again = await prestop(h.app, 'rethinkdb-1');
    expect(again.body).toMatchObject({ outcome: 'nothing_to_do', primariesOff: true });
  });

  test('when two pods stop together (a node drain or rolling restart), then neither receives the other\'s primaries', async () => {
    const h = createSandboxHarness();
    const [a, b] = await Promise.all([prestop(h.app, 'rethinkdb-1'), prestop(h.app, 'rethinkdb-2')]);
    expect([a.body.primariesOff, b.body.primariesOff]).toEqual([true, true]);
    const primaries = await primaryMap(h.store);
    expect(primaries).not.toContain('rethinkdb_1');
    expect(primaries).not.toContain('rethinkdb_2');
  });

  const heartbeatOf = async (h) => (await h.store.readCluster()).heartbeatTimeoutSecs;

  test('when a pod is about to stop, then the heartbeat timeout is lowered until its server has left, and put back on the next tick after that', async () => {
    const h = createSandboxHarness();
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.body.heartbeat).toMatchObject({ lowered: true, from: 10, to: 2 });
    expect(await heartbeatOf(h)).toBe(2);
    await h.tick({ poll: false });
    expect(await heartbeatOf(h)).toBe(2);
    // A second pod stopping meanwhile keeps the original value to go back to.
    expect((await prestop(h.app, 'rethinkdb-2')).body.heartbeat).toMatchObject({ lowered: true, from: 2, to: 2 });
    h.model.crashServer('rethinkdb_1', { mode: 'term' });
    expect((await h.tick({ poll: false })).heartbeat).toMatchObject({ heartbeatTimeoutSecs: null, reason: expect.stringContaining('rethinkdb_1 has left; heartbeat stays at 2 s') });
    expect(await heartbeatOf(h)).toBe(2);
    h.model.crashServer('rethinkdb_2', { mode: 'cut' });
    expect((await h.tick({ poll: false })).heartbeat).toMatchObject({ event: 'HEARTBEAT_RESTORE', heartbeatTimeoutSecs: 10 });
    expect(await heartbeatOf(h)).toBe(10);
    expect(await h.marks.departures()).toEqual([]);
  });

  test('when a pod announced its stop but its server stays past the window, then the heartbeat timeout goes back', async () => {
    const h = createSandboxHarness({ env: { PRESTOP_HEARTBEAT_WINDOW_SECONDS: '60' } });
    await prestop(h.app, 'rethinkdb-1');
    h.clock.advance(59000);
    await h.tick({ poll: false });
    expect(await heartbeatOf(h)).toBe(2);
    h.clock.advance(2000);
    await h.tick({ poll: false });
    expect(await heartbeatOf(h)).toBe(10);
  });

  test('when PRESTOP_HEARTBEAT_TIMEOUT_SECONDS is 0, then PRESTOP leaves the heartbeat timeout alone', async () => {
    const h = createSandboxHarness({ env: { PRESTOP_HEARTBEAT_TIMEOUT_SECONDS: '0' } });
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.body.heartbeat).toBeUndefined();
    expect(await heartbeatOf(h)).toBe(10);
  });

  test('when the heartbeat timeout cannot be written, then PRESTOP still demotes and says why the heartbeat was not lowered', async () => {
    const h = createSandboxHarness({ wrapSource: (source) => ({ ...source, updateHeartbeatTimeout: async () => { throw new AppError('DATA_STORE_UNAVAILABLE', 'boom'); } }) });
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.body).toMatchObject({ outcome: 'completed', primariesOff: true, heartbeat: { lowered: false, reason: 'not lowered: boom' } });
  });

  // rethinkdb_0 (shard 0's configured primary, replicas _0, _1, _2) is lost: rethinkdb_1 is elected and acts for it.
  async function actingForALostPrimary() {
    const h = createSandboxHarness();
    h.model.crashServer('rethinkdb_0', { mode: 'kill' });
    h.clock.advance(60000);
    const shard0 = (await request(h.app).get('/v1/cluster')).body.tables[0].shards[0];
    expect({ primary: shard0.primary, acting: shard0.acting }).toEqual({ primary: 'rethinkdb_0', acting: ['rethinkdb_1'] });
    return h;
  }
  const actingOn = async (h, server) => (await request(h.app).get('/v1/cluster')).body.tables[0].shards.filter((s) => s.acting.includes(server)).map((s) => s.index);

  test('when the stopping server acts as primary for a shard whose configured primary is lost, then that shard gets a new primary too', async () => {
    const h = await actingForALostPrimary();
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(res.body.report.changes).toEqual(expect.arrayContaining([expect.objectContaining({ shard: 0, from: 'rethinkdb_0', to: 'rethinkdb_2' })]));
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([]);
  });

  test('when the stopping server acts for a lost primary\'s shard and no other replica may take it, then primariesOff is false and says which shard', async () => {
    const h = await actingForALostPrimary();
    await request(h.app).post('/v1/hooks/perfwarning').set('content-type', 'application/json').send(JSON.stringify({ pod: 'rethinkdb-2' }));
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(false);
    expect(res.body.report.skipped).toEqual([expect.objectContaining({ shard: 0, reason: 'rethinkdb_1 acts for rethinkdb_0, which is disconnected; no eligible replica (rethinkdb_1 draining, rethinkdb_2 draining)' })]);
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([0]);
  });

  // Seen on real servers (test/real/events.test.js): a PRESTOP that arrives while RethinkDB is still failing over
  // a lost primary plans on a snapshot where nobody acts for that shard yet; the election then picks the stopping
  // server. The drain must hand that shard over too, not wait for the deadline and answer primariesOff false.
  test('when the stopping server is elected for a lost primary\'s shard after the PRESTOP planned, then that shard is handed over too', async () => {
    const h = createSandboxHarness();
    h.model.crashServer('rethinkdb_0', { mode: 'kill' });
    const shard0 = (await request(h.app).get('/v1/cluster')).body.tables[0].shards[0];
    expect({ primary: shard0.primary, acting: shard0.acting }).toEqual({ primary: 'rethinkdb_0', acting: [] });
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(res.body.report.changes).toEqual(expect.arrayContaining([expect.objectContaining({ shard: 0, from: 'rethinkdb_0', to: 'rethinkdb_2' })]));
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([]);
  });

  // Also seen on real servers: just after RethinkDB elected the stopping server for a lost primary's shard, the
  // shard's other replica was still waiting_for_primary (ineligible) for a moment. The drain must wait for it to be
  // ready and hand the shard over, not give up at once with primariesOff false.
  test('when the only other replica of a shard the stopping server acts for is not ready yet after the election, then the drain waits for it and hands the shard over', async () => {
    let waitingUntil = Infinity;
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async readSystemTables() {
          const raw = await source.readSystemTables();
          if (h.clock.now() >= waitingUntil) return raw;
          const rethinkdb2 = raw.serverStatus.find((x) => x.name === 'rethinkdb_2').id;
          const replica = raw.tableStatus[0].shards[0].replicas.find((x) => x.server === rethinkdb2);
          if (replica) replica.state = 'waiting_for_primary';
          return raw;
        },
      }),
    });
    h.model.crashServer('rethinkdb_0', { mode: 'kill' });
    h.clock.advance(60000);
    waitingUntil = h.clock.now() + 2000;
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(res.body.report.skipped).toEqual([]);
    expect(res.body.report.changes).toEqual(expect.arrayContaining([expect.objectContaining({ shard: 0, from: 'rethinkdb_0', to: 'rethinkdb_2' })]));
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([]);
  });

  test('when the stopping server still acts for a shard whose handover to another server is under way, then the answer waits until it no longer acts', async () => {
    const h = createSandboxHarness();
    const cluster = await h.store.readCluster();
    const table = cluster.tables[0];
    const id = (name) => cluster.servers.find((s) => s.name === name).id;
    // Shard 1's config names rethinkdb_2 already; rethinkdb_1 acts until the handover completes.
    await h.store.writeTableShards(table.id, table.shards.map((s) => ({ primary: s.index === 1 ? id('rethinkdb_2') : s.primary, replicas: s.replicas, nonvoting: s.nonvoting })));
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([1]);
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.body).toMatchObject({ primariesOff: true, outcome: 'nothing_to_do' });
    expect(await actingOn(h, 'rethinkdb_1')).toEqual([]);
  });

  test('when the manager is connected through the stopping pod\'s server, then its connection moves off before any demotion is written', async () => {
    // A source that goes through one server at a time, as the real connection manager does.
    const through = { server: null, atWrites: [] };
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        steerAwayFrom: async (serverIds) => {
          if (!serverIds.includes(through.server)) return { moved: false };
          through.server = (await source.readSystemTables()).serverStatus.map((s) => s.id).find((id) => !serverIds.includes(id));
          return { moved: true };
        },
        updateTableShards: async (...args) => { through.atWrites.push(through.server); return source.updateTableShards(...args); },
      }),
    });
    const cluster = await h.store.readCluster();
    const id0 = cluster.servers.find((s) => s.name === 'rethinkdb_0').id;
    through.server = id0;
    const res = await prestop(h.app, 'rethinkdb-0');
    expect(res.body.primariesOff).toBe(true);
    expect(through.atWrites.length).toBeGreaterThan(0);
    expect(through.atWrites).not.toContain(id0);
  });

  test('when a pod is about to stop, then the cluster is read once to decide and once more under the table lock before the write', async () => {
    const { reads, wrapSource } = readCounter();
    const h = createSandboxHarness({ wrapSource });
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.body.report.changes).toHaveLength(1);
    expect(reads.beforeWrite).toBe(2);
  });

  test('when a pod is about to stop, then the answer says where its time went: the reads and writes it sent (as the data store counted them), planning, and the wait for the new primaries', async () => {
    const { reads, wrapSource } = readCounter();
    const h = createSandboxHarness({ wrapSource });
    const res = await prestop(h.app, 'rethinkdb-1');
    const { timings } = res.body;
    // One table write for the demotion, one heartbeat write; every read outside the wait for the new primaries
    // counted as reading: two to decide and plan, one to see whether the shards are ready without the server after
    // the demotion.
    expect(timings.queries).toEqual({ reads: 3, writes: 2, readsWhileWaiting: reads.count - 3 });
    expect(timings.queries.readsWhileWaiting).toBeGreaterThanOrEqual(1);
    for (const phase of ['readMs', 'planMs', 'writeMs', 'waitMs', 'otherMs']) expect(timings[phase]).toBeGreaterThanOrEqual(0);
    const parts = timings.readMs + timings.planMs + timings.writeMs + timings.waitMs + timings.otherMs;
    expect(Math.abs(parts - timings.totalMs)).toBeLessThanOrEqual(0.5);
  });

  test.each([
    ['rethinkdb-9', 404, 'POD_NOT_FOUND'],
    ['Bad_Pod', 400, 'BAD_REQUEST'],
    ['', 400, 'BAD_REQUEST'],
  ])('when the pod is %j, then %i %s and nothing changes', async (pod, status, code) => {
    const h = createSandboxHarness();
    const res = await prestop(h.app, pod);
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(code);
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });

  test('when the data store hangs, then the hook is answered at its deadline, not held until SIGKILL', async () => {
    const h = createSandboxHarness({
      env: { PRESTOP_DEADLINE_SECONDS: '2' },
      wrapSource: (source) => ({ ...source, readSystemTables: () => new Promise(() => {}) }),
    });
    const started = Date.now();
    const res = await prestop(h.app, 'rethinkdb-1');
    const elapsedMs = Date.now() - started;
    expect(res.status).toBe(504);
    expect(res.body).toMatchObject({ error: 'DEADLINE_EXCEEDED', message: expect.stringContaining('within 2 s') });
    expect(elapsedMs).toBeGreaterThanOrEqual(1900);
  });

  test('when the data store is down, then the hook gets 503 at once', async () => {
    const down = async () => { throw new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB: connect ECONNREFUSED'); };
    const h = createSandboxHarness({ wrapSource: (source) => ({ ...source, readSystemTables: down }) });
    const res = await prestop(h.app, 'rethinkdb-1');
    expect(res.status).toBe(503);
    expect(res.body.error).toBe('DATA_STORE_UNAVAILABLE');
  });
});

describe('POST /v1/hooks/poststart', () => {
  test('when a drained server returns, then the cluster is read once to decide (the read that saw it join) and once more under the table lock before the write', async () => {
    const { reads, wrapSource } = readCounter();
    const h = createSandboxHarness({ wrapSource });
    await prestop(h.app, 'rethinkdb-1');
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    reads.reset();
    const res = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op).toMatchObject({ status: 'succeeded', report: { decision: { kind: 'returning' }, changes: [expect.objectContaining({ shard: 1, to: 'rethinkdb_1' })] } });
    expect(reads.beforeWrite).toBe(2);
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });

  test('when the returning server\'s replicas are not ready at first, then it waits for them and plans on the read that shows them ready', async () => {
    // While unreadyReads is above 0, each read shows rethinkdb_1's replicas backfilling.
    let unreadyReads = 0;
    const { reads, wrapSource } = readCounter((raw) => {
      if (unreadyReads === 0) return raw;
      unreadyReads -= 1;
      const id = raw.serverStatus.find((x) => x.name === 'rethinkdb_1').id;
      for (const t of raw.tableStatus) for (const sh of t.shards) for (const r of sh.replicas) if (r.server === id) r.state = 'backfilling';
      return raw;
    });
    const h = createSandboxHarness({ wrapSource });
    await prestop(h.app, 'rethinkdb-1');
    reads.reset();
    unreadyReads = 3;
    const res = await request(h.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op).toMatchObject({ status: 'succeeded', report: { replicasReady: true, changes: [expect.objectContaining({ shard: 1, to: 'rethinkdb_1' })] } });
    // The join (unready), two polls unready, one ready (planned on), one under the lock.
    expect(reads.beforeWrite).toBe(5);
  });
});
