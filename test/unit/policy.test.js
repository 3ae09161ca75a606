// The policy is pure: table-driven tests of which action each event leads to, and why.

import {
  decideHeartbeatAtShutdown, decideHeartbeatLowering, decideHeartbeatRestore, decideSteadyHeartbeat, heartbeatWriteBudgetMs,
} from '../../src/policy/heartbeat.js';
import {
  decideOperatorDrain, decidePoststart, decidePrestop, decideRelease, prestopActionSeconds, primariesOffAfter,
} from '../../src/policy/lifecycle.js';
import { decideAfterRefusedFinalize, decideMigrateReplicasOff, decideMigrationRetry } from '../../src/policy/migrations.js';
import {
  busyPodsOf, decideMonitorStep, initialMonitorState, scaleOutSettled,
} from '../../src/policy/monitor.js';
import {
  decidePerfWarning, decidePerfWarningEnd, decidePerfWarningEscalation,
} from '../../src/policy/perf-warnings.js';
import {
  endableWarningSource, MONITOR, OPERATOR, releasableDrain, warningSourceOf,
} from '../../src/policy/requesters.js';
import { evaluateHotspots, utilizationSamples } from '../../src/monitor/hotspot.js';

const server = (id, connected = true, extra = {}) => ({ id, name: id, connected, hostname: id.replace(/_/g, '-'), ...extra });
const shard = (index, primary, replicas, states = {}) => ({
  index, primary, replicas, nonvoting: [], states: Object.fromEntries(replicas.map((r) => [r, states[r] ?? 'ready'])),
});
const cluster = (servers, shards) => ({ servers, tables: [{ id: 't', db: 'ycsb', name: 'usertable', shards }] });

describe('prestopActionSeconds', () => {
  test.each([
    [20000, 17], [60000, 51], [5000, 4], [1000, 1], [300, 1],
  ])('when the hook has %i ms, then its action gets %i s (85%%, at least 1 s), leaving time for the reads after the last write', (ms, seconds) => {
    expect(prestopActionSeconds(ms)).toBe(seconds);
  });
});

describe('decidePrestop', () => {
  test.each([
    [{ pod: 'rethinkdb-1', server: server('rethinkdb_1') }, 'move-primaries-from-server', /demote the primaries on rethinkdb_1/],
    [{ pod: 'rethinkdb-9', server: null }, 'none', /no connected RethinkDB server matches pod rethinkdb-9/],
  ])('when %o, then %s', (input, action, reason) => {
    const d = decidePrestop(input);
    expect(d.action).toBe(action);
    expect(d.reason).toMatch(reason);
    expect(d.intents.map((i) => i.type)).toEqual(input.server ? ['mark-draining', 'move-connection', 'demote'] : []);
    if (input.server) {
      expect(d.intents[0]).toMatchObject({ origin: { kind: 'prestop' }, servers: [{ id: 'rethinkdb_1' }] });
      expect(d.intents[2].mark).toBe('draining');
    }
  });

  test('when a heartbeat timeout is configured, then it is lowered for the server just before the demotion (a new primary that freezes is dropped sooner)', () => {
    const d = decidePrestop({ pod: 'rethinkdb-1', server: server('rethinkdb_1'), heartbeat: { seconds: 2, windowSeconds: 120 } });
    expect(d.intents.map((i) => i.type)).toEqual(['mark-draining', 'move-connection', 'lower-heartbeat', 'demote']);
    expect(d.intents[2]).toMatchObject({ seconds: 2, windowSeconds: 120, server: { id: 'rethinkdb_1' } });
    // With the majority waits, after the wait before the demotion (the window starts when it is lowered).
    const waited = decidePrestop({ pod: 'rethinkdb-1', server: server('rethinkdb_1'), heartbeat: { seconds: 2, windowSeconds: 120 }, majorityWaitSeconds: 10 });
    expect(waited.intents.map((i) => i.type)).toEqual(['mark-draining', 'move-connection', 'wait-for-majority', 'lower-heartbeat', 'demote', 'wait-for-majority']);
  });

  test('when the Raft move is on, then the leadership moves last, while the server is still draining', () => {
    const d = decidePrestop({ pod: 'rethinkdb-1', server: server('rethinkdb_1'), heartbeat: { seconds: 2, windowSeconds: 120 }, moveRaftLeader: true });
    expect(d.intents.map((i) => i.type)).toEqual(['mark-draining', 'move-connection', 'lower-heartbeat', 'demote', 'move-raft-leadership']);
    expect(d.intents[4]).toMatchObject({ servers: [{ id: 'rethinkdb_1' }], whileMarked: 'draining', reason: /then move the Raft leadership/ });
    expect(decidePrestop({ pod: 'rethinkdb-1', server: server('rethinkdb_1') }).intents.map((i) => i.type)).not.toContain('move-raft-leadership');
  });
});

describe('primariesOffAfter', () => {
  const item = { table: 'ycsb.usertable', shard: 0, reason: 'r' };
  test.each([
    ['everything moved and seen acting', true, { skipped: [], notDone: [], settled: true }],
    ['a dry run (its plan is all it has)', true, { skipped: [], notDone: [], settled: null }],
    ['a shard skipped', false, { skipped: [item], notDone: [], settled: true }],
    ['a write not done', false, { skipped: [], notDone: [item], settled: true }],
    ['a new primary not acting by the deadline', false, { skipped: [], notDone: [], settled: false }],
  ])('when %s, then primaries off is %p', (_, off, report) => {
    expect(primariesOffAfter(report)).toBe(off);
  });
});

describe('the operator\'s commands that mark servers', () => {
  const s1 = { id: 'b', name: 'b', pod: 'pod-b' };
  test.each([
    ['a server drain', decideOperatorDrain({ servers: [s1], reason: 'disk' }),
      [['mark-draining', { origin: { kind: 'operator' }, reason: 'disk' }], ['move-connection'], ['demote', { mark: 'draining', node: null }]]],
    ['a node drain without a reason', decideOperatorDrain({ servers: [s1], node: 'n1', pods: ['pod-b', 'pod-x'] }),
      [['mark-draining', { reason: 'move-primaries-from-node' }], ['move-connection'], ['demote', { node: 'n1', pods: ['pod-b', 'pod-x'] }]]],
    ['a release', decideRelease({ server: s1 }), [['release', { servers: ['b'] }], ['rebalance-primaries', { reason: 'release b' }]]],
    ['a release without rebalance', decideRelease({ server: s1, rebalance: false }), [['release', { servers: ['b'] }]]],
    ['a migration off', decideMigrateReplicasOff({ server: s1 }),
      [['mark-draining', { origin: { kind: 'operator' }, reason: 'migrate-replicas-off' }], ['demote', { servers: [s1], mark: 'draining' }], ['migrate-replicas-off', { server: s1 }]]],
  ])('when %s is asked, then its intents are in order', (_, decision, expected) => {
    expect(decision.intents.map((i) => i.type)).toEqual(expected.map(([type]) => type));
    expected.forEach(([, fields], i) => { if (fields) expect(decision.intents[i]).toMatchObject(fields); });
  });
});

describe('who may undo what', () => {
  const pod = { kind: 'pod', pod: 'rethinkdb-1' };
  test.each([
    ['the pod, a PRESTOP drain', pod, { origin: { kind: 'prestop' } }, true],
    ['the pod, an operator drain', pod, { origin: { kind: 'operator' } }, false],
    ['the pod, a drain persisted as via prestop', pod, { via: 'prestop' }, true],
    ['the pod, a drain persisted as via action', pod, { via: 'action' }, false],
    ['an operator, an operator drain', OPERATOR, { origin: { kind: 'operator' } }, true],
    ['the pod, its eviction\'s drain', pod, { origin: { kind: 'eviction' } }, true],
    ['the pod back on its cordoned node, the node\'s drain', pod, { origin: { kind: 'node', node: 'node-1' } }, false],
    ['the pod now on another node, the old node\'s drain', pod, { origin: { kind: 'node', node: 'node-0' } }, true],
    ['an operator, a node\'s drain', OPERATOR, { origin: { kind: 'node', node: 'node-1' } }, true],
  ])('when POSTSTART is asked by %s, then it releases it: %s', (_, requester, mark, released) => {
    expect(releasableDrain(requester, mark, { podNode: 'node-1' })).toBe(released ? mark : null);
    expect(releasableDrain(requester, null)).toBeNull();
  });

  test.each([
    [pod, 'hook', 'hook'], [OPERATOR, 'operator', null], [MONITOR, 'monitor', 'monitor'],
  ])('when %o raises or ends a warning, then it is marked %s and may end those from %s', (requester, source, endable) => {
    expect(warningSourceOf(requester)).toBe(source);
    expect(endableWarningSource(requester)).toBe(endable);
  });
});

describe('decidePoststart: what a returning server gets back', () => {
  const returning = cluster([server('a'), server('b'), server('c')], [shard(0, 'b', ['a', 'b', 'c'])]);
  test.each([
    ['always', ['wait-for-replicas-ready', 'rebalance-primaries'], { prefer: [{ tableId: 't', shard: 0 }] }],
    ['balance', ['wait-for-replicas-ready', 'rebalance-primaries'], { byLoad: true, prefer: [{ tableId: 't', shard: 0 }] }],
    ['never', [], {}],
  ])('when POSTSTART_GIVE_BACK=%s, then %j', (giveBack, types, rebalance) => {
    const d = decidePoststart(returning, { serverId: 'a', giveBack, demoted: [{ tableId: 't', shard: 0 }] });
    expect(d.intents.map((i) => i.type)).toEqual(types);
    if (types.length) expect(d.intents[1]).toMatchObject(rebalance);
    if (giveBack === 'always') expect(d.intents[1].byLoad).toBeFalsy();
  });
});

describe('decideHeartbeatLowering', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  test.each([
    ['the heartbeat is the default', 10, [], { originalSecs: 10, write: 2 }],
    ['another server is departing already (heartbeat lowered)', 2, [{ originalSecs: 10, loweredSecs: 2 }], { originalSecs: 10, write: null }],
    ['an operator set 5 s', 5, [], { originalSecs: 5, write: 2 }],
    ['the heartbeat is already 2 s', 2, [], null],
    ['the heartbeat is unknown', null, [], null],
  ])('when %s, then %o', (_, current, departures, expected) => {
    const d = decideHeartbeatLowering({ current, departures, seconds: 2, windowSeconds: 60, now });
    if (!expected) {
      expect(d.departure).toBeNull();
      expect(d.write).toBeNull();
      return;
    }
    expect(d.departure).toEqual({ originalSecs: expected.originalSecs, loweredSecs: 2, until: '2026-01-01T00:01:00.000Z' });
    expect(d.write).toBe(expected.write);
  });

  test.each([
    [undefined, null], [17000, 12000], [5000, 0], [3000, 0],
  ])('when the decision has %s ms left, then its heartbeat write is waited for at most %s ms (null: no limit; 5 s stay for the demotion)', (leftMs, budgetMs) => {
    expect(heartbeatWriteBudgetMs({ leftMs })).toBe(budgetMs);
  });
});

describe('decideHeartbeatRestore', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  const later = '2026-01-01T00:01:00.000Z';
  const earlier = '2025-12-31T23:59:00.000Z';
  const dep = (serverId, until = later, originalSecs = 10) => ({ serverId, serverName: serverId, originalSecs, loweredSecs: 2, until });
  const at = (heartbeat, servers) => ({ servers, tables: [], heartbeatTimeoutSecs: heartbeat });
  test.each([
    ['the departing server is still connected', 2, [server('a')], [dep('a')], []],
    ['the departing server has left', 2, [server('a', false)], [dep('a')], [['set-heartbeat', 10], ['end-departure', ['a']]]],
    ['the server outstayed its window', 2, [server('a')], [dep('a', earlier)], [['set-heartbeat', 10], ['end-departure', ['a']]]],
    ['one left, another is still departing', 2, [server('a', false), server('b')], [dep('a'), dep('b')], [['end-departure', ['a']]]],
    ['someone changed the heartbeat meanwhile', 7, [server('a', false)], [dep('a')], [['end-departure', ['a']]]],
    ['two left, the larger original wins', 2, [server('a', false), server('b', false)], [dep('a', later, 10), dep('b', later, 2)],
      [['set-heartbeat', 10], ['end-departure', ['a', 'b']]]],
  ])('when %s, then %j', (_, heartbeat, servers, departures, expected) => {
    const d = decideHeartbeatRestore(at(heartbeat, servers), { departures, now });
    expect(d.intents.map((i) => [i.type, i.seconds ?? i.servers])).toEqual(expected);
  });

  test.each([
    ['back at the original (the lowering never landed, or someone put it back)', 10, 'heartbeat timeout left at 10 s (already the original)'],
    ['set to another value by someone else', 7, 'heartbeat timeout left at 7 s (changed by someone else meanwhile)'],
    ['still ours', 2, 'heartbeat timeout back to 10 s'],
  ])('when the last departure ends with the timeout %s, then the reason says so', (_, heartbeat, said) => {
    expect(decideHeartbeatRestore(at(heartbeat, [server('a', false)]), { departures: [dep('a')], now }).reason).toContain(said);
    expect(decideHeartbeatAtShutdown({ current: heartbeat, departures: [{ ...dep('a'), persisted: 'memory-only' }] }).reason).toContain(said);
  });
});

describe('decideSteadyHeartbeat', () => {
  test.each([
    ['off', { current: 10, seconds: 0 }, null, /is off/],
    ['unknown now', { current: null, seconds: 3 }, null, /unknown/],
    ['a departure owns it', { current: 2, seconds: 3, departures: [{ originalSecs: 3 }] }, null, /1 departing servers/],
    ['already there', { current: 3, seconds: 3 }, null, /is 3 s, as configured/],
    ['RethinkDB\'s default', { current: 10, seconds: 3 }, 3, /10 s → 3 s .* within about 5 s/],
  ])('%s', (_, input, write, reason) => {
    const d = decideSteadyHeartbeat(input);
    expect(d.reason).toMatch(reason);
    expect(d.intents).toEqual(write === null ? [] : [{ type: 'set-heartbeat', seconds: write, reason: d.reason }]);
  });
});

describe('decideHeartbeatAtShutdown', () => {
  const dep = (serverId, persisted, originalSecs = 10) => ({ serverId, serverName: serverId, originalSecs, loweredSecs: 2, until: '2026-01-01T00:01:00.000Z', persisted });
  const memoryOnly = 'memory-only (no Kubernetes API)';
  test.each([
    ['no departure is owed', 2, [], []],
    ['the departure is saved on its pod (the next leader reads it)', 2, [dep('a', 'saved')], []],
    ['one of two departures is saved', 2, [dep('a', memoryOnly), dep('b', 'saved')], []],
    ['no Kubernetes API saved it', 2, [dep('a', memoryOnly)], [['set-heartbeat', 10], ['end-departure', ['a']]]],
    ['its save failed', 2, [dep('a', 'failed: forbidden')], [['set-heartbeat', 10], ['end-departure', ['a']]]],
    ['two unsaved, the larger original wins', 2, [dep('a', memoryOnly, 10), dep('b', memoryOnly, 2)], [['set-heartbeat', 10], ['end-departure', ['a', 'b']]]],
    ['someone changed the heartbeat meanwhile', 7, [dep('a', memoryOnly)], [['end-departure', ['a']]]],
    ['it is back at the original already', 10, [dep('a', memoryOnly)], [['end-departure', ['a']]]],
  ])('when the manager stops and %s, then the heartbeat goes back only if no successor can read a departure', (_, current, departures, expected) => {
    const d = decideHeartbeatAtShutdown({ current, departures });
    expect(d.intents.map((i) => [i.type, i.seconds ?? i.servers])).toEqual(expected);
    expect(d.reason).toEqual(expect.any(String));
  });
});

describe('decidePoststart', () => {
  const base = [server('a'), server('b'), server('c')];
  test.each([
    ['the server is already in the configs', [...base, server('d')], [shard(0, 'a', ['a', 'b', 'd'])], 'd', 'returning', null],
    ['a lost server is still in the configs', [...base, server('x', false), server('d')], [shard(0, 'x', ['x', 'a', 'b'])], 'd', 'replacement', 'x'],
    ['the lost server has the same hostname', [...base, server('y', false), server('x', false, { hostname: 'pod-x' }), server('d', true, { hostname: 'pod-x' })],
      [shard(0, 'x', ['x', 'a', 'b']), shard(1, 'y', ['y', 'a', 'b'])], 'd', 'replacement', 'x'],
    ['nothing is missing', [...base, server('d')], [shard(0, 'a', ['a', 'b', 'c'])], 'd', 'expansion', null],
  ])('when %s, then %s', (_, servers, shards, id, kind, replaces) => {
    const d = decidePoststart(cluster(servers, shards), { serverId: id });
    expect(d.kind).toBe(kind);
    expect(d.replaces).toBe(replaces);
  });

  test.each([['always', ['release', 'wait-for-replicas-ready', 'rebalance-primaries']], ['never', ['release']]])(
    'when a returning server comes back with POSTSTART_GIVE_BACK=%s, then the intents are %j', (giveBack, types) => {
      const d = decidePoststart(cluster([server('a'), server('d')], [shard(0, 'a', ['a', 'd'])]), { serverId: 'd', wasDraining: true, giveBack });
      expect(d).toMatchObject({ kind: 'returning', release: true });
      expect(d.intents.map((i) => i.type)).toEqual(types);
    },
  );

  test.each([
    ['a returning server', [server('a'), server('d')], [shard(0, 'a', ['a', 'd'])], [
      { type: 'release', servers: ['d'] }, { type: 'wait-for-replicas-ready', server: { id: 'd', name: 'd' } },
      { type: 'rebalance-primaries', server: { id: 'd', name: 'd' }, prefer: [{ tableId: 't', shard: 0 }] },
    ]],
    ['a replacement', [server('a'), server('x', false), server('d')], [shard(0, 'x', ['x', 'a'])], [
      { type: 'release', servers: ['d'] }, { type: 'release', servers: ['x'] }, { type: 'replace-server', lost: 'x', server: { id: 'd', name: 'd' } },
    ]],
    ['an expansion', [server('a'), server('d')], [shard(0, 'a', ['a'])], [{ type: 'release', servers: ['d'] }, { type: 'add-server', server: { id: 'd', name: 'd' } }]],
  ])('when %s was draining, then the intents release it and then act', (_, servers, shards, intents) => {
    const d = decidePoststart(cluster(servers, shards), { serverId: 'd', wasDraining: true, demoted: [{ tableId: 't', shard: 0 }] });
    expect(d.intents).toMatchObject(intents);
  });

  test('when the server was draining, then it is released whatever the kind', () => {
    const d = decidePoststart(cluster([server('a'), server('d')], [shard(0, 'a', ['a', 'd'])]), { serverId: 'd', wasDraining: true });
    expect(d).toMatchObject({ kind: 'returning', release: true });
    expect(d.reason).toMatch(/was draining before; it is released/);
  });
});

describe('decidePerfWarning', () => {
  test.each([
    [undefined, false, /unknown duration: demote the primaries only/],
    [60, false, /60 s \(under 600 s\): demote the primaries only/],
    [599, false, /under 600 s/],
    [600, true, /at least 600 s\): demote the primaries and migrate the replicas off/],
    [86400, true, /migrate the replicas off/],
  ])('when durationSeconds is %s, then long=%s', (durationSeconds, long, reason) => {
    const servers = [{ id: 'b', name: 'b', pod: 'pod-b' }, { id: 'c', name: 'c', pod: 'pod-c' }];
    const d = decidePerfWarning({ durationSeconds, longSeconds: 600, servers, reason: 'batch job', now: Date.parse('2026-11-21T12:00:00Z'), source: 'hook' });
    expect(d.long).toBe(long);
    expect(d.reason).toMatch(reason);
    // Marked first, then demoted together in one plan, then (long) each server's replicas migrate off.
    expect(d.intents.map((i) => [i.type, i.servers ?? [i.server]].flat().map((x) => x.id ?? x))).toEqual([
      ['mark-perf-warning', 'b', 'c'], ['move-connection', 'b', 'c'], ['demote', 'b', 'c'],
      ...(long ? [['migrate-replicas-off', 'b'], ['migrate-replicas-off', 'c']] : []),
    ]);
    expect(d.intents.find((i) => i.type === 'demote')).toMatchObject({ mark: 'perfwarning', reason: expect.stringMatching(/^batch job: /) });
    // The mark the servers get says what was decided and when it ends.
    expect(d.intents[0].warning).toEqual({
      source: 'hook', signal: null, reason: 'batch job', durationSeconds: durationSeconds ?? null, long, decision: d.reason,
      since: '2026-11-21T12:00:00.000Z', expiresAt: durationSeconds ? new Date(Date.parse('2026-11-21T12:00:00Z') + durationSeconds * 1000).toISOString() : null,
    });
  });

  test('when the warning names no server, then nothing is done', () => {
    expect(decidePerfWarning({ durationSeconds: 60, longSeconds: 600, servers: [] }).intents).toEqual([]);
  });
});

describe('decidePerfWarningEscalation', () => {
  const server = { id: 's1', name: 'rethinkdb_1', pod: 'rethinkdb-1' };

  const monitorWarning = { source: 'monitor', long: false, since: '2026-11-25T08:00:00.000Z' };
  test('when escalated, then the intents demote again, migrate the replicas off, and only then mark the warning long', () => {
    const d = decidePerfWarningEscalation({ servers: [server], warning: monitorWarning, pod: 'rethinkdb-1', longSeconds: 600, reason: 'monitor: r', now: Date.parse('2026-11-25T08:10:12Z') });
    expect(d.escalate).toBe(true);
    const reason = 'hot-spot still there 612 s after the warning (at least 600 s): a long one, so migrate the replicas off too';
    expect(d.reason).toBe(reason);
    expect(d.intents).toEqual([
      { type: 'demote', servers: [server], node: null, mark: 'perfwarning', reason: `monitor: r: ${reason}` },
      { type: 'migrate-replicas-off', server, reason: `monitor: r: ${reason}`, whileWarned: true },
      { type: 'mark-perf-warning-long', servers: [server], decision: reason, at: '2026-11-25T08:10:12.000Z' },
    ]);
  });

  test('when no server is named, then nothing is done', () => {
    expect(decidePerfWarningEscalation({ servers: [], warning: monitorWarning, longSeconds: 600, now: Date.parse('2026-11-25T08:10:00Z') }).intents).toEqual([]);
  });

  test.each([
    ['no warning', null, 'no perf warning from the monitor for pod rethinkdb-1'],
    ['an operator\'s warning', { ...monitorWarning, source: 'operator' }, 'no perf warning from the monitor for pod rethinkdb-1'],
    ['a warning long already', { ...monitorWarning, long: true }, 'the warning for pod rethinkdb-1 is long already'],
  ])('when the pod has %s, then it is not escalated', (_, warning, reason) => {
    expect(decidePerfWarningEscalation({ servers: [server], warning, pod: 'rethinkdb-1', longSeconds: 600, now: Date.parse('2026-11-25T08:10:00Z') }))
      .toEqual({ escalate: false, reason, intents: [] });
  });
});

describe('decideMigrationRetry', () => {
  const unfinished = { notDone: [], skipped: [{ tableId: 't', shard: 0, reason: 'no eligible replica' }] };
  const electing = { ...shard(0, 'a', ['a', 'b', 'c']), acting: [] };
  const settled = { ...shard(0, 'a', ['a', 'b', 'c']), acting: ['a'] };
  const retry = { minMs: 500, maxMs: 30000 };
  test.each([
    ['it finished', { report: { notDone: [], skipped: [] } }, null],
    ['it failed for good (not a 503)', { failure: { statusCode: 409, message: 'conflict' } }, null],
    ['RethinkDB was unavailable', { failure: { statusCode: 503, message: 'down' } }, 'down'],
    ['work is left while a shard elects a primary', { report: unfinished, cluster: cluster([server('a'), server('b'), server('c')], [electing]) }, 'the cluster was still settling'],
    ['work is left and the cluster has settled', { report: unfinished, cluster: cluster([server('a'), server('b'), server('c')], [settled]) }, null],
    ['work is left and the cluster could not be read', { report: unfinished, cluster: null }, 'the cluster was still settling'],
  ])('when %s, then the retry reason is %j', (_, input, reason) => {
    const d = decideMigrationRetry({ tableIds: ['t'], attempt: 2, now: 0, retry, ...input });
    if (reason === null) expect(d).toBeNull();
    else expect(d).toEqual({ attempt: 2, at: new Date(1000).toISOString(), reason });
  });
});

describe('decideAfterRefusedFinalize', () => {
  test.each([
    ['the plan refused and this move staged the replica', { planRefused: true, stageWrote: true }, true],
    ['the plan refused but the replica was there before (a half-done move\'s)', { planRefused: true, stageWrote: false }, false],
    ['the finalizing write was sent and its outcome is unknown', { planRefused: false, stageWrote: true }, false],
    ['the write outcome is unknown and nothing was staged', { planRefused: false, stageWrote: false }, false],
  ])('when %s, then unstage is %j', (_, input, unstage) => {
    const d = decideAfterRefusedFinalize(input);
    expect(d.unstage).toBe(unstage);
    expect(d.reason).toEqual(expect.any(String));
  });
});

describe('decidePerfWarningEnd while a migration runs', () => {
  const cluster = { servers: [{ id: 's1', name: 'rethinkdb_1', connected: true }], tables: [] };
  test.each([
    ['its replicas migrating off (an escalation not yet marked long)', 'migrate-replicas-off', { long: false }, { long: true }],
    ['another migration (replicas coming to it)', 'add-server', { long: false }, { long: false }],
  ])('when the server has %s, then the restore waits for it to end, with the warning as %j', (_, migrating, warning, waited) => {
    const d = decidePerfWarningEnd(cluster, { serverId: 's1', warning, reason: 'monitor: hot-spot ended', migrating });
    expect(d).toEqual({
      action: 'wait', reason: "a migration of rethinkdb_1's replicas is still under way; the restore waits until it has ended",
      intents: [{ type: 'await-health', server: { id: 's1', name: 'rethinkdb_1' }, warning: waited, reason: 'monitor: hot-spot ended' }],
    });
  });

  test('when no migration runs, then a long warning\'s end moves replicas back and a short one\'s gives primaries back', () => {
    expect(decidePerfWarningEnd(cluster, { serverId: 's1', warning: { long: true } }).action).toBe('add-server');
    expect(decidePerfWarningEnd(cluster, { serverId: 's1', warning: { long: false } }).action).toBe('rebalance-primaries');
  });
});

describe('decidePerfWarningEnd', () => {
  test.each([
    ['disconnected', [server('a'), server('b', false)], [shard(0, 'a', ['a', 'b'])], {}, 'wait', /not connected/],
    ['backfilling', [server('a'), server('b')], [shard(0, 'a', ['a', 'b'], { b: 'backfilling' })], {}, 'wait', /1 replicas that are not ready/],
    ['healthy after a short warning', [server('a'), server('b')], [shard(0, 'a', ['a', 'b'])], {}, 'rebalance-primaries', /give it back its share of primaries/],
    ['healthy after a long warning', [server('a'), server('b')], [shard(0, 'a', ['a'])], { long: true }, 'add-server', /move a fair share of replicas back/],
  ])('when the server is %s, then %s', (_, servers, shards, warning, action, reason) => {
    const d = decidePerfWarningEnd(cluster(servers, shards), { serverId: 'b', warning });
    expect(d.action).toBe(action);
    expect(d.reason).toMatch(reason);
    expect(d.intents.map((i) => i.type)).toEqual([{ wait: 'await-health' }[action] ?? action]);
  });

  test('when a short warning ends on a healthy server, then the primaries are levelled with the least busy shards, the demoted ones on ties', () => {
    const demoted = [{ tableId: 't', shard: 0 }];
    const d = decidePerfWarningEnd(cluster([server('a'), server('b')], [shard(0, 'a', ['a', 'b'])]), { serverId: 'b', warning: { demoted } });
    expect(d.intents[0]).toMatchObject({ byLoad: true, prefer: demoted, clearsRestore: true });
  });
});

describe('monitor: utilization and hot-spots', () => {
  const pods = [0, 1, 2, 3].map((i) => ({ name: `p${i}`, nodeName: `n${i}`, cpuLimitCores: i === 3 ? null : 1, cpuRequestCores: 0.5 }));
  const nodes = [0, 1, 2, 3].map((i) => ({ name: `n${i}`, allocatableCpuCores: 2 }));
  const metrics = (podCpu, nodeCpu) => ({
    pods, nodes, podMetrics: podCpu.map((c, i) => ({ name: `p${i}`, cpuCores: c })), nodeMetrics: nodeCpu.map((c, i) => ({ name: `n${i}`, cpuCores: c })),
  });
  const thresholds = { hotUtilization: 0.8, hotSkew: 1.3 };

  test('when a pod has no limit, then its request is the basis; interference is node usage over allocatable', () => {
    const samples = utilizationSamples(metrics([0.5, 0.5, 0.5, 0.25], [0.5, 0.5, 0.5, 1]));
    expect(samples[0]).toMatchObject({ own: 0.5, ownBasis: 'limit', interference: 0.25 });
    expect(samples[3]).toMatchObject({ own: 0.5, ownBasis: 'request', interference: 0.5 });
  });

  test('when a quotient has floating-point noise, then utilizations and averages are given to 4 decimals and meet a threshold they equal', () => {
    const noisy = {
      pods: [{ name: 'p0', nodeName: 'n0', cpuLimitCores: 1.5 }, { name: 'p1', nodeName: 'n1', cpuLimitCores: 1.5 }],
      nodes: [{ name: 'n0', allocatableCpuCores: 3 }, { name: 'n1', allocatableCpuCores: 3 }],
      podMetrics: [{ name: 'p0', cpuCores: 1.2 }, { name: 'p1', cpuCores: 0.3 }],
      nodeMetrics: [{ name: 'n0', cpuCores: 0.6 }, { name: 'n1', cpuCores: 0.6 }],
    };
    const samples = utilizationSamples(noisy);
    expect(samples.map((s) => [s.own, s.interference])).toEqual([[0.8, 0.2], [0.2, 0.2]]);
    const e = evaluateHotspots(samples, { hotUtilization: 0.8, hotSkew: 1.3 });
    expect(e.averages).toEqual({ own: 0.5, interference: 0.2 });
    expect(e.hot.map((h) => [h.pod, h.signal])).toEqual([['p0', 'own']]);
  });

  test.each([
    ['one pod at 95% of its limit', [0.95, 0.3, 0.3, 0.15], [0.95, 0.3, 0.3, 0.15], ['p0'], 'own', false],
    ['a starved pod on a busy node (less CPU, not more)', [0.1, 0.3, 0.3, 0.15], [2, 0.3, 0.3, 0.15], ['p0'], 'interference', false],
    ['80% but not 1.3x the average', [0.85, 0.8, 0.8, 0.4], [0.85, 0.8, 0.8, 0.4], [], null, true],
    ['every pod busy', [0.9, 0.9, 0.9, 0.45], [0.9, 0.9, 0.9, 0.45], [], null, true],
    ['nothing busy', [0.3, 0.3, 0.3, 0.15], [0.3, 0.3, 0.3, 0.15], [], null, false],
  ])('when %s, then hot=%j via %s, uniform=%s', (_, podCpu, nodeCpu, hot, signal, uniform) => {
    const e = evaluateHotspots(utilizationSamples(metrics(podCpu, nodeCpu)), thresholds);
    expect(e.hot.map((h) => h.pod)).toEqual(hot);
    if (signal) expect(e.hot[0].signal).toBe(signal);
    expect(e.uniform).toBe(uniform);
  });

  const options = (now, extra = {}) => ({
    now, consecutivePolls: 2, clearCooldownMs: 60000, warnedPods: [],
    scaleOut: { enabled: true, inFlight: false, lastAt: null, cooldownMs: 600000, replicas: 4, maxReplicas: 16 }, ...extra,
  });
  const hotEval = (hot) => ({ samples: [{ pod: 'p0' }, { pod: 'p1' }], hot: hot ? [{ pod: 'p0', signal: 'own', reason: 'r' }] : [], uniform: false, averages: { own: 0.5 } });

  test('when one sample is hot and the next is not, then nothing is raised (a noisy sample never reconfigures)', () => {
    let s = initialMonitorState();
    const out = [];
    for (const hot of [true, false, true, false]) {
      const step = decideMonitorStep(s, hotEval(hot), options(0));
      s = step.state;
      out.push(...step.decisions);
    }
    expect(out).toEqual([]);
  });

  test('when hot for two polls, then raise once; when clear for the cooldown, then clear once', () => {
    let s = initialMonitorState();
    const at = (hot, now) => { const step = decideMonitorStep(s, hotEval(hot), options(now)); s = step.state; return step.decisions.map((d) => d.type); };
    expect(at(true, 0)).toEqual([]);
    expect(at(true, 15000)).toEqual(['raise']);
    expect(at(true, 30000)).toEqual([]);
    expect(at(false, 45000)).toEqual([]);
    expect(at(true, 60000)).toEqual([]); // back before the cooldown ended: still raised, no second raise
    expect(at(false, 75000)).toEqual([]);
    expect(at(false, 120000)).toEqual([]);
    expect(at(false, 135000)).toEqual(['clear']);
  });

  const starved = (hot) => ({
    samples: [{ pod: 'p0' }, { pod: 'p1' }], hot: hot ? [{ pod: 'p0', signal: 'interference', utilization: 0.9, hotOn: { interference: 0.9 }, reason: 'r' }] : [], uniform: false, averages: { interference: 0.5 },
  });
  const busyOwn = { samples: [{ pod: 'p0' }, { pod: 'p1' }], hot: [{ pod: 'p0', signal: 'own', utilization: 0.9, hotOn: { own: 0.9 }, reason: 'r' }], uniform: false, averages: { own: 0.5 } };
  test.each([
    ['starved 10 minutes after the monitor\'s warning', starved(true), 5, 600000, { long: false }, ['escalate']],
    ['starved a millisecond short of it', starved(true), 5, 599999, { long: false }, []],
    ['starved, but on its first hot poll after a clear one', starved(true), 0, 600000, { long: false }, []],
    ['clear 10 minutes after it', starved(false), 5, 600000, { long: false }, []],
    ['busy on its own load only', busyOwn, 5, 600000, { long: false }, []],
    ['starved, but the warning is long already (escalated once)', starved(true), 5, 900000, { long: true }, []],
    ['starved, with the escalation off (longMs 0)', starved(true), 5, 600000, { long: false, longMs: 0 }, []],
    ['starved, with no warning from the monitor (an operator\'s)', starved(true), 5, 600000, null, []],
  ])('when a pod is %s, then the monitor decides %j', (_, evaluation, streak, now, warning, types) => {
    const since = new Date(0).toISOString();
    const monitorWarnings = warning ? [{ pod: 'p0', since, long: warning.long }] : [];
    const previous = { pods: { p0: { hotStreak: streak, raised: Boolean(warning), clearSince: null, signal: 'interference' } }, uniformStreak: 0 };
    const step = decideMonitorStep(previous, evaluation, options(now, { warnedPods: ['p0'], monitorWarnings, longMs: warning?.longMs ?? 600000 }));
    expect(step.decisions.map((d) => d.type)).toEqual(types);
    if (types.length) expect(step.decisions[0]).toEqual({ type: 'escalate', pod: 'p0', signal: 'interference', heldSeconds: 600, reason: 'r; still hot 600 s after the monitor\'s warning (PERFWARNING_LONG_SECONDS 600)' });
  });

  test('when a monitor that never raised it finds the monitor\'s warning on a pod (a restart, a new leader), then it counts it as its own: it ends it after the cooldown', () => {
    let s = initialMonitorState();
    const monitorWarnings = [{ pod: 'p0', since: new Date(0).toISOString(), long: true }];
    const at = (now) => { const step = decideMonitorStep(s, starved(false), options(now, { warnedPods: ['p0'], monitorWarnings })); s = step.state; return step.decisions.map((d) => d.type); };
    expect(at(0)).toEqual([]);
    expect(at(30000)).toEqual([]);
    expect(at(60000)).toEqual(['clear']);
  });

  const utilEval = (u, signal = 'interference') => ({
    samples: [{ pod: 'p0' }, { pod: 'p1' }], hot: [{ pod: 'p0', signal, utilization: u, hotOn: { [signal]: u }, reason: 'r' }], uniform: false, averages: { [signal]: 0.5 },
  });

  test.each([
    ['at the immediate threshold', 0.95, 0.95, ['raise']],
    ['a node fully busy', 1, 0.95, ['raise']],
    ['hot but under the immediate threshold', 0.9, 0.95, []],
    ['fully busy with the immediate rule off (0)', 1, 0, []],
  ])('when a pod is %s on its first hot poll, then the monitor decides %j', (_, u, immediateUtilization, types) => {
    const step = decideMonitorStep(initialMonitorState(), utilEval(u), options(0, { immediateUtilization }));
    expect(step.decisions.map((d) => d.type)).toEqual(types);
    if (types.length) expect(step.decisions[0].reason).toBe(`r; raised after 1 of 2 polls (node ${Math.round(u * 100)}% busy, at or above ${Math.round(immediateUtilization * 100)}%)`);
  });

  test('when a pod is at its own CPU limit on its first hot poll, then nothing is raised yet (the immediate rule is for interference only)', () => {
    expect(decideMonitorStep(initialMonitorState(), utilEval(1, 'own'), options(0, { immediateUtilization: 0.95 })).decisions).toEqual([]);
  });

  test('when a pod is hot on its own load first and on interference at or above the threshold too, then it raises at once', () => {
    const evaluation = utilEval(0.85, 'own');
    evaluation.hot[0].hotOn.interference = 0.99;
    expect(decideMonitorStep(initialMonitorState(), evaluation, options(0, { immediateUtilization: 0.95 })).decisions.map((d) => d.type)).toEqual(['raise']);
  });

  test('when an immediate raise was made, then the next hot polls raise nothing more and a clear still needs the cooldown', () => {
    let s = initialMonitorState();
    const at = (u, now) => { const step = decideMonitorStep(s, u === null ? hotEval(false) : utilEval(u), options(now, { immediateUtilization: 0.95 })); s = step.state; return step.decisions.map((d) => d.type); };
    expect(at(1, 0)).toEqual(['raise']);
    expect(at(1, 2000)).toEqual([]);
    expect(at(null, 4000)).toEqual([]);
    expect(at(null, 64000)).toEqual(['clear']);
  });

  test('when the pod already has a warning (operator), then the monitor does not raise another', () => {
    let s = initialMonitorState();
    for (const now of [0, 15000, 30000]) s = decideMonitorStep(s, hotEval(true), options(now, { warnedPods: ['p0'] })).state;
    expect(s.pods.p0.raised).toBe(false);
  });

  test.each([
    [{}, 'scale-out'],
    [{ inFlight: true }, 'scale-out-suppressed'],
    [{ lastAt: 0 }, 'scale-out-suppressed'],
    [{ replicas: 16 }, 'scale-out-suppressed'],
    [{ enabled: false }, 'scale-out-suppressed'],
  ])('when uniform overload holds for two polls with %o, then %s', (scale, type) => {
    const uniform = { samples: [{ pod: 'p0' }], hot: [], uniform: true, averages: { own: 0.9 } };
    const first = decideMonitorStep(initialMonitorState(), uniform, options(10000));
    expect(first.decisions).toEqual([]);
    const o = options(20000);
    const second = decideMonitorStep(first.state, uniform, { ...o, scaleOut: { ...o.scaleOut, ...scale } });
    expect(second.decisions.map((d) => d.type)).toEqual([type]);
    if (type === 'scale-out') expect(second.decisions[0].to).toBe(5);
  });

  // What the prober reads: a poll's busy pods, on either signal, while the poll is recent.
  test.each([
    ['own load at the threshold', { own: 0.8, interference: 0.1 }, 0, ['p']],
    ['its node at the threshold', { own: 0.1, interference: 0.8 }, 0, ['p']],
    ['both below', { own: 0.79, interference: 0.5 }, 0, []],
    ['no figures', { own: null, interference: null }, 0, []],
    ['a poll three intervals old', { own: 0.9, interference: 0.1 }, 45000, ['p']],
    ['a poll older than three intervals', { own: 0.9, interference: 0.1 }, 45001, []],
  ])('busyPodsOf: %s', (_, figures, ageMs, expected) => {
    const lastPollAt = new Date(1000000).toISOString();
    expect(busyPodsOf({
      pods: [{ pod: 'p', ...figures }], lastPollAt, now: 1000000 + ageMs, pollIntervalMs: 15000, hotUtilization: 0.8,
    })).toEqual(expected);
  });

  test('busyPodsOf: before any poll, none', () => {
    expect(busyPodsOf({ pods: [], lastPollAt: null, now: 0, pollIntervalMs: 15000, hotUtilization: 0.8 })).toEqual([]);
  });

  // Pods created are not pods serving: on real kubelets the StatefulSet counted the new pod before its postStart ran.
  test.each([
    [{ to: 4, readyReplicas: 3, poststartRunning: false }, false, 'the new pod is not Ready yet'],
    [{ to: 4, readyReplicas: 4, poststartRunning: true }, false, 'its POSTSTART still adds the server'],
    [{ to: 4, readyReplicas: 4, poststartRunning: false }, true, 'Ready and added'],
    [{ to: 4, readyReplicas: 5, poststartRunning: false }, true, 'more Ready than asked (someone scaled further)'],
  ])('a scale-out with %o is over: %s (%s)', (state, settled) => {
    expect(scaleOutSettled(state)).toBe(settled);
  });
});
