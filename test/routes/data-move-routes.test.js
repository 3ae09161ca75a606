import request from 'supertest';
import { AppError } from '../../src/errors.js';
import { createSandboxHarness, postJson, primaryMap, waitForOperation } from '../helpers/harness.js';

const post = postJson;


async function shardReplicas(store, shard, table = 'ycsb.usertable') {
  const cluster = await store.readCluster();
  const t = cluster.tables.find((x) => `${x.db}.${x.name}` === table);
  const name = (id) => cluster.servers.find((s) => s.id === id).name;
  return { replicas: t.shards[shard].replicas.map(name).sort(), nonvoting: t.shards[shard].nonvoting.map(name) };
}

describe('POST /v1/actions/create-replica', () => {
  test('when a replica is created, then 202 with an operation that backfills it as nonvoting and then makes it vote', async () => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/create-replica', { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    expect(res.headers.location).toBe(res.body.operation.href);
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op).toMatchObject({ kind: 'create-replica', status: 'succeeded' });
    expect(op.steps).toEqual([expect.objectContaining({ table: 'ycsb.usertable', shard: 0, from: null, to: 'rethinkdb_3', status: 'done', progress: 1 })]);
    expect(op.report.changes[0]).toMatchObject({
      before: { replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'], nonvoting: [] },
      after: { replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'], nonvoting: [] },
    });
    expect(await shardReplicas(h.store, 0)).toEqual({ replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'], nonvoting: [] });
  });

  test.each([
    [{ table: 'ycsb.nope', shard: 0, server: 'rethinkdb_3' }, 404, 'TABLE_NOT_FOUND'],
    [{ table: 'ycsb.usertable', shard: 4, server: 'rethinkdb_3' }, 404, 'SHARD_NOT_FOUND'],
    [{ table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_7' }, 404, 'SERVER_NOT_FOUND'],
    [{ table: 'usertable', shard: 0, server: 'rethinkdb_3' }, 400, 'BAD_REQUEST'],
    [{ table: 'ycsb.usertable', shard: -1, server: 'rethinkdb_3' }, 400, 'BAD_REQUEST'],
  ])('when the body is %j, then %i %s and nothing changes', async (body, status, code) => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/create-replica', body);
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(code);
    expect(await shardReplicas(h.store, 0)).toEqual({ replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'], nonvoting: [] });
  });

  test('when dryRun=true, then the planned move is returned with 200 and no operation starts', async () => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/create-replica?dryRun=true', { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'planned', changes: [{ table: 'ycsb.usertable', shard: 0, kind: 'replica', from: null, to: 'rethinkdb_3' }] });
    expect(h.operations.list()).toEqual([]);
  });
});

describe('POST /v1/actions/migrate-replicas-off', () => {
  test('when a dead server is replaced, then its replicas move to the new server one shard at a time', async () => {
    const h = createSandboxHarness();
    h.model.crashServer('rethinkdb_3');
    h.clock.advance(15000);
    h.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' });
    const writes = [];
    const original = h.model.updateTableShards;
    h.model.updateTableShards = (id, shards) => { writes.push(shards.map((s) => s.nonvoting_replicas.length)); return original(id, shards); };
    const res = await post(h.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op.report.notDone).toEqual([]);
    expect(op.status).toBe('succeeded');
    expect(op.steps.map((s) => [s.shard, s.from, s.to, s.status])).toEqual([
      [1, 'rethinkdb_3', 'rethinkdb_4', 'done'], [2, 'rethinkdb_3', 'rethinkdb_4', 'done'], [3, 'rethinkdb_3', 'rethinkdb_4', 'done'],
    ]);
    // the demotion of the lost server's primary first (no replica staged), then stage and finalize alternate: never
    // two shards staged at once
    expect(writes.map((w) => w.reduce((a, b) => a + b, 0))).toEqual([0, 1, 0, 1, 0, 1, 0]);
    for (const shard of [1, 2, 3]) expect((await shardReplicas(h.store, shard)).replicas).toContain('rethinkdb_4');
    const cluster = (await request(h.app).get('/v1/cluster')).body;
    // holding nothing and disconnected, RethinkDB no longer lists it; the draining mark remains visible
    expect(cluster.servers.map((s) => s.name)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_4']);
    expect(cluster.draining).toEqual([expect.objectContaining({ server: 'rethinkdb_3', reason: 'migrate-replicas-off', present: false })]);
    expect(cluster.tables[0].readyForWrites).toBe(true);
  });
});

describe('POST /v1/actions/add-server', () => {
  test('when a server is added, then it takes a fair share of replicas from the most loaded servers', async () => {
    const h = createSandboxHarness();
    h.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' });
    const res = await post(h.app, '/v1/actions/add-server', { server: 'rethinkdb_4' });
    expect(res.status).toBe(202);
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op.status).toBe('succeeded');
    const servers = (await request(h.app).get('/v1/cluster')).body.servers;
    const counts = servers.map((s) => s.replicas);
    expect(counts.reduce((a, b) => a + b, 0)).toBe(12);
    expect(servers.find((s) => s.name === 'rethinkdb_4').replicas).toBe(2);
    expect(Math.max(...counts) - Math.min(...counts)).toBeLessThanOrEqual(1);
    expect(servers.map((s) => s.primaries).reduce((a, b) => a + b, 0)).toBe(4);
  });

  test('when the server is draining, then add-server plans nothing and says to release it first', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_3' });
    const res = await post(h.app, '/v1/actions/add-server?dryRun=true', { server: 'rethinkdb_3' });
    expect(res.body).toMatchObject({ changes: [], skipped: [{ reason: 'rethinkdb_3 is draining; release it first' }] });
  });

  test('when grow=true, then the server is added as an extra replica and nothing is removed', async () => {
    const h = createSandboxHarness();
    h.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' });
    const res = await post(h.app, '/v1/actions/add-server?dryRun=true', { server: 'rethinkdb_4', grow: true, tables: ['ycsb.usertable'] });
    expect(res.body.changes).toHaveLength(4);
    expect(res.body.changes.every((c) => c.from === null)).toBe(true);
  });
});

describe('safety under concurrency and failure', () => {
  test('when two drains race, then no two writes to one table_config overlap and neither demotes onto the other', async () => {
    let active = 0;
    let maxActive = 0;
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async updateTableShards(id, shards) {
          active += 1;
          maxActive = Math.max(maxActive, active);
          await new Promise((resolve) => setTimeout(resolve, 15));
          active -= 1;
          return source.updateTableShards(id, shards);
        },
      }),
    });
    const [a, b] = await Promise.all([
      post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' }),
      post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_2' }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(maxActive).toBe(1);
    const primaries = await primaryMap(h.store);
    expect(primaries).not.toContain('rethinkdb_1');
    expect(primaries).not.toContain('rethinkdb_2');
  });

  test('when a drain plans before another drain commits, then it re-plans under the lock with the new draining mark', async () => {
    // The first drain's first read (its plan) is held until the second drain has committed.
    let reads = 0;
    let releaseFirst;
    const firstHeld = new Promise((resolve) => { releaseFirst = resolve; });
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async readSystemTables() {
          reads += 1;
          if (reads === 1) await firstHeld;
          return source.readSystemTables();
        },
      }),
    });
    // A supertest request starts when it is awaited: Promise.resolve starts this one now.
    const first = Promise.resolve(post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' }));
    while (reads === 0) await new Promise((resolve) => { setImmediate(resolve); });
    const second = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_2' });
    releaseFirst();
    const a = await first;
    expect(second.body.outcome).toBe('completed');
    expect(a.body.outcome).toBe('completed');
    expect(a.body.changes.map((c) => c.to)).not.toContain('rethinkdb_2');
    const primaries = await primaryMap(h.store);
    expect(primaries).not.toContain('rethinkdb_1');
    expect(primaries).not.toContain('rethinkdb_2');
  });

  // As RethinkDB 2.4.4 answered in test/real/hooks.test.js: a table with a shard that lost its majority takes no
  // config write, not even for its healthy shards.
  test('when other shards of the table have no quorum, then a drain writes nothing and says RethinkDB refused the table', async () => {
    const h = createSandboxHarness();
    h.model.crashServer('rethinkdb_2');
    h.model.crashServer('rethinkdb_3');
    h.clock.advance(20000);
    const before = await primaryMap(h.store);
    const start = h.clock.now();
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_0' });
    expect(res.body).toMatchObject({ outcome: 'failed', changes: [] });
    expect(res.body.notDone.map((n) => n.reason).join()).toMatch(/hosting table `ycsb.usertable` are currently unreachable/);
    expect(await primaryMap(h.store)).toEqual(before);
    expect(h.clock.now() - start).toBeLessThan(2000);
  });

  test('when the new primary never takes over, then the action answers at its deadline saying what is pending', async () => {
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async readSystemTables() {
          const raw = await source.readSystemTables();
          for (const t of raw.tableStatus) t.shards[1].primary_replicas = [raw.tableConfig[0].shards[1].replicas[0]];
          return raw;
        },
      }),
    });
    const start = h.clock.now();
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1', deadlineSeconds: 3 });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'timed_out', settled: false, pending: [{ table: 'ycsb.usertable', shard: 1, reason: 'acting primary is not the configured one yet' }] });
    expect(h.clock.now() - start).toBeGreaterThanOrEqual(3000);
    expect(h.clock.now() - start).toBeLessThan(3000 + h.config.waitPollIntervalMs + 1);
  });

  test('when RethinkDB is unreachable, then actions and readiness answer 503 at once', async () => {
    const down = () => Promise.reject(new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB: connect ECONNREFUSED'));
    const h = createSandboxHarness({ wrapSource: (source) => ({ ...source, readSystemTables: down, ping: down }) });
    const action = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(action.status).toBe(503);
    expect(action.body).toEqual({ error: 'DATA_STORE_UNAVAILABLE', message: 'not connected to RethinkDB: connect ECONNREFUSED' });
    expect((await request(h.app).get('/readyz')).status).toBe(503);
    expect((await request(h.app).get('/livez')).status).toBe(200);
  });

  test('when RethinkDB is down for several probes, then readiness logs one warning, refusals log warnings, and recovery one line', async () => {
    let up = true;
    const down = () => Promise.reject(new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB: connect ECONNREFUSED'));
    const h = createSandboxHarness({
      wrapSource: (source) => ({ ...source, ping: () => (up ? source.ping() : down()), readSystemTables: (...a) => (up ? source.readSystemTables(...a) : down()) }),
    });
    await h.lead();
    expect((await request(h.app).get('/readyz')).status).toBe(200);
    up = false;
    for (let i = 0; i < 4; i += 1) expect((await request(h.app).get('/readyz')).status).toBe(503);
    expect((await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' })).status).toBe(503);
    up = true;
    expect((await request(h.app).get('/readyz')).status).toBe(200);
    const levelName = { 30: 'info', 40: 'warn', 50: 'error' };
    const seen = h.logs.filter((l) => l.module === 'readiness' || l.module === 'errors' || l.module === 'http').map((l) => [levelName[l.level], l.msg, l.code ?? l.res?.statusCode ?? null]);
    expect(seen.filter(([level]) => level === 'error')).toEqual([]);
    expect(seen.filter(([, msg]) => msg === 'not ready' || msg === 'ready')).toEqual([['warn', 'not ready', 'DATA_STORE_UNAVAILABLE'], ['info', 'ready', null]]);
    expect(seen).toEqual(expect.arrayContaining([['warn', 'request failed', 'DATA_STORE_UNAVAILABLE']]));
    // The error's line names its request: the same id as the request's own line.
    const failed = h.logs.find((l) => l.module === 'errors' && l.path === '/v1/actions/move-primaries-from-server');
    const completed = h.logs.filter((l) => l.module === 'http' && l.req?.url === '/v1/actions/move-primaries-from-server');
    expect(failed.reqId).toBeDefined();
    expect(completed.map((l) => l.req.id)).toEqual([failed.reqId]);
  });

  test('when RethinkDB drops out during a write, then the report says that write\'s outcome is unknown', async () => {
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        updateTableShards: async () => { throw new AppError('DATA_STORE_UNAVAILABLE', 'RethinkDB did not answer "update table_config" within 5000 ms'); },
      }),
    });
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      outcome: 'failed', changes: [],
      notDone: [{ table: 'ycsb.usertable', reason: expect.stringMatching(/^write outcome unknown, RethinkDB became unavailable: /) }],
    });
  });

  test('when a drain\'s first write times out and a later round writes the table, then the report lists it as done, not as unknown', async () => {
    let writes = 0;
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async updateTableShards(id, shards) {
          writes += 1;
          if (writes === 1) throw new AppError('DATA_STORE_UNAVAILABLE', 'RethinkDB did not answer "update table_config" within 3000 ms');
          return source.updateTableShards(id, shards);
        },
      }),
    });
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.body).toMatchObject({ outcome: 'completed', notDone: [] });
    expect(res.body.changes.map((c) => c.from)).toEqual(expect.arrayContaining(['rethinkdb_1']));
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    expect(writes).toBeGreaterThan(1);
  });

  test('when a move\'s target starts draining while it backfills, then its staged replica is taken out again and the report says so', async () => {
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        async updateTableShards(id, shards) {
          const result = await source.updateTableShards(id, shards);
          // The stage write (rethinkdb_3 joins nonvoting; servers are named by id): its pod starts stopping meanwhile.
          const target = (await h.store.readCluster()).servers.find((s) => s.name === 'rethinkdb_3');
          if (shards.some((s) => s.nonvoting_replicas.includes(target.id))) {
            await h.marks.markDraining(target.id, { reason: 'PRESTOP', origin: { kind: 'hook' }, serverName: target.name, pod: 'rethinkdb-3' });
          }
          return result;
        },
      }),
    });
    const res = await post(h.app, '/v1/actions/create-replica', { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' });
    const op = await waitForOperation(h.app, res.body.operation.href);
    expect(op.report).toMatchObject({
      outcome: 'failed', changes: [],
      notDone: [{ table: 'ycsb.usertable', shard: 0, reason: 'rethinkdb_3 started draining while it backfilled; the replica staged on rethinkdb_3 was taken out again' }],
    });
    expect(await shardReplicas(h.store, 0)).toEqual({ replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'], nonvoting: [] });
  });

  test('when shutting down, then new actions get 503 SHUTTING_DOWN and readiness fails', async () => {
    const h = createSandboxHarness();
    await h.shutdown(10);
    const res = await post(h.app, '/v1/actions/rebalance-primaries', {});
    expect(res.status).toBe(503);
    expect(res.body.error).toBe('SHUTTING_DOWN');
    expect((await request(h.app).get('/readyz')).body.error).toBe('SHUTTING_DOWN');
  });

  test('when an operation id is unknown, then 404 naming it', async () => {
    const res = await request(createSandboxHarness().app).get('/v1/operations/abc');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'OPERATION_NOT_FOUND', message: expect.stringContaining('"abc"') });
  });
});
