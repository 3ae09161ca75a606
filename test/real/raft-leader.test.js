// A PERFWARNING for the server that leads a table's Raft group, on real RethinkDB 2.4 servers: with
// PERFWARNING_MOVE_RAFT_LEADER (the default) another server leads once the warning is answered and the warned server
// votes again; without it the leadership stays. Also: a vote the manager still owes (its journal on the mark) is
// given back on the next tick. Outcomes are read through the driver.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import { pinRaftLeader, raftLeaderOn } from '../lab/raft-leader.js';
import { createRealManager, readTables, startRealCluster, waitConnected } from '../helpers/real-cluster.js';

jest.setTimeout(180000);

// Two shards on rethinkdb_0..3, rethinkdb_1 a voting replica of both and the primary of neither.
const SHARDS = [
  { primary_replica: 'rethinkdb_0', replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'], nonvoting_replicas: [] },
  { primary_replica: 'rethinkdb_3', replicas: ['rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'], nonvoting_replicas: [] },
];

let cluster;
const managers = [];
beforeAll(async () => {
  cluster = await startRealCluster({ tables: [{ db: 'ycsb', table: 'usertable', shards: 2, replicas: 3, docs: 500 }] });
  await cluster.withConnection(async (c) => {
    await r.db('ycsb').table('usertable').config().update({ shards: SHARDS }).run(c);
    await r.db('ycsb').table('usertable').wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
  });
}, 120000);

afterAll(async () => {
  for (const m of managers) await m.close();
  await cluster?.destroy();
});

async function manager(env = {}) {
  const m = createRealManager(cluster, { via: 0, env: { MONITOR_ENABLED: 'false', ACTION_DEADLINE_SECONDS: '30', ...env } });
  managers.push(m);
  await waitConnected(m);
  return m;
}

const leader = () => cluster.withConnection((c) => raftLeaderOn(c, 'ycsb', 'usertable'));
const config = async () => (await readTables(cluster)).config['ycsb.usertable'];
const warn = (m) => request(m.app).post('/v1/hooks/perfwarning').set('content-type', 'application/json').send(JSON.stringify({ pod: 'rethinkdb-1' }));

describe('a hot-spot on the server that leads the table\'s Raft group', () => {
  test('when PERFWARNING_MOVE_RAFT_LEADER is false, then the primaries move off and the leadership stays on the warned server', async () => {
    expect(await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: 'rethinkdb_1', shards: SHARDS })).toMatchObject({ raftLeader: 'rethinkdb_1' });
    const m = await manager({ PERFWARNING_MOVE_RAFT_LEADER: 'false' });
    const res = await warn(m);
    expect(res.status).toBe(200);
    expect(res.body.pods[0]).toMatchObject({ server: 'rethinkdb_1', raftLeadership: null });
    expect(res.body.decision.actions).not.toContain('move-raft-leadership');
    expect(await leader()).toBe('rethinkdb_1');
    expect((await request(m.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1')).status).toBe(200);
  });

  test('when the server that leads is warned, then once PERFWARNING answers another server leads and the warned one votes again in every shard', async () => {
    await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: 'rethinkdb_1', shards: SHARDS });
    expect(await leader()).toBe('rethinkdb_1');
    const m = await manager();
    const res = await warn(m);
    expect(res.status).toBe(200);
    const report = res.body.pods[0].raftLeadership;
    expect(report).toMatchObject({ action: 'move-raft-leadership', outcome: 'completed', notDone: [] });
    expect(report.changes).toEqual([expect.objectContaining({ table: 'ycsb.usertable', from: 'rethinkdb_1', moved: true, nonvotingFor: [0, 1] })]);
    expect(report.votesRestored).toEqual([{ table: 'ycsb.usertable', shards: [0, 1] }]);
    const now = await leader();
    expect(now).not.toBe('rethinkdb_1');
    expect(now).toBe(report.changes[0].to);
    const after = await config();
    expect(after.shards.map((s) => s.nonvoting_replicas)).toEqual([[], []]);
    expect(after.shards.map((s) => s.primary_replica)).not.toContain('rethinkdb_1');
    expect(await m.marks.votingRestores()).toEqual([]);
    const { events } = (await request(m.app).get('/v1/events')).body;
    expect(events.filter((e) => e.action === 'move-raft-leadership').map((e) => e.outcome)).toEqual(['completed']);
    expect((await request(m.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1')).status).toBe(200);
  });

  test('when the manager owes a vote (journaled on the mark, the server nonvoting in a shard, as a move cut short leaves it), then the next tick gives it back', async () => {
    const m = await manager();
    const view = (await request(m.app).get('/v1/cluster')).body;
    const server = view.servers.find((s) => s.name === 'rethinkdb_1');
    const table = view.tables.find((t) => t.table === 'ycsb.usertable');
    const flipped = SHARDS.map((s, i) => (i === 0 ? { ...s, nonvoting_replicas: ['rethinkdb_1'] } : s));
    await cluster.withConnection((c) => r.db('ycsb').table('usertable').config().update({ shards: flipped }).run(c));
    await m.marks.setVotingRestore(server.id, { tables: [{ tableId: table.id, shards: [0] }], since: new Date().toISOString(), reason: 'test' }, { serverName: 'rethinkdb_1' });
    const tick = await m.tick({ poll: false });
    expect(tick.votes).toEqual([{ server: 'rethinkdb_1', restored: [{ table: 'ycsb.usertable', shards: [0] }], notDone: [] }]);
    expect((await config()).shards.map((s) => s.nonvoting_replicas)).toEqual([[], []]);
    expect(await m.marks.votingRestores()).toEqual([]);
  });
});

describe('a PRESTOP of the server that leads the table\'s Raft group', () => {
  // Last in the file: rethinkdb_1 stays draining (its pod would stop now).
  test('when PRESTOP_MOVE_RAFT_LEADER is on (the default), then once PRESTOP answers another server leads, and the stopping server holds no primary, votes again and stays draining', async () => {
    const withPrimary = SHARDS.map((s, i) => (i === 1 ? { ...s, primary_replica: 'rethinkdb_1' } : s));
    expect(await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: 'rethinkdb_1', shards: withPrimary })).toMatchObject({ raftLeader: 'rethinkdb_1' });
    const m = await manager();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ primariesOff: true, outcome: 'completed' });
    expect(res.body.raftLeadership).toMatchObject({ outcome: 'completed', notDone: [], votesRestored: [{ table: 'ycsb.usertable', shards: [0, 1] }] });
    const now = await leader();
    expect(now).not.toBe('rethinkdb_1');
    expect(now).toBe(res.body.raftLeadership.changes[0].to);
    const after = await config();
    expect(after.shards.map((s) => s.primary_replica)).not.toContain('rethinkdb_1');
    expect(after.shards.map((s) => s.nonvoting_replicas)).toEqual([[], []]);
    const view = (await request(m.app).get('/v1/cluster')).body;
    expect(await m.marks.getDraining(view.servers.find((s) => s.name === 'rethinkdb_1').id)).toMatchObject({ origin: { kind: 'prestop' } });
  });
});
