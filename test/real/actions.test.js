// The manager's actions through its HTTP routes on four real RethinkDB 2.4 servers, with real Raft and real
// backfills underneath. Every outcome is checked in table_config and table_status read through the driver.
// The tests share one cluster, but none depends on another: each starts from the layout the tables were created with
// (set again by hand, and checked, before each), with no server marked, so that any of them can run alone (-t).

import { jest } from '@jest/globals';
import request from 'supertest';
import {
  actingOf, allPrimaries, createRealManager, eventually, primariesOf, readLayout, readTables, releaseDraining, replicasOf, setLayout, settled,
  startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';
import { postJson, waitForOperation } from '../helpers/harness.js';

jest.setTimeout(90000);

let cluster;
let m;
let ids;
// The layout the tables were created with: where every test starts.
let created;
beforeAll(async () => {
  cluster = await startRealCluster();
  m = createRealManager(cluster);
  await waitConnected(m);
  created = await readLayout(cluster);
}, 120000);

// No server marked, the tables as created, and the servers' ids as the manager sees them.
beforeEach(async () => {
  await releaseDraining(m);
  await setLayout(cluster, created);
  expect(await readLayout(cluster)).toEqual(created);
  const servers = (await request(m.app).get('/v1/cluster')).body.servers;
  expect(servers.filter((s) => s.draining)).toEqual([]);
  ids = Object.fromEntries(servers.map((s) => [s.name, s.id]));
}, 90000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

// readTables reads table_config by names, so primaries and replicas below are server names.
const countOn = (list, name) => list.filter((n) => n === name).length;
// The difference between the most and the fewest primaries on a connected server.
function spread(primaryNames) {
  const counts = Object.keys(ids).filter((n) => cluster.running(Number(n.split('_')[1]))).map((n) => countOn(primaryNames, n));
  return Math.max(...counts) - Math.min(...counts);
}

// A server a test added (a fifth) is stopped after it: the next test finds the four servers the tables were created on.
afterEach(async () => {
  for (const s of cluster.servers.slice(4)) if (cluster.running(s.index)) await cluster.stopServer(s.index);
});

// The layout without `name`: in each shard that has it, the server that shard lacks takes its place (as replica, and as
// primary where it was).
function layoutWithout(layout, name) {
  const all = [...new Set(Object.values(layout).flatMap((shards) => shards.flatMap((s) => s.replicas)))];
  return Object.fromEntries(Object.entries(layout).map(([table, shards]) => [table, shards.map((s) => {
    if (!s.replicas.includes(name)) return s;
    const instead = all.find((n) => n !== name && !s.replicas.includes(n));
    return { primary: s.primary === name ? instead : s.primary, replicas: s.replicas.map((n) => (n === name ? instead : n)).sort(), nonvoting: [] };
  })]));
}

// Sets usertable shard 0's replicas by hand (names), keeping its primary.
async function setShard0Replicas(replicaNames) {
  const { default: r } = await import('rethinkdb');
  await cluster.withConnection(async (c) => {
    const conf = await r.db('ycsb').table('usertable').config().run(c);
    const shards = conf.shards.map((s, i) => (i === 0 ? { ...s, replicas: replicaNames } : s));
    await r.db('ycsb').table('usertable').config().update({ shards }).run(c);
  });
  await eventually(() => settled(cluster), { what: 'shard 0 back to three replicas' });
}

describe('actions on a real RethinkDB cluster', () => {
  test('when move-primaries-from-server drains rethinkdb_1, then no table names it as primary and every new primary acts', async () => {
    const res = await postJson(m.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'completed', settled: true, skipped: [], notDone: [] });
    const t = await readTables(cluster);
    for (const name of ['ycsb.usertable', 'ycsb.accounts']) {
      expect(primariesOf(t, name)).not.toContain('rethinkdb_1');
      // Checked right after the answer: the action waited for the acting primaries, not only for ready_for_writes.
      expect(actingOf(t, name)).toEqual(primariesOf(t, name).map((p) => [p]));
    }
    expect((await request(m.app).get('/v1/cluster')).body.servers.find((s) => s.name === 'rethinkdb_1').draining).toBe(true);
  });

  test('when a rebalance runs while rethinkdb_1 drains, then it gets no primary; when it is released, then it gets its share back', async () => {
    expect((await postJson(m.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' })).status).toBe(200);
    const during = await postJson(m.app, '/v1/actions/rebalance-primaries', {});
    expect(during.status).toBe(200);
    expect(primariesOf(await readTables(cluster))).not.toContain('rethinkdb_1');
    const res = await postJson(m.app, '/v1/actions/release-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body.rebalance).toMatchObject({ outcome: 'completed', settled: true });
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    expect(countOn(allPrimaries(t), 'rethinkdb_1')).toBeGreaterThanOrEqual(1);
    expect(spread(allPrimaries(t))).toBeLessThanOrEqual(1);
  });

  test('when every primary is piled on rethinkdb_0 by hand, then rebalance-primaries spreads them one per server', async () => {
    await cluster.withConnection(async (c) => {
      const { default: r } = await import('rethinkdb');
      const conf = await r.db('rethinkdb').table('table_config').filter({ db: 'ycsb', name: 'usertable' }).nth(0).run(c);
      const shards = conf.shards.map((s) => ({ ...s, replicas: s.replicas.includes('rethinkdb_0') ? s.replicas : [...s.replicas.slice(1), 'rethinkdb_0'], primary_replica: 'rethinkdb_0' }));
      await r.db('ycsb').table('usertable').config().update({ shards }).run(c);
      await r.db('ycsb').table('usertable').wait({ waitFor: 'all_replicas_ready', timeout: 30 }).run(c);
    });
    await eventually(() => settled(cluster), { what: 'the hand-made layout to settle' });
    const res = await postJson(m.app, '/v1/actions/rebalance-primaries', {});
    expect(res.body).toMatchObject({ outcome: 'completed', settled: true });
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    // Six primaries (4 + 2 shards) over four servers: two or one each.
    expect(spread(allPrimaries(t))).toBeLessThanOrEqual(1);
    expect(countOn(primariesOf(t), 'rethinkdb_0')).toBeLessThanOrEqual(2);
  });

  test('when create-replica adds a fourth replica to shard 0, then it backfills and is ready on that server', async () => {
    const before = replicasOf(await readTables(cluster))[0];
    const missing = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'].find((n) => !before.includes(n));
    const res = await postJson(m.app, '/v1/actions/create-replica', { table: 'ycsb.usertable', shard: 0, server: missing });
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 20000 });
    expect(op).toMatchObject({ status: 'succeeded', report: { outcome: 'completed' } });
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    expect(replicasOf(t)[0].sort()).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
    expect(t.status['ycsb.usertable'].shards[0].replicas.map((x) => x.state)).toEqual(['ready', 'ready', 'ready', 'ready']);
  });

  test('when migrate-replicas-off moves everything off rethinkdb_3, then it holds no replica, every shard keeps its count, and the steps show progress', async () => {
    const before = await readTables(cluster);
    const res = await postJson(m.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 20000 });
    if (op.status !== 'succeeded') process.stderr.write(`${JSON.stringify(op, null, 1)}\n`);
    expect({ status: op.status, report: op.report }).toMatchObject({ status: 'succeeded', report: { outcome: 'completed' } });
    expect(op.steps.length).toBeGreaterThan(0);
    for (const step of op.steps) expect(step).toMatchObject({ status: 'done', progress: 1 });
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    for (const name of ['ycsb.usertable', 'ycsb.accounts']) {
      expect(replicasOf(t, name).flat()).not.toContain('rethinkdb_3');
      expect(replicasOf(t, name).map((r) => r.length)).toEqual(replicasOf(before, name).map((r) => r.length));
    }
  });

  test('when a move off rethinkdb_3 was staged and never finalized (a manager stopped between the two writes), then migrate-replicas-off finishes it: the staged nonvoting replica votes and rethinkdb_3 leaves', async () => {
    // rethinkdb_3 holding nothing, give it a replica of shard 0 again, then stage a move of it as the manager does (the
    // target joins as nonvoting) and leave it there.
    await setLayout(cluster, layoutWithout(created, 'rethinkdb_3'));
    const voters = replicasOf(await readTables(cluster))[0];
    const primary = primariesOf(await readTables(cluster))[0];
    const [other, staged] = voters.filter((n) => n !== primary);
    const kept = [primary, other];
    await setShard0Replicas([...kept, 'rethinkdb_3']);
    const { default: r } = await import('rethinkdb');
    await cluster.withConnection(async (c) => {
      const conf = await r.db('ycsb').table('usertable').config().run(c);
      const shards = conf.shards.map((sh, i) => (i === 0 ? { ...sh, replicas: [...sh.replicas, staged], nonvoting_replicas: [staged] } : sh));
      await r.db('ycsb').table('usertable').config().update({ shards }).run(c);
    });
    const res = await postJson(m.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 20000 });
    if (op.status !== 'succeeded') process.stderr.write(`${JSON.stringify(op, null, 1)}\n`);
    expect({ status: op.status, skipped: op.report.skipped }).toEqual({ status: 'succeeded', skipped: [] });
    expect(op.steps.map((step) => ({ table: step.table, shard: step.shard, to: step.to }))).toEqual([{ table: 'ycsb.usertable', shard: 0, to: staged }]);
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    expect(replicasOf(t)[0]).toEqual([...kept, staged].sort());
    expect(t.config['ycsb.usertable'].shards[0].nonvoting_replicas).toEqual([]);
  });

  test('when add-server runs for a fifth server that really joined, then it takes replicas and a primary', async () => {
    const index = await cluster.addServer();
    await cluster.waitForServers(5);
    const servers = (await request(m.app).get('/v1/cluster')).body.servers;
    ids = Object.fromEntries(servers.map((s) => [s.name, s.id]));
    expect(ids[`rethinkdb_${index}`]).toBeDefined();
    const res = await postJson(m.app, '/v1/actions/add-server', { server: `rethinkdb_${index}` });
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 20000 });
    expect(op).toMatchObject({ status: 'succeeded', report: { outcome: 'completed' } });
    const t = await eventually(() => settled(cluster), { what: 'acting primaries and ready replicas' });
    expect(replicasOf(t).flat().filter((id) => id === `rethinkdb_${index}`).length).toBeGreaterThan(0);
    expect(primariesOf(t).filter((id) => id === `rethinkdb_${index}`).length + primariesOf(t, 'ycsb.accounts').filter((id) => id === `rethinkdb_${index}`).length).toBeGreaterThan(0);
  });
});
