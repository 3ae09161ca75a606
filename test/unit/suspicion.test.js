// Suspicion of a silently lost server: which servers are silent (pure), what is held and released (pure), the
// prober's rounds on fake connections, and the use-case's holds at fake gates, on injected clocks and timers.

import { EventEmitter } from 'node:events';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createSuspicionEvents } from '../../src/events/suspicion-events.js';
import { decideSuspicion, failedOverFrom, silentServers, tablesActedForBy } from '../../src/policy/suspicion.js';
import { createProber } from '../../src/rethinkdb/prober.js';

const silent = { child: () => silent, info() {}, warn() {}, debug() {} };
const shard = (primary, acting = [primary]) => ({ primary, replicas: ['a', 'b', 'c'], nonvoting: [], acting });
const cluster = {
  servers: ['a', 'b', 'c', 'd'].map((id) => ({ id, name: id, connected: true })),
  tables: [
    { id: 't1', db: 'ycsb', name: 'usertable', shards: [shard('a'), shard('b')] },
    { id: 't2', db: 'ycsb', name: 'accounts', shards: [shard('c')] },
    { id: 't3', db: 'app', name: 'orders', shards: [shard('b')] },
  ],
};

describe('the policy (pure)', () => {
  test('when a probe has waited suspectAfterMs or more, then its server is silent; one answered or waiting less is not', () => {
    const probes = [
      { serverId: 'a', waitingSince: null }, { serverId: 'b', waitingSince: 1000 }, { serverId: 'c', waitingSince: 1401 },
    ];
    expect(silentServers(probes, 2000, { suspectAfterMs: 600 })).toEqual(['b']);
    expect(silentServers(probes, 2001, { suspectAfterMs: 600 })).toEqual(['b', 'c']);
  });

  // A server at its CPU limit is throttled for the rest of each period and answers late, not never (real kubelets:
  // 150-375 ms at 200m of CPU): the monitor's busy servers wait busyAfterMs, directly and through other servers.
  test.each([
    ['not busy, direct probe 300 ms', false, 300, null, true],
    ['busy, direct probe 300 ms', true, 300, null, false],
    ['busy, direct probe 1000 ms', true, 1000, null, true],
    ['busy, most probes through others 300 ms', true, null, 300, false],
    ['busy, most probes through others 1000 ms', true, null, 1000, true],
    ['not busy, most probes through others 300 ms', false, null, 300, true],
  ])('when a server is %s, then it is silent: %s', (_, isBusy, direct, through, expected) => {
    const now = 10000;
    const via = (waited) => ({ viaId: `v${Math.random()}`, waitingSince: waited === null ? null : now - waited, unreachable: false, reachable: waited === null });
    const probes = [{ serverId: 'b', waitingSince: direct === null ? null : now - direct, vias: through === null ? [] : [via(through), via(through), via(null)] }];
    const busy = new Set(isBusy ? ['b'] : []);
    expect(silentServers(probes, now, { suspectAfterMs: 150, busyAfterMs: 1000, busy })).toEqual(expected ? ['b'] : []);
  });

  test('when a majority of a server\'s probes through other servers have waited or found it unreachable, then it is silent though its direct probe answers (a partition); one of three is not', () => {
    const via = (waitingSince, unreachable = false) => ({ viaId: `v${waitingSince}${unreachable}`, waitingSince, unreachable, reachable: false });
    const probes = [
      { serverId: 'a', waitingSince: null, vias: [via(1000), via(1000), via(null)] },
      { serverId: 'b', waitingSince: null, vias: [via(1000), via(null), via(null)] },
      { serverId: 'c', waitingSince: null, vias: [] },
      { serverId: 'd', waitingSince: null, vias: [via(null, true), via(1900), via(null)] },
      { serverId: 'e', waitingSince: null, vias: [via(null, true), via(1000), via(null)] },
    ];
    expect(silentServers(probes, 2000, { suspectAfterMs: 300 })).toEqual(['a', 'e']);
  });

  test('when only the manager does not reach a server (its direct probe waits, most other servers read its row), then it is not silent; before any via has answered, the direct probe decides', () => {
    const row = (viaId) => ({ viaId, waitingSince: null, unreachable: false, reachable: true });
    const probes = [
      { serverId: 'a', waitingSince: 1000, vias: [row('b'), row('c'), { viaId: 'd', waitingSince: 1000, unreachable: false, reachable: false }] },
      { serverId: 'e', waitingSince: 1000, vias: [{ viaId: 'b', waitingSince: null, unreachable: false, reachable: false }] },
    ];
    expect(silentServers(probes, 2000, { suspectAfterMs: 300 })).toEqual(['e']);
  });

  test('when two servers vanish together, then a third whose probes went through them is not silent: a via that is itself silent does not count', () => {
    const waiting = (viaId) => ({ viaId, waitingSince: 1000, unreachable: false, reachable: false });
    const row = (viaId) => ({ viaId, waitingSince: null, unreachable: false, reachable: true });
    const probes = [
      { serverId: 'c', waitingSince: 1000, vias: [waiting('d'), waiting('e'), waiting('f')] },
      { serverId: 'e', waitingSince: 1000, vias: [waiting('f'), waiting('g'), waiting('a')] },
      { serverId: 'b', waitingSince: null, vias: [waiting('c'), row('d'), waiting('e')] },
    ];
    expect(silentServers(probes, 2000, { suspectAfterMs: 300 })).toEqual(['c', 'e']);
  });

  test('when b is silent, then the tables it acts as primary for are held, and only those', () => {
    expect(tablesActedForBy(cluster, 'b')).toEqual([{ id: 't1', name: 'ycsb.usertable' }, { id: 't3', name: 'app.orders' }]);
    const decision = decideSuspicion({ suspects: ['b'], probed: 4, held: new Map(), cluster });
    expect(decision.hold).toEqual([{ serverId: 'b', tables: [{ id: 't1', name: 'ycsb.usertable' }, { id: 't3', name: 'app.orders' }], reason: expect.stringContaining('b has not answered') }]);
    expect(decision.release).toEqual([]);
  });

  test('when half the probed servers are silent at once, then nothing new is held (the manager\'s own network is likelier)', () => {
    const decision = decideSuspicion({ suspects: ['a', 'b'], probed: 4, held: new Map(), cluster });
    expect(decision.hold).toEqual([]);
    expect(decision.reason).toMatch(/2 of 4 servers are silent/);
  });

  test('when a held server answers again, or RethinkDB has dropped it, then its hold is released, saying which; one still silent and held is not held twice', () => {
    const held = new Map([['b', { tables: [] }], ['c', { tables: [] }], ['d', { tables: [] }]]);
    const decision = decideSuspicion({ suspects: ['c'], probed: 4, held, cluster, listed: (id) => id !== 'd' });
    expect(decision.release).toEqual([
      { serverId: 'b', how: 'answered', reason: 'b answers again' },
      { serverId: 'd', how: 'dropped', reason: 'RethinkDB no longer lists d: it dropped it and fails over' },
    ]);
    expect(decision.hold).toEqual([]);
  });

  test('when a silent server acts for no table, or RethinkDB already failed over from it, then nothing is held', () => {
    expect(decideSuspicion({ suspects: ['d'], probed: 4, held: new Map(), cluster }).hold).toEqual([]);
    expect(decideSuspicion({ suspects: ['b'], probed: 4, held: new Map(), cluster, settled: new Set(['b']) }).hold).toEqual([]);
  });

  test.each([
    [[[['a'], ['c']]], true, 'another server acts for every shard'],
    [[[['a'], ['b']]], false, 'b still acts'],
    [[[['a'], []]], false, 'a shard has no acting primary yet'],
    [[null], false, 'a table not read'],
  ])('when the held tables\' acting primaries are %j, then failedOverFrom(b) is %s (%s)', (acting, expected) => {
    expect(failedOverFrom('b', acting)).toBe(expected);
  });
});

// Probes answered at once, never (a silent server) or refused at once (a process gone), per server.
function fakeTargets(behaviour) {
  const calls = [];
  const targets = {
    calls,
    listServers: () => Object.keys(behaviour).map((name) => ({ serverId: name, name, addresses: [{ host: `${name}.test`, port: 28015 }] })),
    connections: [],
    connect: async (address) => {
      const name = address.host.split('.')[0];
      calls.push(`connect ${name}`);
      if (behaviour[name] === 'refused') throw new Error('ECONNREFUSED');
      // An EventEmitter, as the driver's connection is: 'error' with no listener would throw.
      const conn = Object.assign(new EventEmitter(), { name, close: async () => {} });
      targets.connections.push(conn);
      return conn;
    },
    probe: (conn) => {
      calls.push(`probe ${conn.name}`);
      return behaviour[conn.name] === 'silent' ? new Promise(() => {}) : Promise.resolve(1);
    },
  };
  return targets;
}

const flush = () => new Promise((resolve) => { setImmediate(resolve); });

describe('the prober (fake connections)', () => {
  test('when b stops answering, then b is silent after suspectAfterMs and onChange is called once; a refused connect is not silence', async () => {
    const clock = createVirtualClock();
    const behaviour = { a: 'answers', b: 'answers', c: 'refused' };
    const targets = fakeTargets(behaviour);
    const changes = [];
    const prober = createProber({
      ...targets, clock, logger: silent, intervalMs: 200, suspectAfterMs: 600, onChange: (s) => changes.push(s), timers: { setInterval: () => null, clearInterval: () => {} },
    });
    const stop = prober.start();
    for (let i = 0; i < 3; i += 1) { prober.round(); await flush(); clock.advance(200); }
    expect(prober.suspects()).toEqual([]);
    expect(prober.probed()).toBe(3);
    behaviour.b = 'silent';
    for (let i = 0; i < 3; i += 1) { prober.round(); await flush(); clock.advance(200); }
    expect(prober.suspects()).toEqual([]);
    prober.round();
    expect(prober.suspects()).toEqual(['b']);
    expect(changes).toEqual([['b']]);
    await flush();
    expect(prober.view().find((v) => v.server === 'c')).toMatchObject({ connected: false, lastError: 'ECONNREFUSED', waitingMs: null });
    // One probe in flight per server: b was probed once since it went silent.
    const bProbes = targets.calls.filter((c) => c === 'probe b').length;
    prober.round();
    expect(targets.calls.filter((c) => c === 'probe b').length).toBe(bProbes);
    await stop();
    expect(changes).toEqual([['b'], []]);
  });

  test('when the monitor finds b\'s pod busy, then b silent for suspectAfterMs is not suspected until busyAfterMs (matched by hostname)', async () => {
    const clock = createVirtualClock();
    const behaviour = { a: 'answers', b: 'silent', c: 'answers' };
    const targets = fakeTargets(behaviour);
    const listServers = () => targets.listServers().map((s) => ({ ...s, hostname: `pod-${s.name}` }));
    let busyPods = ['pod-b'];
    const prober = createProber({
      ...targets, listServers, clock, logger: silent, intervalMs: 100, suspectAfterMs: 300, busyAfterMs: 1000, busyPods: () => busyPods, timers: { setInterval: () => null, clearInterval: () => {} },
    });
    for (let i = 0; i < 6; i += 1) { prober.round(); await flush(); clock.advance(100); }
    prober.round();
    expect(prober.suspects()).toEqual([]);
    // No longer busy (or the monitor's poll grew old): the ordinary threshold, which b passed long ago.
    busyPods = [];
    prober.round();
    expect(prober.suspects()).toEqual(['b']);
    busyPods = ['pod-b'];
    prober.round();
    expect(prober.suspects()).toEqual([]);
    await flush();
    clock.advance(400);
    prober.round();
    expect(prober.suspects()).toEqual(['b']);
  });

  test('when a probed server\'s connection breaks (the driver emits error: EPIPE), then nothing is thrown and the next round connects again', async () => {
    const clock = createVirtualClock();
    const targets = fakeTargets({ a: 'answers', b: 'answers' });
    const prober = createProber({ ...targets, clock, logger: silent, intervalMs: 100, suspectAfterMs: 300, timers: { setInterval: () => null, clearInterval: () => {} } });
    prober.round(); await flush();
    const [first] = targets.connections;
    expect(() => first.emit('error', new Error('write EPIPE'))).not.toThrow();
    expect(prober.view().find((v) => v.server === first.name)).toMatchObject({ connected: false, lastError: 'write EPIPE' });
    await flush();
    prober.round(); await flush();
    expect(targets.calls.filter((c) => c === `connect ${first.name}`).length).toBe(2);
  });

  test('when RethinkDB no longer lists a silent server (it dropped it), then it is no longer probed nor silent', async () => {
    const clock = createVirtualClock();
    const behaviour = { a: 'answers', b: 'silent', c: 'answers' };
    const targets = fakeTargets(behaviour);
    const prober = createProber({ ...targets, clock, logger: silent, intervalMs: 200, suspectAfterMs: 600, timers: { setInterval: () => null, clearInterval: () => {} } });
    prober.round(); await flush(); clock.advance(700);
    prober.round();
    expect(prober.suspects()).toEqual(['b']);
    delete behaviour.b;
    prober.round();
    expect(prober.suspects()).toEqual([]);
    expect(prober.probed()).toBe(2);
  });
});

describe('the prober through the cluster (fake connections)', () => {
  // cut: the servers the others cannot reach over the cluster's links (their stats read through another hangs).
  function partitioned(cut, dropped = new Set()) {
    const behaviour = { a: 'answers', b: 'answers', c: 'answers', d: 'answers' };
    const targets = fakeTargets(behaviour);
    const via = [];
    const probeVia = (conn, serverId) => {
      via.push(`${serverId} via ${conn.name}`);
      if (dropped.has(serverId)) return Promise.resolve(serverId === 'b' ? null : { id: ['server', serverId], error: 'Timed out. Unable to retrieve stats.' });
      return cut.has(serverId) || cut.has(conn.name) ? new Promise(() => {}) : Promise.resolve({});
    };
    return { targets, probeVia, via };
  }

  test('when b is cut off from the other servers but not from the manager, then b is silent and no other server is', async () => {
    const clock = createVirtualClock();
    const { targets, probeVia, via } = partitioned(new Set(['b']));
    const prober = createProber({
      ...targets, probeVia, clock, logger: silent, intervalMs: 100, suspectAfterMs: 300, timers: { setInterval: () => null, clearInterval: () => {} },
    });
    prober.round(); await flush();
    prober.round(); await flush();
    // Each server is read through the three others.
    expect(via.filter((v) => v.startsWith('a via')).sort()).toEqual(['a via b', 'a via c', 'a via d']);
    clock.advance(300);
    prober.round();
    expect(prober.suspects()).toEqual(['b']);
    expect(prober.view().find((v) => v.server === 'b')).toMatchObject({ connected: true, waitingMs: 0, viasWaiting: 3 });
  });

  test('when server_status lists the servers in another order at each read, then each server is read through the same three others', async () => {
    const clock = createVirtualClock();
    const { targets, probeVia, via } = partitioned(new Set());
    const names = ['a', 'b', 'c', 'd', 'e'];
    let reversed = false;
    const listServers = () => (reversed ? [...names].reverse() : names).map((name) => ({ serverId: name, name, addresses: [{ host: `${name}.test`, port: 28015 }] }));
    const prober = createProber({
      ...targets, listServers, probeVia, clock, logger: silent, intervalMs: 100, suspectAfterMs: 300, timers: { setInterval: () => null, clearInterval: () => {} },
    });
    prober.round(); await flush();
    prober.round(); await flush();
    const first = new Set(via.filter((v) => v.startsWith('a via')));
    reversed = true;
    prober.round(); await flush();
    expect(new Set(via.filter((v) => v.startsWith('a via')))).toEqual(first);
    expect([...first].sort()).toEqual(['a via b', 'a via c', 'a via d']);
  });

  test('when the other servers answer that they no longer reach b (no row: they dropped it) or c (a row with an error), then both are still silent', async () => {
    const clock = createVirtualClock();
    const { targets, probeVia } = partitioned(new Set(), new Set(['b', 'c']));
    const prober = createProber({
      ...targets, probeVia, clock, logger: silent, intervalMs: 100, suspectAfterMs: 300, timers: { setInterval: () => null, clearInterval: () => {} },
    });
    // The first round connects, the second reads through the connections, the third sees the answers.
    prober.round(); await flush();
    prober.round(); await flush();
    prober.round();
    expect(prober.suspects()).toEqual(['b', 'c']);
    expect(prober.view().find((v) => v.server === 'b')).toMatchObject({ viasUnreachable: 3, viasLast: ['no row', 'no row', 'no row'] });
    expect(prober.view().find((v) => v.server === 'c')).toMatchObject({ viasUnreachable: 3, viasLast: Array(3).fill('Timed out. Unable to retrieve stats.') });
  });
});

describe('the suspicion use-case (fake gates)', () => {
  function setup({ suspects = ['b'], acting = { t1: [['a'], ['b']], t3: [['b']] } } = {}) {
    const clock = createVirtualClock();
    const calls = [];
    const state = { suspects, acting };
    const gates = {
      hold: async (tables, options) => {
        calls.push(['hold', tables, options]);
        return { held: [{ endpoint: 'g1', id: `h${calls.filter((c) => c[0] === 'hold').length}`, inFlight: 0 }], failed: [] };
      },
      release: async (held) => { calls.push(['release', held.map((h) => h.id)]); return []; },
    };
    const prober = { suspects: () => state.suspects, probed: () => 4, nameOf: (id) => id, listed: () => true };
    const store = {
      readActingPrimaries: async (id) => state.acting[id], readCluster: async () => cluster, steerAwayFrom: async (ids) => { calls.push(['steer', ids]); return { moved: false }; },
    };
    const marks = { drainingIds: async (also) => ['drained', ...also] };
    const events = createSuspicionEvents({
      prober, store, marks, gates, recentCluster: () => ({ at: clock.now(), cluster }), config: { suspicion: { holdTtlMs: 4000 } }, clock, logger: silent,
    });
    return { events, calls, state, clock };
  }

  test('when b is silent, then its tables are held at the gates with no drain, and looked at again until another server acts; then released', async () => {
    const { events, calls, state, clock } = setup();
    const first = await events.reconcileSuspicion();
    expect(first).toMatchObject({ action: 'hold', requeueAfterMs: 100 });
    // The manager's own connection leaves the suspect (and the drained servers stay avoided).
    expect(calls.filter((c) => c[0] !== 'steer')).toEqual([['hold', ['ycsb.usertable', 'app.orders'], { ttlMs: 4000, drainMs: 0 }]]);
    expect(calls.filter((c) => c[0] === 'steer')).toEqual([['steer', ['drained', 'b']]]);
    clock.advance(100);
    expect(await events.reconcileSuspicion()).toMatchObject({ action: 'none', requeueAfterMs: 100 });
    expect(events.view()).toEqual([{ server: 'b', tables: ['ycsb.usertable', 'app.orders'], heldMs: 100 }]);
    state.acting = { t1: [['a'], ['c']], t3: [['a']] };
    expect(await events.reconcileSuspicion()).toMatchObject({ requeueAfterMs: 0 });
    expect(calls.at(-1)).toEqual(['release', ['h1']]);
    expect(events.view()).toEqual([]);
    // Still silent (RethinkDB has not listed it gone yet): not held again.
    expect(await events.reconcileSuspicion()).toMatchObject({ action: 'none', requeueAfterMs: 0 });
    expect(calls.filter((c) => c[0] !== 'steer').length).toBe(2);
  });

  test('when b answers again, then its hold is released; when the ttl passes first, the gates end it, nothing is released, and b is not held again until it has answered', async () => {
    const answered = setup();
    await answered.events.reconcileSuspicion();
    answered.state.suspects = [];
    await answered.events.reconcileSuspicion();
    expect(answered.calls.map((c) => c[0])).toEqual(['steer', 'hold', 'steer', 'release']);
    const expired = setup();
    await expired.events.reconcileSuspicion();
    expired.clock.advance(4000);
    await expired.events.reconcileSuspicion();
    // Still silent at the ttl: not held again (a server only the manager cannot reach would be held for good).
    expired.clock.advance(1000);
    await expired.events.reconcileSuspicion();
    expect(expired.calls.map((c) => c[0]).filter((c) => c !== 'steer')).toEqual(['hold']);
    // Once it has answered, a new silence is held again.
    expired.state.suspects = [];
    await expired.events.reconcileSuspicion();
    expired.state.suspects = ['b'];
    await expired.events.reconcileSuspicion();
    expect(expired.calls.map((c) => c[0]).filter((c) => c !== 'steer')).toEqual(['hold', 'hold']);
  });
});
