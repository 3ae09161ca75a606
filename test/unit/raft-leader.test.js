// The pure plan that moves a table's Raft leadership off a server (nonvoting in every shard it votes in, the
// whole table or nothing) and the plan that gives its vote back; with a property test that the move never
// leaves a shard without a live voting majority.

import fc from 'fast-check';
import { createRaftLeadership } from '../../src/actions/raft-leadership.js';
import { createReconfigurer } from '../../src/actions/reconfigurer.js';
import { createDeadline, createVirtualClock } from '../../src/lib/clock.js';
import { createKeyedMutex } from '../../src/lib/keyed-mutex.js';
import { createLogger } from '../../src/logger.js';
import { createStateStore } from '../../src/state/state-store.js';
import { createView, hasLiveMajority } from '../../src/planner/eligibility.js';
import {
  planRaftLeadershipMove, planVotingRestore, raftRoundMayStart, raftRoundMs, tablesLedBy, votesBack,
} from '../../src/planner/raft-leader.js';
import { checkTransition } from '../../src/planner/safety.js';
import { applyChanges, clusterArbitrary } from '../helpers/clusters.js';

// Servers a..d; table t1 has two shards on a, b, c with primaries b and c, and `a` (starved, demoted) leads its
// Raft group. Rows override what they test.
function cluster({ leader = 'a', disconnected = [], states = {}, shards = null, acting = {} } = {}) {
  const ids = ['a', 'b', 'c', 'd'];
  const connected = (id) => !disconnected.includes(id);
  const shard = (index, primary, replicas, nonvoting = []) => ({
    index, primary, replicas, nonvoting, acting: acting[index] ?? (connected(primary) ? [primary] : []),
    states: { ...Object.fromEntries(replicas.map((id) => [id, connected(id) ? 'ready' : 'disconnected'])), ...(states[index] ?? {}) },
  });
  return {
    servers: ids.map((id) => ({ id, name: `server_${id}`, connected: connected(id), tags: [], hostname: `server-${id}`, canonicalAddresses: [] })),
    backfills: [],
    tables: [{
      id: 't1', db: 'db', name: 'users', readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: leader,
      shards: (shards ?? [[0, 'b', ['a', 'b', 'c']], [1, 'c', ['a', 'b', 'c']]]).map((args) => shard(...args)),
    }],
  };
}

describe('planRaftLeadershipMove', () => {
  test('when the server leads a table and votes in its shards, then it becomes nonvoting in every one of them', () => {
    const plan = planRaftLeadershipMove(cluster(), 'a');
    expect(plan.skipped).toEqual([]);
    expect(plan.changes).toHaveLength(1);
    expect(plan.changes[0].flipped).toEqual([0, 1]);
    expect(plan.changes[0].shards.map((s) => s.nonvoting)).toEqual([['a'], ['a']]);
    expect(plan.changes[0].shards.map((s) => s.primary)).toEqual(['b', 'c']);
  });

  test('when a shard does not have the server, then only the shards it votes in change', () => {
    const plan = planRaftLeadershipMove(cluster({ shards: [[0, 'b', ['a', 'b', 'c']], [1, 'c', ['b', 'c', 'd']]] }), 'a');
    expect(plan.changes[0].flipped).toEqual([0]);
    expect(plan.changes[0].shards[1].nonvoting).toEqual([]);
  });

  test('when another server leads, then nothing is planned for that table', () => {
    expect(planRaftLeadershipMove(cluster({ leader: 'b' }), 'a')).toEqual({ changes: [], skipped: [] });
  });

  test('when a table is not among tableIds, then it is left alone', () => {
    expect(planRaftLeadershipMove(cluster(), 'a', { tableIds: ['t2'] })).toEqual({ changes: [], skipped: [] });
  });

  // [why the table is skipped, cluster options, the reason reported]
  test.each([
    ['the server is still a configured primary', { shards: [[0, 'a', ['a', 'b', 'c']], [1, 'c', ['a', 'b', 'c']]] }, /server_a is still the primary of shard 0/],
    ['another voter of a shard is disconnected', { disconnected: ['c'], shards: [[0, 'b', ['a', 'b', 'c']]] }, /shard 0 would be left without a live voting majority/],
    ['another voter of a shard is backfilling', { states: { 1: { b: 'backfilling' } } }, /shard 1 is settling/],
    ['the server still acts as a primary', { shards: [[0, 'b', ['a', 'b', 'c']]], acting: { 0: ['a'] } }, /server_a is still the primary of shard 0/],
    ['the server already votes nowhere', { shards: [[0, 'b', ['a', 'b', 'c'], ['a']]] }, /votes in no shard/],
  ])('when %s, then the table is skipped with the reason', (_, options, reason) => {
    const plan = planRaftLeadershipMove(cluster(options), 'a');
    expect(plan.changes).toEqual([]);
    expect(plan.skipped).toEqual([expect.objectContaining({ tableId: 't1', reason: expect.stringMatching(reason) })]);
  });

  test.each([
    ['a shard is settling', { states: { 1: { b: 'backfilling' } } }, true],
    ['it still acts for a shard it is no longer the configured primary of', { shards: [[0, 'b', ['a', 'b', 'c']]], acting: { 0: ['a'] } }, true],
    ['it is still the configured primary', { shards: [[0, 'a', ['a', 'b', 'c']]] }, false],
    ['another voter is disconnected', { disconnected: ['c'], shards: [[0, 'b', ['a', 'b', 'c']]] }, false],
  ])('when %s, then the skip says whether it may be possible in a moment (settling: %p)', (_, options, settling) => {
    expect(Boolean(planRaftLeadershipMove(cluster(options), 'a').skipped[0].settling)).toBe(settling);
  });

  test('when another voter is draining (about to leave), then it does not count toward the majority left', () => {
    const plan = planRaftLeadershipMove(cluster({ shards: [[0, 'b', ['a', 'b', 'c']]] }), 'a', { draining: ['c'] });
    expect(plan.skipped).toEqual([{ tableId: 't1', reason: expect.stringMatching(/shard 0 would be left without a live voting majority/) }]);
  });

  test('property: a planned move keeps every shard\'s live voting majority, passes the safety check, and giving the vote back restores the config', () => {
    let planned = 0;
    // A fixed seed: the count at the end (that the property saw enough planned moves) is the same every run. Unseeded,
    // a full test run once saw 19, a failure for want of cases rather than for a wrong plan.
    fc.assert(fc.property(clusterArbitrary, fc.nat(), (c, pick) => {
      // A server demoted already (primary nowhere), as after the PERFWARNING's demotion.
      const demoted = c.servers.filter((s) => c.tables.every((t) => t.shards.every((sh) => sh.primary !== s.id && !sh.acting.includes(s.id))));
      fc.pre(demoted.length > 0);
      const serverId = demoted[pick % demoted.length].id;
      const led = { ...c, tables: c.tables.map((t) => ({ ...t, raftLeader: serverId })) };
      const view = createView(led);
      for (const change of planRaftLeadershipMove(led, serverId).changes) {
        planned += 1;
        const table = led.tables.find((t) => t.id === change.tableId);
        // It passes as the reconfigurer checks it, as a change that means to lower the voters; from anything else it would not.
        expect(change.lowersVoters).toBe(true);
        expect(checkTransition(led, table, change.shards, { mayLowerVoters: change.lowersVoters })).toEqual([]);
        expect(checkTransition(led, table, change.shards).some((v) => /lower the shard's voting replicas/.test(v))).toBe(true);
        change.shards.forEach((s, i) => {
          if (hasLiveMajority(view, table.shards[i])) expect(hasLiveMajority(view, { ...s, states: table.shards[i].states })).toBe(true);
          expect(s.primary).not.toBe(serverId);
        });
        const flipped = applyChanges(led, [change]);
        const back = planVotingRestore(flipped, serverId, [{ tableId: change.tableId, shards: change.flipped }]);
        expect(back.changes.map((b) => b.shards.map((s) => s.nonvoting))).toEqual([table.shards.map((s) => s.nonvoting)]);
      }
    }), { numRuns: 500, seed: 20261123 });
    expect(planned).toBeGreaterThan(20);
  });
});

describe('planVotingRestore', () => {
  test('when the server is still nonvoting in the shards the move flipped, then it votes there again', () => {
    const c = cluster({ leader: 'b', shards: [[0, 'b', ['a', 'b', 'c'], ['a']], [1, 'c', ['a', 'b', 'c'], ['a']]] });
    const plan = planVotingRestore(c, 'a', [{ tableId: 't1', shards: [0, 1] }]);
    expect(plan.changes).toHaveLength(1);
    expect(plan.changes[0].restored).toEqual([0, 1]);
    expect(plan.changes[0].shards.map((s) => s.nonvoting)).toEqual([[], []]);
  });

  test('when a shard was not flipped by the move, then its nonvoting replica stays nonvoting', () => {
    const c = cluster({ leader: 'b', shards: [[0, 'b', ['a', 'b', 'c'], ['a']], [1, 'c', ['a', 'b', 'c'], ['a']]] });
    const plan = planVotingRestore(c, 'a', [{ tableId: 't1', shards: [0] }]);
    expect(plan.changes[0].shards.map((s) => s.nonvoting)).toEqual([[], ['a']]);
  });

  test('when the table is gone, the server left the shard, or it votes already, then nothing is planned', () => {
    const c = cluster({ leader: 'b', shards: [[0, 'b', ['b', 'c', 'd']], [1, 'c', ['a', 'b', 'c']]] });
    expect(planVotingRestore(c, 'a', [{ tableId: 't1', shards: [0, 1] }, { tableId: 'gone', shards: [0] }])).toEqual({ changes: [] });
  });
});

describe('votesBack', () => {
  test('when the read shows the server voting in some owed shards, nonvoting in one and gone from another, then only the voting ones are back', () => {
    const c = cluster({ leader: 'b', shards: [[0, 'b', ['a', 'b', 'c']], [1, 'c', ['a', 'b', 'c'], ['a']], [2, 'c', ['b', 'c', 'd']]] });
    expect(votesBack(c, 'a', [{ tableId: 't1', shards: [0, 1, 2] }, { tableId: 'gone', shards: [0] }])).toEqual([{ tableId: 't1', shards: [0] }]);
  });
});

describe('planRaftLeadershipMove with the votes journaled as owed', () => {
  test('when owed names a table and its shards, then only that table is planned, and only if it flips no other shard', () => {
    const c = cluster();
    expect(planRaftLeadershipMove(c, 'a', { owed: [{ tableId: 't1', shards: [0, 1] }] }).changes.map((ch) => ch.flipped)).toEqual([[0, 1]]);
    expect(planRaftLeadershipMove(c, 'a', { owed: [] })).toEqual({ changes: [], skipped: [] });
    expect(planRaftLeadershipMove(c, 'a', { owed: [{ tableId: 't1', shards: [0] }] })).toEqual({
      changes: [], skipped: [{ tableId: 't1', reason: 'its shards changed since the vote owed was journaled' }],
    });
  });
});

// The action's round, on an in-memory store whose second read shows table B catching up for a moment: B is skipped
// (settling) when the votes owed are journaled, and must not be flipped by the write's own plan a read later.
describe('the Raft leadership move flips only what it journaled', () => {
  test('when a table is settling on the journal\'s read and fine on the write\'s read, then it is not flipped (no vote left unowed)', async () => {
    const clock = createVirtualClock();
    const logger = createLogger({ level: 'silent' });
    const shard = (index, primary) => ({ index, primary, replicas: ['a', 'b', 'c'], nonvoting: [], acting: [primary], states: { a: 'ready', b: 'ready', c: 'ready' } });
    const table = (id) => ({ id, db: 'db', name: id, readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: 'a', shards: [shard(0, 'b')] });
    const state = {
      servers: ['a', 'b', 'c'].map((id) => ({ id, name: `s_${id}`, connected: true, tags: [], hostname: id, canonicalAddresses: [] })),
      backfills: [], tables: [table('A'), table('B')],
    };
    let reads = 0;
    const store = {
      async readCluster() {
        reads += 1;
        const snap = structuredClone(state);
        if (reads === 2) snap.tables[1].shards[0].states.c = 'backfilling';
        return snap;
      },
      async writeTableShards(id, shards) {
        const t = state.tables.find((x) => x.id === id);
        const wasVoter = t.shards.some((s) => s.replicas.includes('a') && !s.nonvoting.includes('a'));
        t.shards = shards.map((s) => ({ ...s }));
        if (!wasVoter) t.raftLeader = 'b';
      },
    };
    const marks = createStateStore({ clock, logger });
    const reconfigurer = createReconfigurer({ store, locks: createKeyedMutex(), marks, clock, logger, waitPollIntervalMs: 100 });
    const config = {
      deadlines: { actionSeconds: 30 }, raftLeader: { waitSeconds: 10, settleMs: 1000 }, waitPollIntervalMs: 100, retry: { minMs: 500, maxMs: 30000 }, podServerOverrides: {},
    };
    const move = createRaftLeadership({ store, reconfigurer, marks, clock, logger, config, audit: { record() {} } });
    const report = await move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null });
    expect(report.changes.map((c) => c.table)).toEqual(['db.A']);
    expect(report.notDone).toContainEqual(expect.objectContaining({ table: 'db.B', reason: expect.stringMatching(/settling/) }));
    expect(state.tables.map((t) => t.shards.map((s) => s.nonvoting))).toEqual([[[]], [[]]]);
    expect(await marks.votingRestores()).toEqual([]);
  });
  // An action on a store whose reads take readMs of the virtual clock and whose first table A is led by `a`.
  function moveOn({ readMs = 0, leader = 'a' } = {}) {
    const clock = createVirtualClock();
    const logger = createLogger({ level: 'silent' });
    const shard = { index: 0, primary: 'b', replicas: ['a', 'b', 'c'], nonvoting: [], acting: ['b'], states: { a: 'ready', b: 'ready', c: 'ready' } };
    const state = {
      servers: ['a', 'b', 'c'].map((id) => ({ id, name: `s_${id}`, connected: true, tags: [], hostname: id, canonicalAddresses: [] })),
      backfills: [], tables: [{ id: 'A', db: 'db', name: 'A', readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: leader, shards: [shard] }],
    };
    const calls = { reads: 0, writes: 0 };
    const store = {
      async readCluster() { calls.reads += 1; await clock.sleep(readMs); return structuredClone(state); },
      async writeTableShards() { calls.writes += 1; },
    };
    const marks = createStateStore({ clock, logger });
    const reconfigurer = createReconfigurer({ store, locks: createKeyedMutex(), marks, clock, logger, waitPollIntervalMs: 100 });
    const config = {
      deadlines: { actionSeconds: 30 }, raftLeader: { waitSeconds: 10, settleMs: 300 }, waitPollIntervalMs: 100, retry: { minMs: 500, maxMs: 30000 }, podServerOverrides: {},
    };
    const move = createRaftLeadership({ store, reconfigurer, marks, clock, logger, config, audit: { record() {} } });
    return { move, calls, state, clock };
  }

  test('when the cluster the caller decided on shows every table led by another server, then nothing is read and nothing is to do', async () => {
    const { move, calls, state } = moveOn({ leader: 'b' });
    const report = await move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null, decided: structuredClone(state) });
    expect(report).toMatchObject({ outcome: 'nothing_to_do', target: { server: 's_a' }, changes: [], notDone: [] });
    expect(calls.reads).toBe(0);
  });

  test('when a table\'s leader was unknown on the decided cluster (an election under way), then the action reads and plans as usual', async () => {
    const { move, calls, state } = moveOn({ leader: 'a' });
    const decided = structuredClone(state);
    decided.tables[0].raftLeader = null;
    const report = await move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null, decided });
    expect(calls.reads).toBeGreaterThan(0);
    expect(calls.writes).toBeGreaterThan(0);
    expect(report.changes).toEqual([expect.objectContaining({ table: 'db.A', from: 's_a' })]);
  });

  test('when the deadline has passed before the move starts, then it reads nothing, writes nothing, and reports the tables the decided cluster shows it leading', async () => {
    const { move, calls, state, clock } = moveOn();
    const report = await move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null, deadline: createDeadline(clock, 0), decided: structuredClone(state) });
    expect(report).toMatchObject({ outcome: 'failed', settled: false, changes: [], notDone: [{ table: 'db.A', reason: 'not moved: the deadline passed first' }] });
    expect(calls).toEqual({ reads: 0, writes: 0 });
  });

  test('when what is left of the deadline is less than a round takes (reads as slow as the one that planned it), then no round starts and the answer says why', async () => {
    const { move, calls, clock } = moveOn({ readMs: 1000 });
    // 2 s + 8 reads of 1 s + 300 ms settle: 10.3 s for a round; 9 s are left after the planning read.
    const report = await move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null, deadline: createDeadline(clock, 10000) });
    expect(report).toMatchObject({ settled: false, changes: [], notDone: [{ table: 'db.A', reason: 'not moved: 9000 ms of the deadline left, and a round takes about 10300 ms' }] });
    expect(calls.writes).toBe(0);
    const fast = moveOn({ readMs: 100 });
    expect((await fast.move.moveRaftLeadership({ server: 'a', reason: 'test' }, { actor: null, deadline: createDeadline(fast.clock, 10000) })).changes).toHaveLength(1);
  });
});

describe('tablesLedBy', () => {
  const tables = (leaders) => ({ servers: [], tables: leaders.map((raftLeader, i) => ({ id: `t${i}`, raftLeader, shards: [] })) });
  test.each([
    [['a', 'b', 'a'], { tableIds: ['t0', 't2'], unknown: false }],
    [['b', 'c'], { tableIds: [], unknown: false }],
    [['b', null], { tableIds: [], unknown: true }],
  ])('when the leaders read are %j, then a leads %j', (leaders, expected) => {
    expect(tablesLedBy(tables(leaders), 'a')).toEqual(expected);
  });
});

describe('the Raft move\'s round budget (raftRoundMs, raftRoundMayStart)', () => {
  test.each([
    ['a quick read, no settle', { readMs: 10, settleMs: 0 }, 2080],
    ['a slow read (1,000 tables)', { readMs: 250, settleMs: 1000 }, 5000],
  ])('when %s, then a round takes %i ms', (_, args, ms) => {
    expect(raftRoundMs(args)).toBe(ms);
  });

  test.each([
    [5000, 5000, true, null],
    [4999.6, 5000, false, 'not moved: 5000 ms of the deadline left, and a round takes about 5000 ms'],
    [1200, 3080, false, 'not moved: 1200 ms of the deadline left, and a round takes about 3080 ms'],
    [20000, 3080, true, null],
  ])('when %p ms are left and a round takes %p ms, then it may start: %p', (remainingMs, roundMs, start, reason) => {
    expect(raftRoundMayStart({ remainingMs, roundMs })).toEqual({ start, reason });
  });
});
