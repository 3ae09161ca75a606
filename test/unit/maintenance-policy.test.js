// The pure decisions of node maintenance: which node signals drain a node, what the end of one releases, and
// when an eviction of a RethinkDB pod is admitted (after its primaries move) or refused for now; with a property
// test that an admitted eviction leaves every shard that could keep a majority with a live, ready one.

import fc from 'fast-check';
import { createView, isLiveReady, votingReplicas } from '../../src/planner/eligibility.js';
import {
  decideEviction, decideEvictionHoldExpiry, decideNodeMaintenance, evictionDemotionDone, expiredEvictionDrains, nodeDrainSignal,
} from '../../src/policy/maintenance.js';
import { clusterArbitrary } from '../helpers/clusters.js';

const node = (fields = {}) => ({ name: 'node-1', unschedulable: false, taints: [], ...fields });
const server = (id) => ({ id, name: `server_${id}`, pod: `pod-${id}` });

// Servers a..e; table t1's shards (primary, replicas). Rows override states and connections.
function cluster({ disconnected = [], states = {}, shards = [['a', ['a', 'b', 'c']], ['b', ['b', 'c', 'd']]], nonvoting = {}, acting = {} } = {}) {
  const ids = ['a', 'b', 'c', 'd', 'e'];
  const connected = (id) => !disconnected.includes(id);
  return {
    servers: ids.map((id) => ({ id, name: `server_${id}`, connected: connected(id), tags: [], hostname: `server-${id}`, canonicalAddresses: [] })),
    backfills: [],
    tables: [{
      id: 't1', db: 'db', name: 'users',
      shards: shards.map(([primary, replicas], index) => ({
        index, primary, replicas, nonvoting: nonvoting[index] ?? [], acting: acting[index] ?? (connected(primary) ? [primary] : []),
        states: { ...Object.fromEntries(replicas.map((id) => [id, connected(id) ? 'ready' : 'disconnected'])), ...(states[index] ?? {}) },
      })),
    }],
  };
}

describe('nodeDrainSignal', () => {
  test.each([
    ['a schedulable node without taints', node(), null],
    ['a cordoned node', node({ unschedulable: true }), 'cordon'],
    ['the unschedulable taint', node({ taints: [{ key: 'node.kubernetes.io/unschedulable', effect: 'NoSchedule' }] }), 'node.kubernetes.io/unschedulable'],
    ['the cluster autoscaler\'s taint', node({ taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] }), 'ToBeDeletedByClusterAutoscaler'],
    ['a not-ready taint only', node({ taints: [{ key: 'node.kubernetes.io/not-ready', effect: 'NoSchedule' }] }), null],
  ])('when the node is %s, then the signal is %s', (_, n, expected) => {
    const signal = nodeDrainSignal(n);
    expect(signal?.key ?? signal?.kind ?? null).toBe(expected);
  });

  test('when the configured taints are others, then only those count', () => {
    expect(nodeDrainSignal(node({ taints: [{ key: 'ToBeDeletedByClusterAutoscaler' }] }), { taints: ['example.com/maintenance'] })).toBeNull();
    expect(nodeDrainSignal(node({ taints: [{ key: 'example.com/maintenance', effect: 'NoExecute' }] }), { taints: ['example.com/maintenance'] }).text)
      .toBe('node node-1 has the taint example.com/maintenance:NoExecute');
  });
});

describe('decideNodeMaintenance', () => {
  const targets = [{ pod: 'pod-a', server: server('a') }, { pod: 'pod-x', server: null }];

  test('when a node hosting a server is cordoned, then it is marked draining for the node and demoted in one plan', () => {
    const d = decideNodeMaintenance({ node: node({ unschedulable: true }), targets, drains: [] });
    expect(d.action).toBe('drain-node');
    expect(d.intents.map((i) => i.type)).toEqual(['mark-draining', 'move-connection', 'demote']);
    expect(d.intents[0].origin).toEqual({ kind: 'node', node: 'node-1', signal: 'cordon' });
    expect(d.intents[2]).toMatchObject({ servers: [server('a')], node: 'node-1', pods: ['pod-a', 'pod-x'], mark: 'draining' });
    expect(d.reason).toMatch(/^node node-1 is cordoned \(spec\.unschedulable\): its pods will be evicted; demote the primaries on server_a now/);
  });

  test('when its servers are draining already (for any reason), then nothing is done again', () => {
    const d = decideNodeMaintenance({ node: node({ unschedulable: true }), targets, drains: [{ serverId: 'a', origin: { kind: 'prestop' } }] });
    expect(d).toMatchObject({ action: 'none', intents: [] });
    expect(d.reason).toMatch(/draining already/);
  });

  test('when it is uncordoned, then only the drains this node caused are released, and primaries are levelled with what they lost preferred', () => {
    const drains = [
      { serverId: 'a', serverName: 'server_a', pod: 'pod-a', origin: { kind: 'node', node: 'node-1' }, demoted: [{ tableId: 't1', shard: 0 }] },
      { serverId: 'b', serverName: 'server_b', pod: 'pod-b', origin: { kind: 'node', node: 'node-2' } },
      { serverId: 'c', serverName: 'server_c', pod: 'pod-c', origin: { kind: 'operator' } },
    ];
    const d = decideNodeMaintenance({ node: node(), targets: [], drains });
    expect(d.action).toBe('end-node-drain');
    expect(d.intents).toEqual([
      { type: 'release', servers: ['a'] },
      { type: 'rebalance-primaries', prefer: [{ tableId: 't1', shard: 0, serverId: 'a' }], byLoad: true, reason: d.reason },
    ]);
    expect(decideNodeMaintenance({ node: node(), targets: [], drains, giveBack: 'never' }).intents).toEqual([{ type: 'release', servers: ['a'] }]);
    expect(decideNodeMaintenance({ node: node({ name: 'node-3' }), targets: [], drains }).action).toBe('none');
  });

  test('when it is uncordoned while one of its pods is stopping, then that server stays drained as its pod\'s own, out of the rebalance', () => {
    const drains = [
      { serverId: 'a', serverName: 'server_a', pod: 'pod-a', origin: { kind: 'node', node: 'node-1' }, demoted: [{ tableId: 't1', shard: 0 }] },
      { serverId: 'b', serverName: 'server_b', pod: 'pod-b', origin: { kind: 'node', node: 'node-1' }, demoted: [{ tableId: 't1', shard: 1 }] },
    ];
    const d = decideNodeMaintenance({ node: node(), targets: [], drains, leaving: ['a'] });
    expect(d.intents.map((i) => i.type)).toEqual(['release', 'mark-draining', 'rebalance-primaries']);
    expect(d.intents[1]).toMatchObject({ servers: [{ id: 'a', name: 'server_a', pod: 'pod-a' }], origin: { kind: 'eviction' } });
    expect(d.intents[2].prefer).toEqual([{ tableId: 't1', shard: 1, serverId: 'b' }]);
    expect(d.reason).toMatch(/server_a stays drained while its pod stops/);
  });
});

describe('decideEviction', () => {
  test('when the pod has no connected server, then it is allowed and nothing is done', () => {
    expect(decideEviction(cluster(), { pod: 'pod-x', server: null })).toMatchObject({ allowed: true, intents: [] });
  });

  test('when every shard keeps a live majority and another primary, then it is allowed with a drain of the server', () => {
    const d = decideEviction(cluster(), { pod: 'pod-a', server: server('a') });
    expect(d.allowed).toBe(true);
    expect(d.intents.map((i) => i.type)).toEqual(['mark-draining', 'move-connection', 'demote']);
    expect(d.intents[0].origin).toEqual({ kind: 'eviction' });
  });

  test('when another replica of a shard is leaving (its pod stopping), then refused: the shard would lose its majority', () => {
    const d = decideEviction(cluster(), { pod: 'pod-c', server: server('c'), drains: [{ serverId: 'b', origin: { kind: 'prestop' } }] });
    expect(d.allowed).toBe(false);
    expect(d.intents).toEqual([]);
    expect(d.refusals).toEqual([
      'db.users[0] would lose its majority: besides server_c, server_b (leaving: its pod is stopping or being evicted)',
      'db.users[1] would lose its majority: besides server_c, server_b (leaving: its pod is stopping or being evicted)',
    ]);
  });

  test('when another replica is draining for an operator or a node (still serving), then its vote counts', () => {
    for (const kind of ['operator', 'node']) {
      expect(decideEviction(cluster(), { pod: 'pod-c', server: server('c'), drains: [{ serverId: 'b', origin: { kind } }] }).allowed).toBe(true);
    }
  });

  test('when another replica is disconnected or still backfilling, then refused with that reason', () => {
    expect(decideEviction(cluster({ disconnected: ['b'] }), { pod: 'pod-c', server: server('c') }).refusals[0])
      .toBe('db.users[0] would lose its majority: besides server_c, server_b (disconnected)');
    expect(decideEviction(cluster({ states: { 0: { b: 'backfilling' } } }), { pod: 'pod-c', server: server('c') }).refusals)
      .toEqual(['db.users[0] would lose its majority: besides server_c, server_b (replica backfilling)']);
  });

  test('when the server is primary and every other replica is draining, then refused: none may take the primary', () => {
    const d = decideEviction(cluster(), { pod: 'pod-a', server: server('a'), drains: [{ serverId: 'b', origin: { kind: 'operator' } }, { serverId: 'c', origin: { kind: 'node' } }] });
    expect(d.refusals).toEqual(['db.users[0] has no other replica that may take its primary (server_b: draining, server_c: draining)']);
  });

  test('when a shard has one or two voters, then it never could keep a majority without the server: allowed, and named', () => {
    const d = decideEviction(cluster({ shards: [['a', ['a']], ['a', ['a', 'b']], ['b', ['b', 'c', 'd']]] }), { pod: 'pod-a', server: server('a') });
    expect(d.allowed).toBe(true);
    expect(d.unavoidable).toEqual([
      'db.users[0] has 1 voting replica(s): it has no majority while server_a is away',
      'db.users[1] has 2 voting replica(s): it has no majority while server_a is away',
    ]);
    expect(d.reason).toMatch(/\(unavoidable: db\.users\[0\] has 1 voting replica/);
  });

  test('when the server is a nonvoting replica only, then its shard does not limit the eviction', () => {
    const c = cluster({ shards: [['b', ['a', 'b', 'c']]], nonvoting: { 0: ['a'] }, disconnected: ['c'] });
    expect(decideEviction(c, { pod: 'pod-a', server: server('a') })).toMatchObject({ allowed: true, refusals: [] });
  });

  test('when another replica\'s pod is being deleted (its drain still marked for its node), then it counts as leaving', () => {
    const d = decideEviction(cluster(), { pod: 'pod-c', server: server('c'), drains: [{ serverId: 'b', origin: { kind: 'node' } }], stopping: ['b'] });
    expect(d.allowed).toBe(false);
  });

  test('when the only other eligible replica is under a perf warning (kept off, not draining), then no other may take the primary', () => {
    const d = decideEviction(cluster({ disconnected: ['e'] }), { pod: 'pod-a', server: server('a'), drains: [{ serverId: 'b', origin: { kind: 'operator' } }], keptOff: ['b', 'c'] });
    expect(d.refusals).toEqual(['db.users[0] has no other replica that may take its primary (server_b: draining, server_c: draining)']);
  });

  test('when the demotion skipped only shards that never could move, then it counts as done; any other skip does not', () => {
    const d = decideEviction(cluster({ shards: [['a', ['a']], ['a', ['a', 'b', 'c']]] }), { pod: 'pod-a', server: server('a') });
    expect(d.unavoidableShards).toEqual([{ tableId: 't1', table: 'db.users', shard: 0 }]);
    const report = (skipped) => ({ skipped, notDone: [], settled: true });
    expect(evictionDemotionDone(d, report([{ table: 'db.users', shard: 0, reason: 'no other replica' }])).done).toBe(true);
    expect(evictionDemotionDone(d, report([{ table: 'db.users', shard: 1, reason: 'backfilling' }]))).toEqual({ done: false, left: [{ table: 'db.users', shard: 1, reason: 'backfilling' }] });
    expect(evictionDemotionDone(d, { skipped: [], notDone: [], settled: false }).done).toBe(false);
  });

  test('when an eviction drain outlived the hold and its pod is still running, then it expires; a pod being deleted or gone keeps it', () => {
    const since = new Date(0).toISOString();
    const drains = [
      { serverId: 'a', pod: 'pod-a', since, origin: { kind: 'eviction' } },
      { serverId: 'b', pod: 'pod-b', since, origin: { kind: 'eviction' } },
      { serverId: 'c', pod: 'pod-c', since, origin: { kind: 'eviction' } },
      { serverId: 'd', pod: 'pod-d', since, origin: { kind: 'prestop' } },
    ];
    const pods = [{ name: 'pod-a', deleting: false }, { name: 'pod-b', deleting: true }, { name: 'pod-d', deleting: false }];
    expect(expiredEvictionDrains({ drains, pods, now: 300000, holdSeconds: 300 }).map((d) => d.serverId)).toEqual(['a']);
    expect(expiredEvictionDrains({ drains, pods, now: 299999, holdSeconds: 300 })).toEqual([]);
  });

  test('when eviction drains expire, then their servers are released and the primaries levelled, for that reason', () => {
    const expired = [{ serverId: 'a', pod: 'pod-a' }, { serverId: 'c', pod: 'pod-c' }];
    const reason = 'the eviction of pod-a, pod-c did not happen within 300 s: release and level the primaries';
    expect(decideEvictionHoldExpiry(expired, { holdSeconds: 300 })).toEqual({
      reason, intents: [{ type: 'release', servers: ['a', 'c'] }, { type: 'rebalance-primaries', reason }],
    });
  });

  test('property: an admitted eviction leaves each shard that could keep a majority with a live, ready majority not counting leaving servers', () => {
    fc.assert(fc.property(clusterArbitrary, fc.nat(), fc.nat(), (c, pick, leavingPick) => {
      const target = c.servers[pick % c.servers.length];
      const leavingId = c.servers[leavingPick % c.servers.length].id;
      const drains = leavingId === target.id ? [] : [{ serverId: leavingId, origin: { kind: 'prestop' } }];
      const d = decideEviction(c, { pod: 'p', server: { id: target.id, name: target.name, pod: 'p' }, drains });
      if (!d.allowed) return d.intents.length === 0;
      const view = createView(c);
      return c.tables.every((t) => t.shards.every((shard) => {
        const voters = votingReplicas(shard);
        if (!voters.includes(target.id) || (voters.length - 1) * 2 <= voters.length) return true;
        const live = voters.filter((id) => id !== target.id && id !== leavingId && isLiveReady(view, shard, id));
        return live.length * 2 > voters.length;
      }));
    }), { numRuns: 300 });
  });
});
