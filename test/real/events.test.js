// How the manager reacts to events, on real RethinkDB 2.4 servers: the server it is connected through stopping
// or crashing (several seed hosts, addresses learned from server_status), PRESTOP of a server that acts for a
// lost primary, and a replacement that starts before RethinkDB has failed over. Outcomes are read through the
// driver (table_config / table_status), not through the manager. Each test starts its own cluster.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import {
  actingOf, createRealManager, eventually, primariesOf, readTables, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';
import { waitForOperation } from '../helpers/harness.js';

jest.setTimeout(180000);

let cluster = null;
const managers = [];
afterEach(async () => {
  for (const m of managers.splice(0)) await m.close();
  await cluster?.destroy();
  cluster = null;
});

// A manager whose seed list names every server (or only `seeds`), rethinkdb_0 first, as RETHINKDB_HOST takes it.
async function managerWithSeeds(seeds = cluster.servers.map((s) => s.index), env = {}) {
  const hosts = seeds.map((i) => `${cluster.servers[i].host}:${cluster.servers[i].driverPort}`).join(',');
  const m = createRealManager(cluster, { env: { RETHINKDB_HOST: hosts, ACTION_DEADLINE_SECONDS: '30', ...env } });
  managers.push(m);
  await waitConnected(m);
  return m;
}

const allNames = (t) => Object.keys(t.config);
const configuredPrimaries = (t) => allNames(t).flatMap((name) => primariesOf(t, name));
const actingPrimaries = (t) => allNames(t).flatMap((name) => actingOf(t, name).flat());

// Real time: answers within `withinMs` or the last status seen.
async function answersWithin(m, path, withinMs) {
  const started = Date.now();
  const res = await eventually(async () => {
    const got = await request(m.app).get(path);
    return got.status === 200 && got;
  }, { timeoutMs: withinMs, intervalMs: 100, what: `GET ${path} to answer 200` });
  return { res, tookMs: Date.now() - started };
}

describe('the server the manager is connected through goes away (seed hosts, learned addresses)', () => {
  test('when PRESTOP for rethinkdb-0 (the server it is connected through) answers, then the connection is already elsewhere: SIGTERM of rethinkdb-0 costs /v1/cluster nothing, and PRESTOP of rethinkdb-1 works', async () => {
    cluster = await startRealCluster();
    const m = await managerWithSeeds();
    expect(m.connections.status().via.server).toBe('rethinkdb_0');
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-0');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: 'rethinkdb_0', primariesOff: true, outcome: 'completed' });
    expect(m.connections.status().via.server).not.toBe('rethinkdb_0');
    const t = await readTables(cluster, 1);
    expect(configuredPrimaries(t)).not.toContain('rethinkdb_0');
    expect(actingPrimaries(t)).not.toContain('rethinkdb_0');
    await cluster.stopServer(0, 'SIGTERM');
    // At once, no retry: the connection had left rethinkdb_0 before the demotion.
    const after = await request(m.app).get('/v1/cluster');
    expect({ status: after.status, error: after.body.error }).toEqual({ status: 200, error: undefined });
    const next = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ server: 'rethinkdb_1', primariesOff: true });
    const t2 = await readTables(cluster, 2);
    expect(configuredPrimaries(t2)).not.toContain('rethinkdb_1');
    expect(actingPrimaries(t2)).not.toContain('rethinkdb_1');
  });

  test.each([
    ['SIGTERM', 'loopback', 'every server'],
    ['SIGKILL', 'loopback', 'every server'],
    ['SIGKILL', 'loopback', 'only rethinkdb-0'],
    ['SIGKILL', 'netns', 'only rethinkdb-0'],
  ])('when rethinkdb-0, which the manager is connected through, gets %s without a PRESTOP (%s, seeds: %s), then /v1/cluster and a PRESTOP of rethinkdb-1 work again within seconds through another server', async (signal, network, seedsOf) => {
    // A lab index of its own: the evaluation's netns lab (index 0) may run beside the tests.
    cluster = await startRealCluster({ network, labIndex: network === 'netns' ? 9 : 0 });
    const m = await managerWithSeeds(seedsOf === 'every server' ? [0, 1, 2, 3] : [0]);
    expect(m.connections.status().via.server).toBe('rethinkdb_0');
    // One read: the addresses of every server are learned from server_status.
    expect((await request(m.app).get('/v1/cluster')).status).toBe(200);
    await cluster.stopServer(0, signal);
    const { res, tookMs } = await answersWithin(m, '/v1/cluster', 5000);
    expect(res.body.servers.find((s) => s.name === 'rethinkdb_0')).toMatchObject({ connected: false });
    expect(m.connections.status().via.server).not.toBe('rethinkdb_0');
    process.stderr.write(`${signal} ${network} seeds ${seedsOf}: /v1/cluster answered again after ${tookMs} ms via ${JSON.stringify(m.connections.status().via)}\n`);
    const started = Date.now();
    const prestop = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(prestop.status).toBe(200);
    if (!prestop.body.primariesOff) process.stderr.write(`PRESTOP rethinkdb-1: ${JSON.stringify(prestop.body.report, null, 1)}\n${JSON.stringify(await readTables(cluster, 2).then((x) => ({ c: x.config['ycsb.usertable'].shards, s: x.status['ycsb.usertable'].shards, ac: x.config['ycsb.accounts'].shards, as: x.status['ycsb.accounts'].shards })))}\n`);
    expect(prestop.body).toMatchObject({ server: 'rethinkdb_1', primariesOff: true });
    expect(Date.now() - started).toBeLessThan(30000);
    const t = await readTables(cluster, 2);
    expect(configuredPrimaries(t)).not.toContain('rethinkdb_1');
    expect(actingPrimaries(t)).not.toContain('rethinkdb_1');
  });
});

const podOf = (serverName) => serverName.replace('_', '-');
const indexOf = (serverName) => Number(serverName.split('_')[1]);

describe('PRESTOP of a server that acts for a lost primary (defect 6)', () => {
  test('when a configured primary is SIGKILLed and RethinkDB fails over, then PRESTOP of the server now acting hands that shard over, and primariesOff is true only if table_status shows it acting for no shard', async () => {
    cluster = await startRealCluster();
    const before = await readTables(cluster);
    // usertable shard 0's configured primary, which the manager is not connected through.
    const lost = primariesOf(before)[0];
    const via = cluster.servers.find((s) => s.name !== lost).index;
    // FAILOVER_ADOPT off: the config keeps naming the lost primary, which is the state this PRESTOP plans on.
    const m = createRealManager(cluster, { via, env: { ACTION_DEADLINE_SECONDS: '30', FAILOVER_ADOPT: 'false' } });
    managers.push(m);
    await waitConnected(m);
    await cluster.stopServer(indexOf(lost), 'SIGKILL');
    const failedOver = await eventually(async () => {
      const t = await readTables(cluster, via);
      const acting = actingOf(t)[0];
      return acting.length === 1 && acting[0] !== lost && t;
    }, { what: 'RethinkDB to elect another acting primary for usertable shard 0' });
    expect(primariesOf(failedOver)[0]).toBe(lost);
    const actor = actingOf(failedOver)[0][0];
    const res = await request(m.app).post(`/v1/hooks/prestop?pod=${podOf(actor)}`);
    expect(res.status).toBe(200);
    const after = await readTables(cluster, via);
    const stillActing = allNames(after).flatMap((name) => actingOf(after, name).map((acting, shard) => ({ name, shard, acting })))
      .filter((s) => s.acting.includes(actor));
    process.stderr.write(`defect 6: ${lost} killed, ${actor} acted for usertable[0]; PRESTOP ${podOf(actor)}: primariesOff ${res.body.primariesOff}, `
      + `changes ${JSON.stringify(res.body.report.changes.map((c) => `${c.table}[${c.shard}] ${c.from} -> ${c.to}`))}, still acting ${JSON.stringify(stillActing)}, `
      + `skipped ${JSON.stringify(res.body.report.skipped)}, notDone ${JSON.stringify(res.body.report.notDone)}, pending ${JSON.stringify(res.body.report.pending)}, `
      + `shard 0 status before ${JSON.stringify(failedOver.status['ycsb.usertable'].shards[0])}, after ${JSON.stringify(after.status['ycsb.usertable'].shards[0])}\n`);
    expect(res.body.primariesOff).toBe(stillActing.length === 0);
    // Another live replica (the shard's third) could take it: the manager must have handed it over.
    expect(stillActing).toEqual([]);
    expect(res.body.primariesOff).toBe(true);
    expect(res.body.report.changes).toContainEqual(expect.objectContaining({ table: 'ycsb.usertable', shard: 0, from: lost }));
    const newPrimary = primariesOf(after)[0];
    expect([lost, actor]).not.toContain(newPrimary);
    expect(actingOf(after)[0]).toEqual([newPrimary]);
  });
});

describe('a replacement right after a crash (defect 5)', () => {
  test('when rethinkdb-2 is SIGKILLed and at once comes back empty under its hostname, then POSTSTART (with the periodic work running, as src/server.js does) completes the replacement: the old id is in no table_config', async () => {
    cluster = await startRealCluster();
    const m = createRealManager(cluster, { via: 0, env: { POSTSTART_JOIN_TIMEOUT_SECONDS: '60', ACTION_DEADLINE_SECONDS: '30' } });
    managers.push(m);
    await waitConnected(m);
    const uuidConfigs = () => cluster.withConnection((c) => r.db('rethinkdb').table('table_config', { identifierFormat: 'uuid' }).coerceTo('array').run(c), 0);
    const oldId = (await cluster.withConnection((c) => r.db('rethinkdb').table('server_config').filter({ name: 'rethinkdb_2' }).nth(0).run(c), 0)).id;
    await cluster.stopServer(2, 'SIGKILL');
    cluster.wipeServer(2);
    await cluster.restartServer(2);
    // As src/server.js does: the periodic work every second.
    let ticking = true;
    const ticks = (async () => { while (ticking) { await m.tick({ poll: false }).catch(() => {}); await new Promise((res) => { setTimeout(res, 1000); }); } })();
    try {
      const res = await request(m.app).post('/v1/hooks/poststart?pod=rethinkdb-2');
      expect(res.status).toBe(202);
      const op = await waitForOperation(m.app, res.body.operation.href, { tries: 60000 });
      process.stderr.write(`defect 5: POSTSTART ${op.status} ${JSON.stringify({ decision: op.report?.decision?.kind, outcome: op.report?.outcome, notDone: op.report?.notDone, skipped: op.report?.skipped, error: op.error })}\n`);
      expect(op.report?.decision?.kind ?? op.error).toBe('replacement');
      const newId = (await cluster.withConnection((c) => r.db('rethinkdb').table('server_status').filter({ network: { hostname: 'rethinkdb-2' } }).nth(0).run(c), 0)).id;
      expect(newId).not.toBe(oldId);
      const started = Date.now();
      const configs = await eventually(async () => {
        const list = await uuidConfigs();
        const done = list.every((conf) => conf.shards.every((s) => !s.replicas.includes(oldId) && s.replicas.length === 3))
          && (await m.marks.migrations()).length === 0;
        return done && list;
      }, { timeoutMs: 120000, intervalMs: 500, what: 'the replacement to finish (old id in no table_config, 3 replicas each, no migration left)' });
      const retries = m.logs.filter((l) => l.msg === 'migration unfinished; it will be retried').map((l) => l.reason);
      process.stderr.write(`defect 5: replacement complete ${Date.now() - started} ms after the POSTSTART operation ended; retries scheduled: ${JSON.stringify(retries)}\n`);
      for (const conf of configs) for (const s of conf.shards) expect(s.replicas).not.toContain(oldId);
      expect(configs.some((conf) => conf.shards.some((s) => s.replicas.includes(newId)))).toBe(true);
      await eventually(async () => Object.values((await readTables(cluster, 0)).status).every((s) => s.status.all_replicas_ready), { timeoutMs: 60000, what: 'every replica ready' });
    } finally {
      ticking = false;
      await ticks;
    }
  });
});
