import { findServer, findTable } from '../../src/cluster/cluster-model.js';
import {
  planFinalizeReplica, planMigrateReplicasOff, planStageReplica, planUnstageReplica,
} from '../../src/planner/replica-planner.js';
import { applyChanges, fixtureCluster } from '../helpers/clusters.js';

const healthy = fixtureCluster('01-healthy.json');
const id = (name) => findServer(healthy, name).id;
const usertable = findTable(healthy, 'ycsb.usertable').id;
// usertable shard 0 is on rethinkdb_3 (primary), rethinkdb_0 and rethinkdb_2.
const move = { tableId: usertable, shard: 0, from: id('rethinkdb_0'), to: id('rethinkdb_1') };
const withReady = (cluster, serverId) => ({
  ...cluster,
  tables: cluster.tables.map((t) => (t.id !== usertable ? t : {
    ...t, shards: t.shards.map((s, i) => (i === 0 ? { ...s, states: { ...s.states, [serverId]: 'ready' } } : s)),
  })),
});

describe('planStageReplica and planFinalizeReplica', () => {
  test('when a move is staged, then only the target joins, as nonvoting; staging again plans nothing', () => {
    const staged = planStageReplica(healthy, move);
    expect(staged.changes[0].shards[0]).toEqual({
      primary: id('rethinkdb_3'), replicas: [id('rethinkdb_3'), id('rethinkdb_0'), id('rethinkdb_2'), id('rethinkdb_1')], nonvoting: [id('rethinkdb_1')],
    });
    expect(planStageReplica(applyChanges(healthy, staged.changes), move)).toEqual({ changes: [], skipped: [] });
  });

  test('when the target started draining while it backfilled, then it is not finalized: it gets no vote and the source stays', () => {
    const ready = withReady(applyChanges(healthy, planStageReplica(healthy, move).changes), move.to);
    expect(planFinalizeReplica(ready, move, { draining: [move.to] })).toEqual({
      changes: [], skipped: [{ tableId: usertable, shard: 0, reason: 'rethinkdb_1 started draining while it backfilled; rethinkdb_0 keeps its replica' }],
    });
  });

  test('when another move put the target in as a voter since this one was planned, then staging refuses: finishing it would drop a replica', () => {
    const other = { ...move, from: id('rethinkdb_2') };
    const done = withReady(applyChanges(healthy, planStageReplica(healthy, other).changes), other.to);
    const afterOther = applyChanges(done, planFinalizeReplica(done, other).changes);
    expect(planStageReplica(afterOther, move)).toEqual({
      changes: [], skipped: [{ tableId: usertable, shard: 0, reason: expect.stringMatching(/^rethinkdb_1 already holds a voting replica of this shard .*rethinkdb_0 keeps its replica$/) }],
    });
  });

  test('when the target became draining before staging, then the move is skipped with that reason', () => {
    expect(planStageReplica(healthy, move, { draining: [move.to] })).toEqual({
      changes: [], skipped: [{ tableId: usertable, shard: 0, reason: 'rethinkdb_1 is draining now' }],
    });
  });

  test('when the staged replica is not ready, then finalizing waits; once ready, it votes and the source leaves', () => {
    const staged = applyChanges(healthy, planStageReplica(healthy, move).changes);
    expect(planFinalizeReplica(staged, move).skipped).toEqual([{ tableId: usertable, shard: 0, reason: 'rethinkdb_1 is not ready yet' }]);
    const ready = withReady(staged, move.to);
    const finalized = planFinalizeReplica(ready, move);
    expect(finalized.changes[0].shards[0]).toEqual({
      primary: id('rethinkdb_3'), replicas: [id('rethinkdb_3'), id('rethinkdb_2'), id('rethinkdb_1')], nonvoting: [],
    });
    expect(planFinalizeReplica(applyChanges(ready, finalized.changes), move)).toEqual({ changes: [], skipped: [] });
  });

  test('when the source replica was nonvoting, then the new one stays nonvoting', () => {
    const cluster = applyChanges(healthy, [{
      tableId: usertable,
      shards: findTable(healthy, usertable).shards.map((s, i) => (i === 0 ? { ...s, nonvoting: [id('rethinkdb_0')] } : s)),
    }]);
    const staged = withReady(applyChanges(cluster, planStageReplica(cluster, move).changes), move.to);
    expect(planFinalizeReplica(staged, move).changes[0].shards[0].nonvoting).toEqual([id('rethinkdb_1')]);
  });
});

describe('planUnstageReplica (a move whose finalize was refused)', () => {
  test('when the target is staged, then only its nonvoting replica leaves: voters and primary are as before the move', () => {
    const staged = applyChanges(healthy, planStageReplica(healthy, move).changes);
    const undone = planUnstageReplica(staged, move);
    expect(undone.changes[0].shards[0]).toEqual({
      primary: id('rethinkdb_3'), replicas: [id('rethinkdb_3'), id('rethinkdb_0'), id('rethinkdb_2')], nonvoting: [],
    });
    expect(undone.changes[0].shards.slice(1)).toEqual(findTable(healthy, usertable).shards.slice(1).map((s) => ({ primary: s.primary, replicas: s.replicas, nonvoting: s.nonvoting })));
    expect(planUnstageReplica(applyChanges(staged, undone.changes), move)).toEqual({ changes: [], skipped: [] });
  });

  test('when the target votes already (the finalize landed after all), then nothing is taken out', () => {
    const ready = withReady(applyChanges(healthy, planStageReplica(healthy, move).changes), move.to);
    const finalized = applyChanges(ready, planFinalizeReplica(ready, move).changes);
    expect(planUnstageReplica(finalized, move)).toEqual({ changes: [], skipped: [] });
  });

  test('when another nonvoting replica is in the shard, then it stays: only the target leaves', () => {
    const cluster = applyChanges(healthy, [{
      tableId: usertable,
      shards: findTable(healthy, usertable).shards.map((s, i) => (i === 0 ? { ...s, nonvoting: [id('rethinkdb_0')] } : s)),
    }]);
    const staged = applyChanges(cluster, planStageReplica(cluster, move).changes);
    expect(planUnstageReplica(staged, move).changes[0].shards[0]).toMatchObject({ replicas: [id('rethinkdb_3'), id('rethinkdb_0'), id('rethinkdb_2')], nonvoting: [id('rethinkdb_0')] });
  });
});

describe('planMigrateReplicasOff after a manager stopped mid-move', () => {
  test('when a move off rethinkdb_0 was staged (rethinkdb_1 nonvoting) and never finalized, then migrating off rethinkdb_0 finishes that move instead of skipping the shard for want of a free server', () => {
    const staged = applyChanges(healthy, planStageReplica(healthy, move).changes);
    const plan = planMigrateReplicasOff(staged, id('rethinkdb_0'));
    expect(plan.moves).toContainEqual({ tableId: usertable, shard: 0, from: id('rethinkdb_0'), to: id('rethinkdb_1') });
    expect(plan.skipped).toEqual([]);
  });
});
