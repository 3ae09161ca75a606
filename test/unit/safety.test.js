// The last line of defence: transitions checkTransition must refuse, one rule per row, and the reconfigurer
// refusing to write a plan that proposes one ("not written", with the reason), whatever the planner says.

import { createReconfigurer } from '../../src/actions/reconfigurer.js';
import { createDeadline, createVirtualClock } from '../../src/lib/clock.js';
import { createKeyedMutex } from '../../src/lib/keyed-mutex.js';
import { createLogger } from '../../src/logger.js';
import { checkTransition } from '../../src/planner/safety.js';
import { createStateStore } from '../../src/state/state-store.js';
import { createLogSink } from '../helpers/harness.js';

// Five servers a..e; one table whose shard 0 is on a, b, c with a primary, all ready unless a row says otherwise.
function clusterWith({ disconnected = [], states = {}, replicas = ['a', 'b', 'c'], nonvoting = [] } = {}) {
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const connected = (id) => !disconnected.includes(id);
  const shardStates = Object.fromEntries(replicas.map((id) => [id, connected(id) ? 'ready' : 'disconnected']));
  return {
    servers: ids.map((id) => ({ id, name: `server_${id}`, connected: connected(id), tags: [], hostname: `server-${id}`, canonicalAddresses: [] })),
    backfills: [],
    tables: [{
      id: 't1', db: 'db', name: 'users', readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: null,
      shards: [{ index: 0, primary: 'a', replicas, nonvoting, acting: connected('a') ? ['a'] : [], states: { ...shardStates, ...states } }],
    }],
  };
}

const shard = (primary, replicas, nonvoting = []) => ({ primary, replicas, nonvoting });

// [what is wrong, the cluster before, the proposed shards, draining, the violation that must be reported]
const UNSAFE = [
  ['the shard count changes', {}, [shard('a', ['a', 'b', 'c']), shard('b', ['a', 'b', 'c'])], [], /shard count changed from 1 to 2/],
  ['a shard has no replicas', {}, [shard('a', [])], [], /no replicas/],
  ['a server is listed twice', {}, [shard('a', ['a', 'b', 'b'])], [], /a server is listed twice/],
  ['the primary is not in the replicas', {}, [shard('d', ['a', 'b', 'c'])], [], /primary is not a replica/],
  ['the primary is nonvoting', {}, [shard('c', ['a', 'b', 'c'], ['c'])], [], /primary is nonvoting/],
  ['a nonvoting server is not a replica', {}, [shard('a', ['a', 'b', 'c'], ['d'])], [], /nonvoting server not in replicas/],
  ['no replica votes', {}, [shard('a', ['a'], ['a'])], [], /no voting replicas/],
  ['the new primary is disconnected', { disconnected: ['b'] }, [shard('b', ['a', 'b', 'c'])], [], /server_b cannot become primary \(disconnected\)/],
  ['the new primary is disconnected though its last table status said ready', { disconnected: ['b'], states: { b: 'ready' } }, [shard('b', ['a', 'b', 'c'])], [], /server_b cannot become primary \(disconnected\)/],
  ['the new primary is still backfilling (lagging)', { states: { b: 'backfilling' } }, [shard('b', ['a', 'b', 'c'])], [], /server_b cannot become primary \(backfilling\)/],
  ['the new primary is not ready yet', { states: { b: 'transitioning' } }, [shard('b', ['a', 'b', 'c'])], [], /server_b cannot become primary \(transitioning\)/],
  ['the new primary is draining', {}, [shard('b', ['a', 'b', 'c'])], ['b'], /server_b cannot become primary \(draining\)/],
  ['the new primary is a server under a perf warning (in the draining list)', {}, [shard('c', ['a', 'b', 'c'])], ['c'], /server_c cannot become primary \(draining\)/],
  ['a live voter is removed while another is down', { disconnected: ['c'] }, [shard('a', ['a', 'c'])], [], /without a live voting majority/],
  ['voters that are not ready are added while one is down', { disconnected: ['c'] }, [shard('a', ['a', 'b', 'c', 'd', 'e'])], [], /without a live voting majority/],
  ['a live voter is made nonvoting while another is down', { disconnected: ['c'] }, [shard('a', ['a', 'b', 'c'], ['b'])], [], /without a live voting majority/],
  // Two migrations planned on each other's half-done config: a staged replica finalized by one, then the other's
  // finalize took its own server off, leaving 2 replicas of 3.
  ['a voting replica is removed and none replaces it', { replicas: ['a', 'b', 'c', 'd'], nonvoting: [] }, [shard('a', ['a', 'b', 'd'])], [], /lower the shard's voting replicas from 4 to 3/],
  ['a finalize removes a voter whose replacement votes already', {}, [shard('a', ['a', 'b'])], [], /lower the shard's voting replicas from 3 to 2/],
  ['a voter is made nonvoting by a change that does not mean to', {}, [shard('a', ['a', 'b', 'c'], ['c'])], [], /lower the shard's voting replicas from 3 to 2/],
];

describe('checkTransition', () => {
  test.each(UNSAFE)('when %s, then the transition is refused and says why', (_, before, shards, draining, violation) => {
    const cluster = clusterWith(before);
    const violations = checkTransition(cluster, cluster.tables[0], shards, { draining });
    expect(violations).toEqual(expect.arrayContaining([expect.stringMatching(violation)]));
  });

  // A Raft leadership move's flip whose vote is still owed (its give-back failed, or the manager restarted) looks like a
  // staged replica; it counts as a voter, so that no move takes it for one.
  test.each([
    ['a move finalizes onto the owed server and removes a voter', [shard('a', ['a', 'c'])], ['c'], /lower the shard's voting replicas from 3 to 2/],
    ['a move off the owed server keeps its target nonvoting', [shard('a', ['a', 'b', 'd'], ['d'])], ['c'], /lower the shard's voting replicas from 3 to 2/],
  ])('when %s, then it is refused: the owed vote counts', (_, shards, owed, violation) => {
    const cluster = clusterWith({ replicas: ['a', 'b', 'c'], nonvoting: ['c'] });
    expect(checkTransition(cluster, cluster.tables[0], shards, { owedVoters: () => owed })).toEqual(expect.arrayContaining([expect.stringMatching(violation)]));
    expect(checkTransition(cluster, cluster.tables[0], [shard('a', ['a', 'b', 'c'])], { owedVoters: () => owed })).toEqual([]);
  });

  test.each([
    ['the primary moves to a ready, connected, voting replica', {}, [shard('b', ['a', 'b', 'c'])], []],
    ['the primary stays while another server drains', {}, [shard('a', ['a', 'b', 'c'])], ['b']],
    ['a replica is added as nonvoting while one is down', { disconnected: ['c'] }, [shard('a', ['a', 'b', 'c', 'd'], ['d'])], []],
    ['a staged replica votes and the one it replaces leaves (a finalize)', { replicas: ['a', 'b', 'c', 'd'], nonvoting: ['d'] }, [shard('a', ['a', 'b', 'd'])], []],
    ['the primary moves off a disconnected server to a live one', { disconnected: ['a'] }, [shard('b', ['a', 'b', 'c'])], []],
  ])('when %s, then the transition is accepted', (_, before, shards, draining) => {
    const cluster = clusterWith(before);
    expect(checkTransition(cluster, cluster.tables[0], shards, { draining })).toEqual([]);
  });
});

describe('the reconfigurer refuses an unsafe plan', () => {
  function setup(cluster) {
    const clock = createVirtualClock();
    const logger = createLogger({ level: 'info', destination: createLogSink().stream });
    const writes = [];
    const store = {
      readCluster: async () => cluster,
      writeTableShards: async (tableId, shards) => { writes.push({ tableId, shards }); },
    };
    const marks = createStateStore({ clock, logger });
    const reconfigurer = createReconfigurer({ store, locks: createKeyedMutex(), marks, clock, logger, waitPollIntervalMs: 100 });
    const commit = (shards) => reconfigurer.commit(
      () => ({ changes: [{ tableId: 't1', shards, moves: [] }], skipped: [] }),
      { tableIds: ['t1'], deadline: createDeadline(clock, 10_000) },
    );
    return { writes, marks, commit };
  }

  test('when the plan puts the primary on a disconnected server, then nothing is written and notDone says it was unsafe and why', async () => {
    const { writes, commit } = setup(clusterWith({ disconnected: ['b'] }));
    const result = await commit([shard('b', ['a', 'b', 'c'])]);
    expect(result.written).toEqual([]);
    expect(result.notDone).toEqual([{ tableId: 't1', reason: expect.stringMatching(/^unsafe, not written: .*server_b cannot become primary \(disconnected\)/) }]);
    expect(writes).toEqual([]);
  });

  test('when the plan puts the primary on a server under a perf warning, then it is not written: the warning counts as draining', async () => {
    const { writes, marks, commit } = setup(clusterWith());
    await marks.setPerfWarning('c', { source: 'operator', long: false }, { serverName: 'server_c' });
    const result = await commit([shard('c', ['a', 'b', 'c'])]);
    expect(result.notDone).toEqual([{ tableId: 't1', reason: expect.stringMatching(/server_c cannot become primary \(draining\)/) }]);
    expect(writes).toEqual([]);
  });

  test('when the plan is safe, then it is written (the refusals above are the check, not a write that never happens)', async () => {
    const { writes, commit } = setup(clusterWith());
    const result = await commit([shard('b', ['a', 'b', 'c'])]);
    expect(result.notDone).toEqual([]);
    expect(writes).toEqual([{ tableId: 't1', shards: [shard('b', ['a', 'b', 'c'])] }]);
  });
});
