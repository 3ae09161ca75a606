// The shortcuts that keep the planners fast on large clusters decide as the plain rules do: a name order collated
// once agrees with localeCompare, a rebalance stopped by the counts stops only where no move was possible, and a new
// server's replicas come from the donors and tables the rules name.

import fc from 'fast-check';
import { compareNamesOf, createView, hasLiveMajority } from '../../src/planner/eligibility.js';
import { planRebalancePrimaries } from '../../src/planner/primary-planner.js';
import { planAddServer } from '../../src/planner/replica-planner.js';
import { clusterArbitrary } from '../helpers/clusters.js';

const RUNS = { numRuns: 300 };

const server = (id, name = id, connected = true) => ({ id, name, connected, tags: [], hostname: null, canonicalAddresses: [] });
const shard = (index, primary, replicas) => ({
  index, primary, replicas, nonvoting: [], acting: [primary], states: Object.fromEntries(replicas.map((id) => [id, 'ready'])),
});
// One table per shard, so that a pick's table preference never hides its donor order.
const clusterOf = (servers, shards) => ({
  servers,
  backfills: [],
  tables: shards.map((s, i) => ({
    id: `t${i}`, db: 'db', name: `table${i}`, readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: null,
    shards: [{ ...s, index: 0 }],
  })),
});
const movesOf = (plan) => plan.changes.flatMap((c) => c.moves.map((m) => `${c.tableId} ${m.from} -> ${m.to}`));

describe('compareNamesOf', () => {
  const name = fc.string({ unit: fc.constantFrom('a', 'B', 'b', '_', '-', '1', '10', 'é', 'E', ' '), maxLength: 6 });

  test('when server names differ in case, accents, digits or punctuation, then it orders them as localeCompare does, and names that collate equal tie', () => {
    fc.assert(fc.property(fc.array(name, { minLength: 1, maxLength: 12 }), (names) => {
      const servers = names.map((n, i) => server(`id${i}`, n));
      const view = createView({ servers, tables: [] });
      const compare = compareNamesOf(view, servers.map((s) => s.id));
      for (const a of servers) {
        for (const b of servers) expect(Math.sign(compare(a.id, b.id))).toBe(Math.sign(a.name.localeCompare(b.name)));
      }
    }), RUNS);
  });
});

describe('planRebalancePrimaries when the counts are already level or nearly', () => {
  test.each([
    ['every server leads one shard', [server('a'), server('b'), server('c')],
      [shard(0, 'a', ['a', 'b']), shard(0, 'b', ['b', 'c']), shard(0, 'c', ['c', 'a'])], {}, []],
    ['the counts are level but a primary is on a draining server', [server('a'), server('b'), server('c')],
      [shard(0, 'a', ['a', 'b']), shard(0, 'b', ['b', 'c']), shard(0, 'c', ['c', 'a'])], { draining: ['c'] }, ['t2 c -> a']],
    ['the servers holding primaries are level but a connected replica holds none', [server('a'), server('b'), server('c')],
      [shard(0, 'a', ['a', 'c']), shard(0, 'a', ['a', 'b']), shard(0, 'b', ['b', 'c']), shard(0, 'b', ['b', 'a'])], {}, ['t0 a -> c']],
    ['the only server holding none is disconnected', [server('a'), server('b'), server('c', 'c', false)],
      [shard(0, 'a', ['a', 'c']), shard(0, 'a', ['a', 'b']), shard(0, 'b', ['b', 'c'])], {}, []],
    ['a preferred return would not narrow the gap by 2', [server('a'), server('b')],
      [shard(0, 'a', ['a', 'b']), shard(0, 'b', ['b', 'a'])], { prefer: [{ tableId: 't0', shard: 0, serverId: 'b' }] }, []],
  ])('when %s, then it plans exactly the moves the rules call for', (_, servers, shards, options, expected) => {
    const plan = planRebalancePrimaries(clusterOf(servers, shards), options);
    expect(movesOf(plan)).toEqual(expected);
    expect(plan.skipped).toEqual([]);
  });
});

describe('planAddServer donations', () => {
  const moved = (plan) => plan.moves.map((m) => `${m.tableId} ${m.from} -> ${m.to}`);

  // 'a' sorts before 'B' by localeCompare but after it by code point: the first donation shows which order ruled.
  test('when two donors hold as many replicas, then the first by name (localeCompare) gives first, and they alternate', () => {
    const servers = [server('new'), server('x', 'a'), server('y', 'B'), server('z', 'c')];
    const shards = [0, 1, 2, 3, 4, 5].map((i) => shard(i, 'z', ['z', 'x', 'y']));
    expect(moved(planAddServer(clusterOf(servers, shards), 'new'))).toEqual(['t0 x -> new', 't1 y -> new', 't2 x -> new', 't3 y -> new']);
  });

  test('when the most loaded donor has nothing left to give, then the next one in order gives', () => {
    const servers = [server('new'), server('x', 'a'), server('y', 'b'), server('z', 'c'), server('w', 'd')];
    // x leads t0-t3 (a leader gives no replica) and is a plain replica only in t4.
    const shards = [0, 1, 2, 3].map((i) => shard(i, 'x', ['x', 'z', 'w'])).concat([shard(0, 'z', ['z', 'x', 'y'])]);
    expect(moved(planAddServer(clusterOf(servers, shards), 'new'))).toEqual(['t0 z -> new', 't1 z -> new', 't4 x -> new']);
  });

  test('when adding a server to any cluster, then each replica comes from a connected, non-draining, non-leading voter of a shard with a live majority, no shard twice, and no more than a fair share', () => {
    fc.assert(fc.property(clusterArbitrary, (random) => {
      const cluster = { ...random, servers: [...random.servers, server('new', 'server_new')] };
      const plan = planAddServer(cluster, 'new', { draining: random.draining });
      const view = createView(cluster, { draining: random.draining });
      const counts = new Map();
      for (const t of cluster.tables) for (const s of t.shards) for (const id of s.replicas) counts.set(id, (counts.get(id) ?? 0) + 1);
      const hosts = cluster.servers.filter((s) => s.connected && !random.draining.includes(s.id)).map((s) => s.id);
      const total = hosts.reduce((n, id) => n + (counts.get(id) ?? 0), 0);
      expect(plan.moves.length).toBeLessThanOrEqual(Math.floor(total / hosts.length));
      expect(new Set(plan.moves.map((m) => `${m.tableId}:${m.shard}`)).size).toBe(plan.moves.length);
      for (const m of plan.moves) {
        const s = cluster.tables.find((t) => t.id === m.tableId).shards[m.shard];
        expect({ voter: s.replicas.includes(m.from) && !s.nonvoting.includes(m.from), leads: s.primary === m.from, live: hasLiveMajority(view, s) })
          .toEqual({ voter: true, leads: false, live: true });
        expect(hosts).toContain(m.from);
      }
    }), RUNS);
  });
});
