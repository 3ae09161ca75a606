// Holds on the query gates around a write that moves primaries: the pure decisions (src/policy/query-holds.js) and
// their orchestration (src/actions/query-holds.js), with a virtual clock, a scripted store and recorded gates.

import pino from 'pino';
import { createQueryHolds } from '../../src/actions/query-holds.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import {
  decideHold, handoversOf, holdCameLate, holdEnding, holdMayEnd, holdTables,
} from '../../src/policy/query-holds.js';

const logger = pino({ level: 'silent' });
const shard = (primary, acting = [primary]) => ({ primary, replicas: ['a', 'b', 'c'], nonvoting: [], acting });
const table = (shards) => ({ id: 't1', db: 'ycsb', name: 'usertable', shards });

describe('handoversOf and holdMayEnd (pure)', () => {
  test('when a write changes two shards\' primaries and the replicas of a third, then the two are handovers', () => {
    const before = table([shard('a'), shard('b'), shard('c')]);
    const after = [shard('b'), shard('c'), { ...shard('c'), replicas: ['a', 'c', 'd'] }];
    expect(handoversOf(before, after)).toEqual([{ shard: 0, from: ['a'], to: 'b' }, { shard: 1, from: ['b'], to: 'c' }]);
    expect(holdTables(before)).toEqual(['ycsb.usertable']);
  });

  test('when another server than the configured primary still acts (a handover not over), then both are old primaries; the new one never is', () => {
    expect(handoversOf(table([shard('b', ['a'])]), [shard('c')])).toEqual([{ shard: 0, from: ['b', 'a'], to: 'c' }]);
    expect(handoversOf(table([shard('b', ['c'])]), [shard('c')])).toEqual([{ shard: 0, from: ['b'], to: 'c' }]);
  });

  test('when the configured primary is disconnected and another server acts (RethinkDB failed over), then naming the acting one is no handover; a connected configured primary still is', () => {
    const isConnected = (id) => id !== 'b';
    expect(handoversOf(table([shard('b', ['c'])]), [shard('c')], { isConnected })).toEqual([]);
    expect(handoversOf(table([shard('b', ['c'])]), [shard('a')], { isConnected })).toEqual([{ shard: 0, from: ['c'], to: 'a' }]);
    expect(handoversOf(table([shard('b', ['c'])]), [shard('c')], { isConnected: () => true })).toEqual([{ shard: 0, from: ['b'], to: 'c' }]);
  });

  test('when a shard had no primary configured and nobody acts, then its new one is no handover (no old primary to lose contact with)', () => {
    expect(handoversOf(table([shard(null, [])]), [shard('a')])).toEqual([]);
  });

  test.each([
    ['the old primary still acts', [['a']], false, '1 of 1 old primaries still act'],
    ['nobody acts yet (the election)', [[]], true, 'no old primary acts any more'],
    ['the new primary acts', [['b']], true, 'no old primary acts any more'],
    ['the table is gone', null, true, 'the table is gone'],
  ])('when %s, then holdMayEnd says whether the hold may end', (_, acting, end, reason) => {
    expect(holdMayEnd(acting, [{ shard: 0, from: ['a'], to: 'b' }])).toEqual({ end, reason });
  });

  // GATE_HOLD_UNTIL=new-acts: also until each new primary acts.
  const two = [{ shard: 0, from: ['a'], to: 'b' }, { shard: 1, from: ['b'], to: 'c' }];
  test.each([
    ['an old primary still acts', [['a'], ['c']], false, '1 of 2 old primaries still act'],
    ['nobody acts yet (the election)', [[], []], false, 'no old primary acts; 2 of 2 new primaries do not act yet'],
    ['one new primary acts, the other shard has none yet', [['b'], []], false, 'no old primary acts; 1 of 2 new primaries do not act yet'],
    ['every new primary acts', [['b'], ['c']], true, 'no old primary acts any more, and every new one does'],
    ['the table is gone', null, true, 'the table is gone'],
  ])('when holding until the new primaries act and %s, then holdMayEnd says whether the hold may end', (_, acting, end, reason) => {
    expect(holdMayEnd(acting, two, { until: 'new-acts' })).toEqual({ end, reason });
  });
});

describe('holdEnding (pure)', () => {
  const handovers = [{ shard: 0, from: ['a'], to: 'b' }];
  const late = 'no old primary acts any more by the time the hold had answered: it came too late to be sure no write was in flight then (GATE_HOLD_DELAY_MS)';
  test.each([
    ['the old primary still acts, a hold before the write', [['a']], false, 0, null],
    ['the old primary still acts on the first read after the write', [['a']], true, 0, null],
    ['the handover is over on the first read, a hold before the write', [['b']], false, 0, { how: 'handed_over', reason: 'no old primary acts any more' }],
    ['the handover is over on the first read after the write (too late to be sure)', [['b']], true, 0, { how: 'late', reason: late }],
    ['nobody acts yet on the first read after the write', [[]], true, 0, { how: 'late', reason: late }],
    ['the handover is over on a later read after the write', [['b']], true, 3, { how: 'handed_over', reason: 'no old primary acts any more' }],
    ['the table is gone, a hold before the write', null, false, 2, { how: 'handed_over', reason: 'the table is gone' }],
  ])('when %s, then holdEnding says how the hold ends', (_, acting, afterWrite, read, expected) => {
    expect(holdEnding(acting, handovers, { late: holdCameLate(acting, handovers, { afterWrite, read }) })).toEqual(expected);
  });

  test('when holding until the new primary acts and the first read finds the old one gone already, then the hold holds on and ends late', () => {
    const until = 'new-acts';
    expect(holdCameLate([[]], handovers, { afterWrite: true, read: 0 })).toBe(true);
    expect(holdEnding([[]], handovers, { until, late: true })).toBeNull();
    expect(holdEnding([['b']], handovers, { until, late: true })).toEqual({
      how: 'late', reason: expect.stringContaining('came too late'),
    });
    // Not late: the old primary still acted at the first read.
    expect(holdCameLate([['a']], handovers, { afterWrite: true, read: 0 })).toBe(false);
    expect(holdEnding([['b']], handovers, { until })).toEqual({ how: 'handed_over', reason: 'no old primary acts any more, and every new one does' });
  });
});

describe('decideHold (pure)', () => {
  const handovers = [{ shard: 0, from: ['a'], to: 'b' }];
  test.each([
    ['the write moves no primary', [], 10000, { hold: false, skipped: null }],
    ['there is no deadline', handovers, null, { hold: true, skipped: null }],
    ['the deadline leaves twice a hold\'s time', handovers, 1600, { hold: true, skipped: null }],
    ['the deadline leaves less than twice a hold\'s time', handovers, 1599.6, { hold: false, skipped: 'the deadline leaves 1600 ms, too little for a hold' }],
  ])('when %s, then %j', (_, moves, remainingMs, expected) => {
    expect(decideHold({ handovers: moves, remainingMs, holdLimitMs: 800 })).toEqual(expected);
  });
});

describe('createQueryHolds', () => {
  // Gates that record calls; reads: the clusters the store returns, one per read (the last one repeats).
  function setUp({
    reads = [], held = [{ endpoint: 'g1:9180', id: 'h1', inFlight: 2 }], failed = [], delayMs = 0, until = 'old-gone',
  } = {}) {
    const clock = createVirtualClock();
    const calls = [];
    const gates = {
      prepare: async () => { calls.push(['prepare', clock.now()]); return { secret: 'token', list: held.map((h) => h.endpoint) }; },
      hold: async (tables, options, prepared = null) => { calls.push(['hold', tables, options, clock.now(), prepared?.list ?? null]); return { held, failed }; },
      release: async (list) => { calls.push(['release', list.map((h) => h.id), clock.now()]); return []; },
      holdLimitMs: (drainMs) => drainMs + 500,
    };
    let i = 0;
    const store = { readActingPrimaries: async () => { const c = reads[Math.min(i, reads.length - 1)]; i += 1; if (c instanceof Error) throw c; return c; } };
    const metrics = createMetrics();
    const holds = createQueryHolds({
      gates, store, clock, logger, metrics, ttlMs: 2000, drainMs: 300, pollMs: 20, delayMs, until,
    });
    return { clock, calls, holds, metrics };
  }
  const before = table([shard('a'), shard('b')]);
  const moved = [shard('b'), shard('b')];
  const count = async (metrics, how) => (await metrics.registry.getSingleMetric('rethinkdb_manager_query_holds_total').get()).values.find((v) => v.labels.how === how)?.value ?? 0;

  test('when a write moves a primary, then the table is held before the write and released once the old primary no longer acts', async () => {
    const { calls, holds, metrics } = setUp({ reads: [[['a'], ['b']], [['a'], ['b']], [[], ['b']]] });
    const order = [];
    const { result, hold } = await holds.around(before, moved, async () => { order.push(calls.length); return 'written'; });
    expect(result).toBe('written');
    expect(hold).toEqual({ gates: 1, unreachable: [], inFlight: 2, tookMs: 0 });
    expect(calls[0]).toEqual(['hold', ['ycsb.usertable'], { ttlMs: 2000, drainMs: 300 }, expect.any(Number), null]);
    expect(order).toEqual([1]); // the write came after the hold
    await holds.idle();
    expect(calls[1][0]).toBe('release');
    expect(calls[1][1]).toEqual(['h1']);
    expect(calls[1][2] - calls[0][3]).toBe(40); // two polls at 20 ms saw the old primary acting
    expect(await count(metrics, 'handed_over')).toBe(1);
  });

  test('when GATE_HOLD_DELAY_MS is 200, then the gates are read before the write, the hold is taken 200 ms after it returned, and released once the old primary no longer acts', async () => {
    const { calls, clock, holds, metrics } = setUp({ delayMs: 200, reads: [[['a'], ['b']], [[], ['b']]] });
    let wroteAt = null;
    const { result, hold } = await holds.around(before, moved, async () => { wroteAt = clock.now(); expect(calls.map((c) => c[0])).toEqual(['prepare']); return 'written'; });
    expect(result).toBe('written');
    expect(hold).toEqual({ gates: 1, unreachable: [], inFlight: 2, tookMs: 0, afterWriteMs: 200 });
    expect(calls[1]).toEqual(['hold', ['ycsb.usertable'], { ttlMs: 2000, drainMs: 300 }, wroteAt + 200, ['g1:9180']]);
    await holds.idle();
    expect(calls[2]).toEqual(['release', ['h1'], wroteAt + 220]);
    expect(await count(metrics, 'handed_over')).toBe(1);
  });

  test('when GATE_HOLD_UNTIL is new-acts, then the hold lasts past the old primary\'s end until the new one acts', async () => {
    const { calls, clock, holds, metrics } = setUp({ delayMs: 200, until: 'new-acts', reads: [[['a'], ['b']], [[], ['b']], [[], ['b']], [['b'], ['b']]] });
    let wroteAt = null;
    await holds.around(before, moved, async () => { wroteAt = clock.now(); return 'written'; });
    await holds.idle();
    // Read 0: the old primary acts; 1 and 2: nobody acts; 3: the new one does.
    expect(calls[2]).toEqual(['release', ['h1'], wroteAt + 200 + 60]);
    expect(await count(metrics, 'handed_over')).toBe(1);
  });

  test('when GATE_HOLD_UNTIL is new-acts and the first read finds the old primary gone already, then the hold lasts until the new one acts and is counted late', async () => {
    const { calls, clock, holds, metrics } = setUp({ delayMs: 200, until: 'new-acts', reads: [[[], ['b']], [[], ['b']], [['b'], ['b']]] });
    let wroteAt = null;
    await holds.around(before, moved, async () => { wroteAt = clock.now(); return 'written'; });
    await holds.idle();
    expect(calls[2]).toEqual(['release', ['h1'], wroteAt + 200 + 40]);
    expect(await count(metrics, 'late')).toBe(1);
    expect(await count(metrics, 'handed_over')).toBe(0);
  });

  test('when a hold taken after the write finds at its first read that no old primary acts, then it is counted late', async () => {
    const { calls, holds, metrics } = setUp({ delayMs: 200, reads: [[[], ['b']]] });
    await holds.around(before, moved, async () => 'written');
    await holds.idle();
    expect(calls.map((c) => c[0])).toEqual(['prepare', 'hold', 'release']);
    expect(await count(metrics, 'late')).toBe(1);
    expect(await count(metrics, 'handed_over')).toBe(0);
  });

  test('when GATE_HOLD_DELAY_MS is above 0 and the write fails, then no hold is asked for', async () => {
    const { calls, holds } = setUp({ delayMs: 200 });
    await expect(holds.around(before, moved, async () => { throw new Error('rejected'); })).rejects.toThrow('rejected');
    expect(calls.map((c) => c[0])).toEqual(['prepare']);
  });

  test('when GATE_HOLD_DELAY_MS is above 0, then the deadline must leave twice the hold and the delay', async () => {
    const { calls, holds } = setUp({ delayMs: 300 });
    // Twice (300 drain + 500 answer + 300 delay) = 2,200 ms: 2,000 is too little (without the delay's share it would do).
    const { hold } = await holds.around(before, moved, async () => 'written', { deadline: { remainingMs: () => 2000 } });
    expect(hold).toEqual({ skipped: 'the deadline leaves 2000 ms, too little for a hold' });
    expect(calls).toEqual([]);
  });

  test('when the old primary acts until the ttl, then the hold is released at the ttl', async () => {
    const { calls, holds, metrics } = setUp({ reads: [[['a'], ['b']]] });
    await holds.around(before, moved, async () => 'written');
    await holds.idle();
    expect(calls[1][2] - calls[0][3]).toBeGreaterThanOrEqual(2000);
    expect(await count(metrics, 'ttl')).toBe(1);
  });

  test('when the reads fail, then the hold still ends at its ttl', async () => {
    const { calls, holds, metrics } = setUp({ reads: [new Error('RethinkDB unavailable')] });
    await holds.around(before, moved, async () => 'written');
    await holds.idle();
    expect(calls.map((c) => c[0])).toEqual(['hold', 'release']);
    expect(calls[1][2] - calls[0][3]).toBeGreaterThanOrEqual(2000);
    expect(await count(metrics, 'ttl')).toBe(1);
  });

  test('when the action\'s deadline leaves less than two holds\' time, then the write goes ahead without a hold, and the report says why', async () => {
    const { calls, holds } = setUp();
    const { result, hold } = await holds.around(before, moved, async () => 'written', { deadline: { remainingMs: () => 1000 } });
    expect(result).toBe('written');
    expect(hold).toEqual({ skipped: 'the deadline leaves 1000 ms, too little for a hold' });
    expect(calls).toEqual([]);
  });

  test('when the write fails, then the hold is released at once and the error is the write\'s', async () => {
    const { calls, holds, metrics } = setUp();
    await expect(holds.around(before, moved, async () => { throw new Error('rejected'); })).rejects.toThrow('rejected');
    expect(calls.map((c) => c[0])).toEqual(['hold', 'release']);
    expect(await count(metrics, 'write_failed')).toBe(1);
  });

  test('when a write moves no primary, then no gate is asked', async () => {
    const { calls, holds } = setUp();
    const { hold } = await holds.around(before, [shard('a'), { ...shard('b'), replicas: ['b', 'c', 'd'] }], async () => 'written');
    expect(hold).toBeNull();
    expect(calls).toEqual([]);
  });

  test('when no gate could be held, then the write goes ahead and the report says which gate failed', async () => {
    const { calls, holds, metrics } = setUp({ held: [], failed: [{ endpoint: 'g1:9180', error: '401: a valid bearer token is required' }] });
    const { result, hold } = await holds.around(before, moved, async () => 'written');
    expect(result).toBe('written');
    expect(hold).toMatchObject({ gates: 0, unreachable: [{ endpoint: 'g1:9180', error: expect.stringMatching(/401/) }] });
    expect(calls.map((c) => c[0])).toEqual(['hold']);
    expect(await count(metrics, 'not_taken')).toBe(1);
  });

  test('when the gates\' token is not there yet (holds off), then the write goes ahead with no hold and nothing counted', async () => {
    const clock = createVirtualClock();
    const metrics = createMetrics();
    const holds = createQueryHolds({
      gates: { hold: async () => ({ held: [], failed: [], off: 'no token at /t' }), release: async () => [], holdLimitMs: (d) => d + 500 }, store: {}, clock, logger, metrics, ttlMs: 2000, drainMs: 300,
    });
    expect(await holds.around(before, moved, async () => 'written')).toEqual({ result: 'written', hold: null });
    expect((await metrics.registry.getSingleMetric('rethinkdb_manager_query_holds_total').get()).values).toEqual([]);
  });

  test('when the manager starts leading, then check() asks the gates once, and the gauge says what a hold would meet; later holds update it', async () => {
    const gauge = async (metrics) => Object.fromEntries((await metrics.registry.getSingleMetric('rethinkdb_manager_query_gates').get()).values.map((v) => [v.labels.state, v.value]));
    const clock = createVirtualClock();
    const metrics = createMetrics();
    const seen = [];
    const capture = pino({ level: 'info' }, { write: (line) => seen.push(JSON.parse(line)) });
    let answer = { reached: ['g1:9180'], failed: [{ endpoint: 'g2:9180', error: '401: a valid bearer token is required' }] };
    const gates = {
      check: async () => answer,
      hold: async () => ({ held: [{ endpoint: 'g1:9180', id: 'h1', inFlight: 0 }, { endpoint: 'g2:9180', id: 'h2', inFlight: 0 }], failed: [] }),
      release: async () => [],
      holdLimitMs: (d) => d + 500,
    };
    const holds = createQueryHolds({
      gates, store: { readActingPrimaries: async () => [[], ['b']] }, clock, logger: capture, metrics, ttlMs: 2000, drainMs: 300,
    });
    expect(await holds.check()).toEqual(answer);
    expect(await gauge(metrics)).toEqual({ reached: 1, failed: 1 });
    expect(seen.at(-1)).toMatchObject({ level: 40, failed: answer.failed, msg: expect.stringMatching(/could not be asked/) });
    await holds.around(before, moved, async () => 'written');
    await holds.idle();
    expect(await gauge(metrics)).toEqual({ reached: 2, failed: 0 });
    answer = { reached: [], failed: [], off: 'no token at /t' };
    await holds.check();
    expect(seen.at(-1)).toMatchObject({ level: 30, reason: 'no token at /t', msg: 'query gate holds are off' });
    gates.check = async () => { throw new Error('boom'); };
    expect(await holds.check()).toBeNull();
    expect(seen.at(-1)).toMatchObject({ level: 40, err: 'boom' });
    expect(await createQueryHolds({ gates: null, store: {}, clock, logger, ttlMs: 2000, drainMs: 300 }).check()).toBeNull();
  });

  test('when holds are off (no gates), then around() only writes', async () => {
    const holds = createQueryHolds({
      gates: null, store: {}, clock: createVirtualClock(), logger, ttlMs: 2000, drainMs: 300,
    });
    expect(await holds.around(before, moved, async () => 'written')).toEqual({ result: 'written', hold: null });
    expect(holds.enabled).toBe(false);
  });
});
