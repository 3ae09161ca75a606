// PRESTOP, POSTSTART and failures on real RethinkDB 2.4 servers: clean stops, crashes, returns, replacements,
// the data store down or hung, and a table without quorum. Outcomes are read through the driver.
// The tests share one cluster; each starts from the state beforeEach restores (every server running, none marked, no
// departure owed, the tables as created) and sets up the rest itself, so any one of them can run alone (jest -t).

import { readFileSync } from 'node:fs';
import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import {
  PAPER_TABLES, actingOf, allPrimaries, createRealManager, eventually, primariesOf, readLayout, readTables, releaseDraining, replicasOf,
  setLayout, settled, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';
import { waitForOperation } from '../helpers/harness.js';

jest.setTimeout(120000);

let cluster;
let m;
let created;
beforeAll(async () => {
  cluster = await startRealCluster();
  // Connected through rethinkdb_0, which these tests never stop (except the down/hung tests, with a second manager).
  m = createRealManager(cluster, { via: 0, env: { POSTSTART_JOIN_TIMEOUT_SECONDS: '60', ACTION_DEADLINE_SECONDS: '30' } });
  await waitConnected(m);
  created = await readLayout(cluster);
}, 120000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

const post = (path) => request(m.app).post(path);
const postJsonRelease = (server) => post('/v1/actions/release-server').set('content-type', 'application/json').send(JSON.stringify({ server, rebalance: false }));
const NO_QUORUM_WRITE = JSON.parse(readFileSync(new URL('../data/rethinkdb-2.4.4/table-config-write-without-quorum.json', import.meta.url), 'utf8')).error;
const serverIds = async () => Object.fromEntries((await request(m.app).get('/v1/cluster')).body.servers.map((s) => [s.name, s.id]));

const heartbeatSecs = () => cluster.withConnection((conn) => r.db('rethinkdb').table('cluster_config').get('heartbeat')('heartbeat_timeout_secs').run(conn));

async function writableEverywhere() {
  const t = await readTables(cluster);
  return Object.values(t.status).every((s) => s.status.ready_for_writes) && t;
}

// What every test starts from, whatever the test before it left (a server stopped, killed, wiped or added; a hand-made
// layout; a drain or a departure): every server running, the manager answering, no server marked, no departure owed
// and the heartbeat timeout at RethinkDB's 10 s, the tables as created.
beforeEach(async () => {
  for (const s of cluster.servers) if (!cluster.running(s.index)) await cluster.restartServer(s.index);
  await eventually(async () => (await request(m.app).get('/v1/cluster')).status === 200, { what: 'the manager to reach the cluster' });
  await releaseDraining(m);
  await setLayout(cluster, created);
  await eventually(async () => { await m.tick({ poll: false }); return (await m.marks.departures()).length === 0; }, { what: 'no departure owed' });
  // Not written here: a test's own manager closed with a departure owed gives it back itself (decideHeartbeatAtShutdown).
  expect(await heartbeatSecs()).toBe(10);
  expect(await readLayout(cluster)).toEqual(created);
}, 180000);

// rethinkdb-3 stopped after its PRESTOP, its departure over: where a return starts.
async function stopAfterPrestop(pod, index) {
  expect((await post(`/v1/hooks/prestop?pod=${pod}`)).status).toBe(200);
  await cluster.stopServer(index, 'SIGTERM');
  await eventually(async () => { await m.tick({ poll: false }); return (await m.marks.departures()).length === 0; }, { what: `${pod}'s departure to end` });
}


describe('hooks on a real RethinkDB cluster', () => {
  test('when PRESTOP for rethinkdb-3 answers and the server then gets SIGTERM, then every table stays writable while it is away, and the heartbeat timeout is lowered until it has left', async () => {
    const res = await post('/v1/hooks/prestop?pod=rethinkdb-3');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: 'rethinkdb_3', primariesOff: true, outcome: 'completed', heartbeat: { lowered: true, from: 10, to: 2 } });
    expect(await heartbeatSecs()).toBe(2);
    await m.tick({ poll: false });
    expect(await heartbeatSecs()).toBe(2);
    const t = await readTables(cluster);
    expect(allPrimaries(t)).not.toContain('rethinkdb_3');
    expect(actingOf(t)).toEqual(primariesOf(t).map((p) => [p]));
    await cluster.stopServer(3, 'SIGTERM');
    // Sampled for 3 s after the stop: no table loses its writable primary, since none was on the stopped server.
    for (let i = 0; i < 15; i += 1) {
      const now = await readTables(cluster);
      for (const [name, status] of Object.entries(now.status)) expect({ name, writable: status.status.ready_for_writes }).toEqual({ name, writable: true });
      await new Promise((res2) => { setTimeout(res2, 200); });
    }
    // Once the server has left, the next tick puts the heartbeat timeout back.
    await eventually(async () => { await m.tick({ poll: false }); return (await heartbeatSecs()) === 10; }, { what: 'heartbeat timeout back to 10 s' });
    expect(await m.marks.departures()).toEqual([]);
  });

  test('when PRESTOP names a pod no server answers to (no Kubernetes API here), then 404 POD_NOT_FOUND naming the pods it knows, and nothing changed', async () => {
    const res = await post('/v1/hooks/prestop?pod=rethinkdb-7');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({
      error: 'POD_NOT_FOUND',
      message: 'no RethinkDB server belongs to pod "rethinkdb-7" (without a Kubernetes API the manager knows pods only by their servers\' hostnames: rethinkdb-0, rethinkdb-1, rethinkdb-2, rethinkdb-3)',
    });
    expect(await heartbeatSecs()).toBe(10);
    expect(await readLayout(cluster)).toEqual(created);
    expect((await request(m.app).get('/v1/cluster')).body.servers.filter((s) => s.draining)).toEqual([]);
  });

  test('when rethinkdb-3 returns and calls POSTSTART, then it is released and gets primaries back once its replicas are ready', async () => {
    await stopAfterPrestop('rethinkdb-3', 3);
    await cluster.restartServer(3);
    const res = await post('/v1/hooks/poststart?pod=rethinkdb-3');
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 40000 });
    expect(op.status).toBe('succeeded');
    expect(op.report).toMatchObject({ decision: { kind: 'returning', release: true }, replicasReady: true });
    const t = await eventually(() => settled(cluster), { what: 'primaries back and acting' });
    expect(allPrimaries(t)).toContain('rethinkdb_3');
    expect((await request(m.app).get('/v1/cluster')).body.servers.find((s) => s.name === 'rethinkdb_3').draining).toBe(false);
  });

  test('when rethinkdb-2 is SIGKILLed and a new, empty server with its hostname calls POSTSTART, then it replaces the lost server', async () => {
    const before = await serverIds();
    await cluster.stopServer(2, 'SIGKILL');
    await eventually(writableEverywhere, { what: 'RethinkDB to fail over after the crash' });
    cluster.wipeServer(2);
    await cluster.restartServer(2);
    const res = await post('/v1/hooks/poststart?pod=rethinkdb-2');
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 60000 });
    if (op.status !== 'succeeded') process.stderr.write(`replacement: ${JSON.stringify({ status: op.status, skipped: op.report?.skipped, notDone: op.report?.notDone, steps: op.steps })}\n`);
    expect({ status: op.status, outcome: op.report?.outcome }).toEqual({ status: 'succeeded', outcome: 'completed' });
    expect(op.report.decision.kind).toBe('replacement');
    const t = await eventually(() => settled(cluster), { what: 'the replacement to hold the lost replicas, all ready' });
    const oldId = before.rethinkdb_2;
    const configs = await cluster.withConnection((c) => r.db('rethinkdb').table('table_config', { identifierFormat: 'uuid' }).coerceTo('array').run(c));
    for (const conf of configs) {
      for (const shard of conf.shards) expect(shard.replicas).not.toContain(oldId);
    }
    // The new server has a new id; by name it holds replicas again (names: it took rethinkdb_2's name).
    expect(replicasOf(t).flat().some((n) => n.startsWith('rethinkdb_2'))).toBe(true);
  });

  test('when POSTSTART comes from a fifth pod, then it is an expansion: the new server gets replicas and primaries', async () => {
    const index = await cluster.addServer();
    const res = await post(`/v1/hooks/poststart?pod=rethinkdb-${index}`);
    expect(res.status).toBe(202);
    const op = await waitForOperation(m.app, res.body.operation.href, { tries: 60000 });
    expect(op.status).toBe('succeeded');
    expect(op.report.decision.kind).toBe('expansion');
    const t = await eventually(() => settled(cluster), { what: 'the new server to hold ready replicas' });
    expect(replicasOf(t).flat()).toContain(`rethinkdb_${index}`);
  });

  test('when two of the three replicas of a shard are killed, then a drain of its primary skips it with the reason, and RethinkDB refuses a table_config write with its own text', async () => {
    // Every accounts shard on rethinkdb_0 (primary), rethinkdb_1 and rethinkdb_4; then 1 and 4 crash. Every shard: the
    // table's own Raft group is its shards' voters, so it loses its majority too, and RethinkDB refuses the config
    // write below. (With shard 1 left where it was, on servers still up, the write was sometimes answered `unchanged`.)
    // rethinkdb_4 is the expansion's server; alone, this test adds it.
    if (cluster.servers.length < 5) await cluster.addServer();
    await cluster.withConnection(async (c) => {
      const conf = await r.db('ycsb').table('accounts').config().run(c);
      const shards = conf.shards.map(() => ({ primary_replica: 'rethinkdb_0', replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_4'], nonvoting_replicas: [] }));
      await r.db('ycsb').table('accounts').config().update({ shards }).run(c);
    });
    await eventually(() => settled(cluster), { what: 'the hand-made accounts layout' });
    await cluster.stopServer(4, 'SIGKILL');
    await cluster.stopServer(1, 'SIGKILL');
    await eventually(async () => !(await readTables(cluster)).status['ycsb.accounts'].status.ready_for_writes, { what: 'accounts to lose its quorum' });
    const res = await post('/v1/actions/move-primaries-from-server').set('content-type', 'application/json').send('{"server":"rethinkdb_0"}');
    expect(res.status).toBe(200);
    expect(res.body.outcome).not.toBe('completed');
    expect([...res.body.skipped, ...res.body.notDone].find((x) => x.table === 'ycsb.accounts' && x.shard === 0)?.reason).toMatch(/no eligible replica.*disconnected|majority/);
    expect(primariesOf(await readTables(cluster), 'ycsb.accounts')[0]).toBe('rethinkdb_0');
    // What RethinkDB itself answers to a table_config write on a table without quorum (recorded in test/data).
    const error = await cluster.withConnection((c) => r.db('ycsb').table('accounts').config().update({ shards: r.row('shards') }).run(c))
      .then((result) => ({ result }), (err) => ({ name: err.name, msg: err.msg }));
    expect(error).toEqual(NO_QUORUM_WRITE);
    await postJsonRelease('rethinkdb_0');
    await cluster.restartServer(1);
    await cluster.restartServer(4);
    await eventually(writableEverywhere, { what: 'the killed servers to return' });
  });

  test('when the server the manager is connected through is SIGSTOPped (hung), then reads answer 503 DATA_STORE_UNAVAILABLE within the query deadline, and recover after SIGCONT', async () => {
    const other = createRealManager(cluster, { via: 3, env: { RETHINKDB_QUERY_TIMEOUT_MS: '1500' } });
    try {
      await waitConnected(other);
      expect((await request(other.app).get('/v1/cluster')).status).toBe(200);
      process.kill(cluster.pidOf(3), 'SIGSTOP');
      const started = Date.now();
      const res = await request(other.app).get('/v1/cluster');
      const tookMs = Date.now() - started;
      process.kill(cluster.pidOf(3), 'SIGCONT');
      expect(res.status).toBe(503);
      expect(res.body.error).toBe('DATA_STORE_UNAVAILABLE');
      expect(tookMs).toBeLessThan(5000);
      await eventually(async () => (await request(other.app).get('/v1/cluster')).status === 200, { what: 'the manager to reconnect after SIGCONT' });
    } finally {
      await other.close();
    }
  });

  test('when every server is down, then actions and /readyz answer 503 at once, saying RethinkDB is unavailable', async () => {
    const other = createRealManager(cluster, { via: 3 });
    try {
      await waitConnected(other);
      for (const s of cluster.servers) if (cluster.running(s.index)) await cluster.stopServer(s.index, 'SIGKILL');
      const ready = await eventually(async () => {
        const res = await request(other.app).get('/readyz');
        return res.status === 503 && res;
      }, { what: '/readyz to say unavailable' });
      expect(ready.status).toBe(503);
      const action = await request(other.app).post('/v1/actions/rebalance-primaries').set('content-type', 'application/json').send('{}');
      expect(action.status).toBe(503);
      expect(action.body.error).toBe('DATA_STORE_UNAVAILABLE');
    } finally {
      await other.close();
    }
  });
});

describe('HEARTBEAT_TIMEOUT_SECONDS on a real cluster', () => {
  test('when it is set, then the leading manager sets the cluster to it; a PRESTOP lowers it below and gives it back once the server has left', async () => {
    const steady = createRealManager(cluster, { via: 0, env: { HEARTBEAT_TIMEOUT_SECONDS: '3' } });
    try {
      await waitConnected(steady);
      await steady.tick({ poll: false });
      expect(await heartbeatSecs()).toBe(3);
      const res = await request(steady.app).post('/v1/hooks/prestop?pod=rethinkdb-3');
      expect(res.body).toMatchObject({ primariesOff: true, heartbeat: { lowered: true, from: 3, to: 2 } });
      expect(await heartbeatSecs()).toBe(2);
      await cluster.stopServer(3, 'SIGTERM');
      await eventually(async () => { await steady.tick({ poll: false }); return (await heartbeatSecs()) === 3; }, { what: 'heartbeat timeout back to 3 s' });
      expect(await steady.marks.departures()).toEqual([]);
    } finally {
      await steady.close();
      // What every test starts from: RethinkDB's own 10 s (this manager keeps 3 s, and nothing gives that back).
      // First, so that a failure below does not leave the next tests a heartbeat they do not expect.
      await cluster.withConnection((c) => r.db('rethinkdb').table('cluster_config').get('heartbeat').update({ heartbeat_timeout_secs: 10 }).run(c));
      await releaseDraining(m);
    }
  });
});

describe('POSTSTART_GIVE_BACK never and balance on a real cluster', () => {
  test('when a drained server returns, then it is released but keeps no primary, and no table_config changes', async () => {
    const keep = createRealManager(cluster, { via: 0, env: { POSTSTART_GIVE_BACK: 'never' } });
    let closed = false;
    try {
      await waitConnected(keep);
      expect((await request(keep.app).post('/v1/hooks/prestop?pod=rethinkdb-2')).body).toMatchObject({ primariesOff: true });
      await cluster.stopServer(2, 'SIGTERM');
      const before = await readTables(cluster);
      await cluster.restartServer(2);
      const res = await request(keep.app).post('/v1/hooks/poststart?pod=rethinkdb-2');
      const op = await waitForOperation(keep.app, res.body.operation.href, { tries: 40000 });
      expect(op).toMatchObject({ status: 'succeeded', report: { decision: { kind: 'returning', release: true, actions: [] }, changes: [] } });
      const after = await eventually(() => settled(cluster), { what: 'the returned server to be ready' });
      expect(allPrimaries(after)).not.toContain('rethinkdb_2');
      expect([primariesOf(after), primariesOf(after, 'ycsb.accounts')]).toEqual([primariesOf(before), primariesOf(before, 'ycsb.accounts')]);
      expect((await request(keep.app).get('/v1/cluster')).body.servers.find((s) => s.name === 'rethinkdb_2').draining).toBe(false);
      // rethinkdb_2's departure is still owed (this manager never ticks) and saved nowhere (no Kubernetes API): the
      // heartbeat timeout is still lowered, and this manager's shutdown gives it back.
      expect(await keep.marks.departures()).toEqual([expect.objectContaining({ serverName: 'rethinkdb_2', persisted: expect.stringMatching(/^memory-only/) })]);
      expect(await heartbeatSecs()).toBe(2);
      closed = true;
      await keep.close();
      expect(await heartbeatSecs()).toBe(10);
    } finally {
      if (!closed) await keep.close();
    }
  });

  // The layout the next test needs, whatever the tests before left (the expansion among them): rethinkdb_2 a replica of
  // every shard and primary of none, and the other servers' primaries dealt in the order accounts 0, usertable 0,
  // accounts 1, usertable 1, 2, 3, so that every server the levelling takes from (the most loaded, 2 primaries with 3
  // to 5 other servers) holds a primary of each table, or holds the only pair: either table then has a shard that can
  // go to rethinkdb_2. (Keeping only some replica on rethinkdb_2 failed twice: the idle table's shard on it had its
  // primary on a server with one primary, which levelling does not take from.)
  async function shapeForGiveBack() {
    const others = cluster.servers.map((s, i) => (cluster.running(i) && s.name !== 'rethinkdb_2' ? s.name : null)).filter(Boolean);
    await cluster.withConnection(async (c) => {
      const configs = Object.fromEntries(await Promise.all(['accounts', 'usertable'].map(async (name) => [name, (await r.db('ycsb').table(name).config().run(c)).shards])));
      const order = [['accounts', 0], ['usertable', 0], ['accounts', 1], ['usertable', 1], ['usertable', 2], ['usertable', 3]];
      order.forEach(([name, i], k) => {
        const shard = configs[name][i];
        const primary = others[k % others.length];
        const keep = shard.replicas.filter((n) => n !== primary && n !== 'rethinkdb_2' && others.includes(n)).slice(0, 1);
        const filler = others.filter((n) => n !== primary && !keep.includes(n));
        configs[name][i] = { primary_replica: primary, replicas: [primary, 'rethinkdb_2', ...keep, ...filler].slice(0, 3), nonvoting_replicas: [] };
      });
      for (const name of ['accounts', 'usertable']) {
        await r.db('ycsb').table(name).config().update({ shards: configs[name] }).run(c);
        await r.db('ycsb').table(name).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
      }
    });
    await eventually(() => settled(cluster), { what: 'the shaped layout to act' });
  }

  // Starts from rethinkdb_2 running, released, with no primary (shapeForGiveBack). Levelling then moves exactly one
  // primary onto it. By counts alone (a dry run) that is a shard of one table; while clients read only that table,
  // POSTSTART_GIVE_BACK=balance must move a shard of the other, idle one: the traffic read from rethinkdb.stats
  // decides, not the order of the servers.
  test('when a server returns with POSTSTART_GIVE_BACK=balance while one table is read, then the primary it gets back is an idle shard of the other table', async () => {
    const balance = createRealManager(cluster, { via: 0, env: { POSTSTART_GIVE_BACK: 'balance' } });
    let reading = true;
    let reader = null;
    try {
      await waitConnected(balance);
      await shapeForGiveBack();
      const plan = await request(balance.app).post('/v1/actions/rebalance-primaries?dryRun=true').set('content-type', 'application/json').send('{}');
      expect(plan.body).toMatchObject({ outcome: 'planned', changes: [expect.objectContaining({ to: 'rethinkdb_2' })] });
      expect(plan.body.changes).toHaveLength(1);
      const byCounts = plan.body.changes[0].table;
      const hot = byCounts.split('.')[1];
      const idle = hot === 'usertable' ? 'ycsb.accounts' : 'ycsb.usertable';
      const docs = PAPER_TABLES.find((t) => t.table === hot).docs;
      reader = cluster.withConnection(async (c) => {
        while (reading) {
          const keys = Array.from({ length: 50 }, () => `user${Math.floor(Math.random() * docs)}`);
          await r.db('ycsb').table(hot).getAll(r.args(keys)).coerceTo('array').run(c).catch(() => {});
        }
      });
      // rethinkdb.stats rates are averaged over the last seconds: let them show the reads first.
      await eventually(() => cluster.withConnection((c) => r.db('rethinkdb').table('stats').filter(r.row('id').nth(0).eq('table_server'))
        .filter((row) => row('query_engine')('read_docs_per_sec').gt(100)).count().run(c)), { what: 'read traffic in rethinkdb.stats' });
      const before = await readTables(cluster);
      expect((await request(balance.app).post('/v1/hooks/prestop?pod=rethinkdb-2')).status).toBe(200);
      await cluster.stopServer(2, 'SIGTERM');
      await cluster.restartServer(2);
      const res = await request(balance.app).post('/v1/hooks/poststart?pod=rethinkdb-2');
      const op = await waitForOperation(balance.app, res.body.operation.href, { tries: 40000 });
      expect(op).toMatchObject({ status: 'succeeded', report: { decision: { kind: 'returning' } } });
      const after = await eventually(() => settled(cluster), { what: 'the returned server to be ready' });
      const moved = ['ycsb.usertable', 'ycsb.accounts'].flatMap((name) => primariesOf(after, name)
        .map((p, i) => (p !== primariesOf(before, name)[i] ? { name, to: p } : null)).filter(Boolean));
      // On failure, the layout before and the operation's report say why.
      if (moved.length !== 1 || moved[0].name !== idle) {
        const layout = ['ycsb.usertable', 'ycsb.accounts'].map((name) => `${name}: ${before.config[name].shards.map((sh) => `${sh.primary_replica}/${sh.replicas.join(',')}`).join(' ')}`);
        throw new Error(`moved ${JSON.stringify(moved)}, expected one shard of ${idle}; before: ${layout.join('; ')}; report: ${JSON.stringify(op.report).slice(0, 3000)}`);
      }
      expect(moved).toEqual([{ name: idle, to: 'rethinkdb_2' }]);
    } finally {
      reading = false;
      await reader;
      await balance.close();
    }
  });
});
