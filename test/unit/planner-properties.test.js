// Property tests: the planner's invariants hold on random clusters, including dead, draining and
// backfilling servers.

import fc from 'fast-check';
import {
  createView, hasLiveMajority, isSettling, votingReplicas,
} from '../../src/planner/eligibility.js';
import { planMovePrimariesFromServers, planRebalancePrimaries } from '../../src/planner/primary-planner.js';
import { finalizeReplica, planMigrateReplicasOff, stageReplica } from '../../src/planner/replica-planner.js';
import { checkTransition } from '../../src/planner/safety.js';
import { applyChanges, clusterArbitrary } from '../helpers/clusters.js';

const RUNS = { numRuns: 300 };

function everyChangeIsSafe(cluster, plan, draining) {
  return plan.changes.every((c) => {
    const table = cluster.tables.find((t) => t.id === c.tableId);
    return checkTransition(cluster, table, c.shards, { draining }).length === 0;
  });
}

// The oracle, written from the rules rather than from the planner's own helpers.
function expectFitToLead(cluster, shard, to, draining) {
  const server = cluster.servers.find((s) => s.id === to);
  expect({ to, connected: server.connected, state: shard.states[to], voting: shard.replicas.includes(to) && !shard.nonvoting.includes(to), draining: draining.includes(to) })
    .toEqual({ to, connected: true, state: 'ready', voting: true, draining: false });
}

describe('primary planner invariants', () => {
  test('when draining any server, then every new primary is a live, ready, voting, non-draining replica of its shard', () => {
    fc.assert(fc.property(clusterArbitrary, fc.nat(), (cluster, pick) => {
      const server = cluster.servers[pick % cluster.servers.length].id;
      const plan = planMovePrimariesFromServers(cluster, [server], { draining: cluster.draining });
      for (const change of plan.changes) {
        const table = cluster.tables.find((t) => t.id === change.tableId);
        for (const move of change.moves) expectFitToLead(cluster, table.shards[move.shard], move.to, [...cluster.draining, server]);
      }
      expect(everyChangeIsSafe(cluster, plan, cluster.draining)).toBe(true);
    }), RUNS);
  });

  test('when draining, then afterwards no primary is left on the server unless the shard was reported skipped', () => {
    fc.assert(fc.property(clusterArbitrary, fc.nat(), (cluster, pick) => {
      const server = cluster.servers[pick % cluster.servers.length].id;
      const plan = planMovePrimariesFromServers(cluster, [server], { draining: cluster.draining });
      const after = applyChanges(cluster, plan.changes);
      const left = after.tables.flatMap((t) => t.shards.filter((s) => s.primary === server).map((s) => `${t.id}:${s.index}`));
      expect(left.sort()).toEqual(plan.skipped.map((s) => `${s.tableId}:${s.shard}`).sort());
    }), RUNS);
  });

  test('when planning twice on the same state, then the plans are equal; after applying, replanning does nothing', () => {
    fc.assert(fc.property(clusterArbitrary, (cluster) => {
      const first = planRebalancePrimaries(cluster, { draining: cluster.draining });
      expect(planRebalancePrimaries(cluster, { draining: cluster.draining })).toEqual(first);
      const after = applyChanges(cluster, first.changes);
      expect(planRebalancePrimaries(after, { draining: cluster.draining }).changes).toEqual([]);
    }), RUNS);
  });

  // Levelling by shard load (POSTSTART_GIVE_BACK=balance) ends where levelling by counts does: a count plan
  // finds nothing more to move. Loads are arbitrary per shard.
  test('when rebalancing with shard loads, then the result is as level as by counts, replanning does nothing, and every change is safe', () => {
    fc.assert(fc.property(clusterArbitrary, fc.array(fc.nat({ max: 1000 }), { minLength: 64, maxLength: 64 }), (cluster, values) => {
      const loads = new Map(cluster.tables.flatMap((t, ti) => t.shards.map((sh) => [`${t.id}:${sh.index}`, values[(ti * 8 + sh.index) % 64]])));
      const plan = planRebalancePrimaries(cluster, { draining: cluster.draining, loads });
      const after = applyChanges(cluster, plan.changes);
      expect(planRebalancePrimaries(after, { draining: cluster.draining, loads }).changes).toEqual([]);
      expect(planRebalancePrimaries(after, { draining: cluster.draining }).changes).toEqual([]);
      expect(everyChangeIsSafe(cluster, plan, cluster.draining)).toBe(true);
    }), RUNS);
  });

  // Each handover costs clients: choosing quiet shards (or, for a server added for capacity, busy ones) must not take
  // more of them than levelling by counts, and must end as level, every change safe.
  test.each(['quietest', 'busiest'])('when rebalancing with shard loads (take %s), then it makes no more moves than by counts and ends as level', (take) => {
    fc.assert(fc.property(clusterArbitrary, fc.array(fc.nat({ max: 1000 }), { minLength: 64, maxLength: 64 }), (cluster, values) => {
      const loads = new Map(cluster.tables.flatMap((t, ti) => t.shards.map((sh) => [`${t.id}:${sh.index}`, values[(ti * 8 + sh.index) % 64]])));
      const moves = (plan) => plan.changes.flatMap((c) => c.moves).length;
      const plan = planRebalancePrimaries(cluster, { draining: cluster.draining, loads, take });
      expect(moves(plan)).toBeLessThanOrEqual(moves(planRebalancePrimaries(cluster, { draining: cluster.draining })));
      expect(planRebalancePrimaries(applyChanges(cluster, plan.changes), { draining: cluster.draining }).changes).toEqual([]);
      expect(everyChangeIsSafe(cluster, plan, cluster.draining)).toBe(true);
    }), RUNS);
  });

  test('when rebalancing, then a draining server never receives a primary and every change passes the safety check', () => {
    fc.assert(fc.property(clusterArbitrary, (cluster) => {
      const plan = planRebalancePrimaries(cluster, { draining: cluster.draining });
      for (const change of plan.changes) {
        const table = cluster.tables.find((t) => t.id === change.tableId);
        for (const move of change.moves) expectFitToLead(cluster, table.shards[move.shard], move.to, cluster.draining);
      }
      expect(everyChangeIsSafe(cluster, plan, cluster.draining)).toBe(true);
    }), RUNS);
  });
});

describe('replica planner invariants', () => {
  test('when a replica moves (stage, backfill, finalize), then no shard with a live majority ever loses it', () => {
    fc.assert(fc.property(clusterArbitrary, fc.nat(), (cluster, pick) => {
      const server = cluster.servers[pick % cluster.servers.length].id;
      const plan = planMigrateReplicasOff(cluster, server, { draining: cluster.draining });
      for (const move of plan.moves) {
        const table = cluster.tables.find((t) => t.id === move.tableId);
        const before = table.shards[move.shard];
        expect(cluster.draining).not.toContain(move.to);
        // stage: the voting set is untouched
        const staged = stageReplica(before, move.to);
        expect(votingReplicas(staged)).toEqual(votingReplicas(before));
        const stagedShards = table.shards.map((s, i) => (i === move.shard ? staged : s));
        expect(checkTransition(cluster, table, stagedShards, { draining: cluster.draining })).toEqual([]);
        // backfill done: the new replica is ready; finalize keeps a live majority where there was one
        const readyShard = { ...before, ...staged, states: { ...before.states, [move.to]: 'ready' } };
        const readyTable = { ...table, shards: table.shards.map((s, i) => (i === move.shard ? readyShard : s)) };
        const readyCluster = { ...cluster, tables: cluster.tables.map((t) => (t.id === table.id ? readyTable : t)) };
        const { shard: next } = finalizeReplica(readyCluster, readyTable, move.shard, move, { draining: cluster.draining });
        if (!next) continue;
        const view = createView(readyCluster, { draining: cluster.draining });
        if (hasLiveMajority(view, readyShard)) {
          expect(hasLiveMajority(view, { ...next, states: readyShard.states })).toBe(true);
        }
        expect(next.replicas).not.toContain(server);
        expect(votingReplicas(next)).toHaveLength(votingReplicas(before).length);
        expect(votingReplicas(next)).toContain(next.primary);
      }
    }), RUNS);
  });
});

// One shard with random voters, nonvoting replicas, connectivity, replica states and acting primary (none, the
// configured one, or another replica, as during an election or a handover).
const settlingCase = fc.integer({ min: 1, max: 6 }).chain((count) => {
  const ids = Array.from({ length: count }, (_, i) => `s${i}`);
  return fc.record({
    replicas: fc.shuffledSubarray(ids, { minLength: 1, maxLength: count }),
    nonvotingMask: fc.array(fc.boolean(), { minLength: count, maxLength: count }),
    connected: fc.array(fc.boolean(), { minLength: count, maxLength: count }),
    states: fc.array(fc.constantFrom('ready', 'ready', 'backfilling', 'waiting_for_primary', 'transitioning', undefined), { minLength: count, maxLength: count }),
    primaryPick: fc.nat(),
    acting: fc.constantFrom('none', 'primary', 'other'),
    otherPick: fc.nat(),
  }).map((c) => {
    const nonvoting = c.replicas.filter((_, k) => k > 0 && c.nonvotingMask[k]);
    const voters = c.replicas.filter((id) => !nonvoting.includes(id));
    const primary = voters[c.primaryPick % voters.length];
    const other = c.replicas[c.otherPick % c.replicas.length];
    const acting = { none: [], primary: [primary], other: [other] }[c.acting];
    const states = Object.fromEntries(c.replicas.map((id, k) => [id, c.states[k]]).filter(([, state]) => state !== undefined));
    const servers = ids.map((id, k) => ({ id, name: id, connected: c.connected[k] }));
    return { servers, shard: { index: 0, primary, replicas: c.replicas, nonvoting, acting, states } };
  });
});

describe('isSettling (work refused now may be possible in a moment)', () => {
  const settling = ({ servers, shard }) => isSettling(createView({ servers, tables: [] }), shard);
  const connectedIn = (servers) => new Set(servers.filter((s) => s.connected).map((s) => s.id));
  const voters = (shard) => shard.replicas.filter((id) => !shard.nonvoting.includes(id));
  const withState = (c, states, acting = c.shard.acting) => ({ ...c, shard: { ...c.shard, states, acting } });

  test('when at most half the voters are connected, then the shard is not settling (no election can finish)', () => {
    fc.assert(fc.property(settlingCase, (c) => {
      const live = voters(c.shard).filter((id) => connectedIn(c.servers).has(id)).length;
      fc.pre(live * 2 <= voters(c.shard).length);
      expect(settling(c)).toBe(false);
    }), RUNS);
  });

  test('when its configured primary is connected and acts and every connected voter is ready, then it is not settling', () => {
    fc.assert(fc.property(settlingCase, (c) => {
      const connected = connectedIn(c.servers);
      fc.pre(connected.has(c.shard.primary));
      const states = { ...c.shard.states, ...Object.fromEntries(voters(c.shard).filter((id) => connected.has(id)).map((id) => [id, 'ready'])) };
      expect(settling(withState(c, states, [c.shard.primary]))).toBe(false);
    }), RUNS);
  });

  test('when nobody acts as primary (e.g. its primary is disconnected) while a majority of voters is connected, then it is settling', () => {
    fc.assert(fc.property(settlingCase, (c) => {
      const live = voters(c.shard).filter((id) => connectedIn(c.servers).has(id)).length;
      fc.pre(live * 2 > voters(c.shard).length);
      expect(settling(withState(c, c.shard.states, []))).toBe(true);
    }), RUNS);
  });

  test('when a majority of voters is connected and one connected voter is not ready, then it is settling, whoever acts', () => {
    fc.assert(fc.property(settlingCase, fc.nat(), (c, pick) => {
      const connected = connectedIn(c.servers);
      const live = voters(c.shard).filter((id) => connected.has(id));
      fc.pre(live.length * 2 > voters(c.shard).length);
      const lagging = live[pick % live.length];
      expect(settling(withState(c, { ...c.shard.states, [lagging]: 'backfilling' }))).toBe(true);
    }), RUNS);
  });

  test('when only nonvoting replicas change state, then the verdict does not change', () => {
    fc.assert(fc.property(settlingCase, (c) => {
      fc.pre(c.shard.nonvoting.length > 0);
      const states = { ...c.shard.states, ...Object.fromEntries(c.shard.nonvoting.map((id) => [id, c.shard.states[id] === 'ready' ? 'backfilling' : 'ready'])) };
      expect(settling(withState(c, states))).toBe(settling(c));
    }), RUNS);
  });
});
