// The latency trigger: its policy (pure: percentiles, windows, the baseline, raise and clear, per signal), the prober's
// answer times and disk probes, the disk probes' tables (pure), and the trigger's use of all on fakes, on injected clocks.

import { EventEmitter } from 'node:events';
import request from 'supertest';
import { createVirtualClock } from '../../src/lib/clock.js';
import { normalizeSystemTables, withoutProbeTables } from '../../src/cluster/cluster-model.js';
import { PROBE_TABLES_EVERY, createLatencyTrigger } from '../../src/monitor/latency-trigger.js';
import { planProbeTables, probeTableOf } from '../../src/policy/disk-probe.js';
import {
  BASELINE_WEIGHT, LEARN_BELOW, MIN_SAMPLES, dataMoving, decideLatencyStep, forgetRaise, initialLatencyState, percentile, summarizeLatencyWindow,
} from '../../src/policy/latency.js';
import { createProber } from '../../src/rethinkdb/prober.js';
import { buildOpenApiDocument } from '../../src/routes/openapi.js';
import { createSandboxHarness } from '../helpers/harness.js';
import { createResponseChecker } from '../helpers/openapi-responses.js';

const quiet = { child: () => quiet, info() {}, warn() {}, debug() {} };
const SETTINGS = {
  factor: 4, minDeltaMs: 5, consecutiveWindows: 2, warmupWindows: 3, clearCooldownMs: 10000,
};
// One window's summary for servers a, b, c (pods rethinkdb-a...), each judged at the value given (its p90; p50 at half
// of it), on the reply signal; a key `a:disk` gives server a's disk signal; null: no verdict.
const window = (values) => Object.entries(values).map(([key, valueMs]) => {
  const [id, signal = 'reply'] = key.split(':');
  return {
    serverId: id, name: `rethinkdb_${id}`, pod: `rethinkdb-${id}`, signal, n: valueMs === null ? 0 : 20, quantile: signal === 'disk' ? 0.5 : 0.9, stalled: false,
    valueMs, maxMs: valueMs, p50Ms: valueMs === null ? null : valueMs / 2, p90Ms: valueMs,
  };
});
const reply = (state, id) => state.servers[id].signals.reply;
// Runs windows one second apart from `state`; returns the last step and every decision.
function run(windows, options = {}, state = initialLatencyState(), start = 0) {
  let step = { state };
  const decisions = [];
  windows.forEach((w, i) => {
    step = decideLatencyStep(step.state, window(w), { ...SETTINGS, now: start + i * 1000, ...options });
    decisions.push(...step.decisions);
  });
  return { ...step, decisions };
}
const learned = (n = 3) => Array.from({ length: n }, () => ({ a: 1, b: 1, c: 1 }));

describe('the policy (pure)', () => {
  test.each([
    [[], 0.9, null],
    [[5], 0.9, 5],
    [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.9, 9],
    [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 0.5, 5],
    [[10, 1, 3], 0.5, 3],
  ])('percentile(%j, %d) is %j (nearest rank)', (values, q, expected) => {
    expect(percentile(values, q)).toBe(expected);
  });

  test.each([
    ['ten replies', 'reply', [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], null, {
      n: 10, quantile: 0.9, valueMs: 9, maxMs: 10, stalled: false,
    }],
    ['four disk writes, one slow: judged by their median, so one slow write is no slow window', 'disk', [2, 3, 150, 2], null, {
      n: 4, quantile: 0.5, valueMs: 2, maxMs: 150,
    }],
    ['fewer answers than MIN_SAMPLES: no value, the slowest kept', 'reply', [1, 30], null, { n: 2, valueMs: null, maxMs: 30 }],
    ['a probe waiting less than the window: not counted in the value (its answer counts, once, when it comes)', 'reply', [1, 1, 1, 1], 400, {
      valueMs: 1, maxMs: 400, stalled: false,
    }],
    ['a probe waiting the whole window or more: stalled, the value at least that wait', 'disk', [], 1200, {
      n: 0, valueMs: 1200, maxMs: 1200, stalled: true,
    }],
  ])('when a window holds %s, then it is summarized as documented', (_, signal, samples, waitingMs, expected) => {
    const [entry] = summarizeLatencyWindow([{
      serverId: 'a', name: 'a', pod: 'pa', signal, samples, waitingMs,
    }], { windowMs: 1000 });
    expect(entry).toMatchObject({ serverId: 'a', signal, ...expected });
    expect(MIN_SAMPLES).toBe(3);
  });

  test('when a server answers within its baseline, then the baseline learns each window by BASELINE_WEIGHT, and nothing is raised', () => {
    const { state, decisions } = run([{ a: 1, b: 1, c: 1 }, { a: 3, b: 1, c: 1 }]);
    expect(reply(state, 'a')).toMatchObject({ baselineMs: 1 + BASELINE_WEIGHT * 2, learned: 2, anomalous: false });
    expect(decisions).toEqual([]);
  });

  test('when, after the warm-up, a window is at LEARN_BELOW times the baseline or more but not anomalous, then it is not learned: a slow onset cannot lift the baseline ahead of itself', () => {
    const { state } = run([...learned(), { a: 3, b: 1, c: 1 }, { a: 3.5, b: 1, c: 1 }]);
    expect(reply(state, 'a')).toMatchObject({ baselineMs: 1, learned: 3, anomalous: false });
    const below = run([...learned(), { a: LEARN_BELOW * 0.95, b: 1, c: 1 }]);
    expect(reply(below.state, 'a').learned).toBe(4);
    const onset = run([...learned(), { a: 3, b: 1, c: 1 }, { a: 3.9, b: 1, c: 1 }, { a: 6, b: 1, c: 1 }, { a: 8, b: 1, c: 1 }]);
    expect(onset.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-a' })]);
  });

  test('when the baseline has not seen warmupWindows windows yet, then no window is anomalous', () => {
    const { state, decisions } = run([{ a: 1, b: 1, c: 1 }, { a: 50, b: 1, c: 1 }, { a: 50, b: 1, c: 1 }]);
    expect(decisions).toEqual([]);
    expect(reply(state, 'a').learned).toBe(3); // it learned them: no verdict of anomaly before the warm-up ends
  });

  test('when one server answers at factor x its baseline and minDeltaMs above for consecutiveWindows windows, then its pod is raised once, with its evidence', () => {
    const { state, decisions } = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 42, b: 1.2, c: 1 }, { a: 45, b: 1, c: 1 }]);
    expect(decisions).toEqual([expect.objectContaining({
      type: 'raise', pod: 'rethinkdb-a', serverId: 'a',
      evidence: {
        signal: 'reply', valueMs: 42, quantile: 0.9, p90Ms: 42, p50Ms: 21, probes: 20, baselineMs: 1, windows: 2,
      },
      baselines: { reply: 1 },
    })]);
    expect(decisions[0].reason).toMatch(/rethinkdb_a answers the manager's probes in 42 ms \(p90 of 20 in the last window\), 42.0x its baseline of 1.0 ms for 2 windows in a row \(thresholds 4x and \+5 ms\)/);
    expect(state.servers.a.raised).toBe(true);
    expect(reply(state, 'a').baselineMs).toBe(1); // the anomaly is not learned
  });

  test.each([
    ['under the factor', 3.9, false],
    ['at the factor but less than minDeltaMs above', 5.9, false],
    ['at the factor and minDeltaMs above', 6, true],
  ])('when a server answers %s (%d ms, its baseline 1 ms), then it is anomalous: %s', (_, p90, expected) => {
    const { state } = run([...learned(), { a: p90, b: 1, c: 1 }]);
    expect(reply(state, 'a').anomalous).toBe(expected);
  });

  test('when an anomaly lasts fewer than consecutiveWindows windows, then nothing is raised and the streak starts again', () => {
    const { state, decisions } = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 1, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    expect(decisions).toEqual([]);
    expect(reply(state, 'a').streak).toBe(1);
  });

  test('when half the servers with a verdict or more are anomalous at once, then nothing is raised, and it says why', () => {
    const { decisions, held } = run([...learned(), { a: 40, b: 40, c: 1 }, { a: 40, b: 40, c: 1 }]);
    expect(decisions).toEqual([]);
    expect(held).toBe("2 of 3 servers are slow at once on the reply probe: load everywhere, a shared resource, or the manager's own host; nothing raised on it");
  });

  test('when a server has no verdict, then it counts neither way: one anomalous of two with verdicts holds everything', () => {
    const { decisions, held } = run([...learned(), { a: 40, b: 1, c: null }, { a: 40, b: 1, c: null }]);
    // c without a verdict: a and b judge; a alone slow of two is half.
    expect(decisions).toEqual([]);
    expect(held).toMatch(/^1 of 2 servers/);
  });

  test('when data moves, then nothing is raised, the baseline does not learn, and streaks start again after it', () => {
    const before = run(learned());
    const { state, decisions, held } = run([{ a: 40, b: 2, c: 1 }, { a: 40, b: 2, c: 1 }], { moving: 'a backfill' }, before.state);
    expect(decisions).toEqual([]);
    expect(held).toBe('a backfill; nothing raised while data moves');
    expect(reply(state, 'b').baselineMs).toBe(1);
    expect(reply(state, 'a').streak).toBe(0);
    const after = run([{ a: 40, b: 1, c: 1 }], {}, state, 10000);
    expect(after.decisions).toEqual([]);
  });

  test('when the server was warned by another source, then its baseline does not learn; the others\' do', () => {
    const { state } = run([{ a: 1, b: 1, c: 1 }, { a: 1.5, b: 1, c: 1 }], { warnedPods: ['rethinkdb-a'] });
    expect(reply(state, 'a')).toMatchObject({ baselineMs: null, learned: 0 });
    expect(reply(state, 'b')).toMatchObject({ baselineMs: 1, learned: 2 });
  });

  test.each([
    ['its pod already has a warning (of any source)', { warnedPods: ['rethinkdb-a'] }],
    ['the prober finds it silent (the suspicion acts)', { silent: new Set(['a']) }],
  ])('when %s, then it is not raised', (_, options) => {
    const { decisions } = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }], options);
    expect(decisions).toEqual([]);
  });

  test('when a server has no pod name (no hostname), then it is not raised', () => {
    const before = run(learned());
    const w = window({ a: 40, b: 1, c: 1 }).map((x) => (x.serverId === 'a' ? { ...x, pod: null } : x));
    const one = decideLatencyStep(before.state, w, { ...SETTINGS, now: 5000 });
    const two = decideLatencyStep(one.state, w, { ...SETTINGS, now: 6000 });
    expect(two.decisions).toEqual([]);
  });

  test('when a raised server answers in time again for clearCooldownMs, then its warning is cleared, and not before', () => {
    const raised = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    const early = run([{ a: 1, b: 1, c: 1 }, { a: 1, b: 1, c: 1 }], {}, raised.state, 10000);
    expect(early.decisions).toEqual([]);
    expect(early.state.servers.a).toMatchObject({ raised: true, clearSince: 10000 });
    expect(reply(early.state, 'a').baselineMs).toBe(1);
    const late = run([{ a: 1, b: 1, c: 1 }], {}, early.state, 20000);
    expect(late.decisions).toEqual([]); // no warning of ours on record (the fake keeps none): nothing to end
    expect(late.state.servers.a).toMatchObject({ raised: false, clearSince: null });
    const withWarning = run([{ a: 1, b: 1, c: 1 }], { ownWarnings: [{ pod: 'rethinkdb-a' }] }, early.state, 20000);
    expect(withWarning.decisions).toEqual([{
      type: 'clear', pod: 'rethinkdb-a', serverId: 'a', reason: 'rethinkdb_a answers in 1.0 ms, under the thresholds for 10 s (cooldown 10 s)',
    }]);
    expect(late.state.servers.a).toMatchObject({ raised: false, clearSince: null });
  });

  test('when a raised server is anomalous again during its cooldown, then the cooldown starts over', () => {
    const raised = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    const { state, decisions } = run([{ a: 1, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }, { a: 1, b: 1, c: 1 }], {}, raised.state, 10000);
    expect(decisions).toEqual([]);
    expect(state.servers.a.clearSince).toBe(12000);
  });

  test('when the trigger\'s own warning is on a pod a new leader does not remember, then it judges against the warning\'s baselines: still slow, it stays; in time again, it is cleared', () => {
    const ownWarnings = [{ pod: 'rethinkdb-a', baselines: { reply: 1 } }];
    const stillSlow = run(Array.from({ length: 40 }, () => ({ a: 40, b: 1, c: 1 })), { ownWarnings, clearCooldownMs: 1000 });
    expect(stillSlow.decisions).toEqual([]);
    expect(stillSlow.state.servers.a).toMatchObject({ raised: true });
    expect(reply(stillSlow.state, 'a')).toMatchObject({ baselineMs: 1, anomalous: true });
    const fast = run([{ a: 1, b: 1, c: 1 }, { a: 1, b: 1, c: 1 }], { ownWarnings, clearCooldownMs: 1000 }, stillSlow.state, 50000);
    expect(fast.decisions).toEqual([expect.objectContaining({ type: 'clear', pod: 'rethinkdb-a' })]);
  });

  test('when a new leader finds a warning of ours with no baselines, then it is not cleared before a baseline is learned, and the warned server learns none', () => {
    const { decisions, state } = run(Array.from({ length: 20 }, () => ({ a: 40, b: 1, c: 1 })), { ownWarnings: [{ pod: 'rethinkdb-a' }], clearCooldownMs: 1000 });
    expect(decisions).toEqual([]);
    expect(reply(state, 'a')).toMatchObject({ baselineMs: null, learned: 0 });
  });

  test('when an operator ends the warning while the server is still slow, then the trigger does not raise it again until the server has been in time for the cooldown', () => {
    const raised = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    const slow = run(Array.from({ length: 5 }, () => ({ a: 40, b: 1, c: 1 })), {}, raised.state, 10000);
    expect(slow.decisions).toEqual([]);
    const recovered = run([{ a: 1, b: 1, c: 1 }, { a: 1, b: 1, c: 1 }], { clearCooldownMs: 1000 }, slow.state, 20000);
    expect(recovered.state.servers.a.raised).toBe(false);
    const again = run([{ a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }], {}, recovered.state, 30000);
    expect(again.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-a' })]);
  });

  test('when a raise failed (forgetRaise), then the next anomalous window raises again', () => {
    const raised = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    const forgotten = forgetRaise(raised.state, 'a');
    expect(forgotten.servers.a.raised).toBe(false);
    expect(run([{ a: 40, b: 1, c: 1 }], {}, forgotten, 10000).decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-a' })]);
    expect(forgetRaise(raised.state, 'zz')).toBe(raised.state);
  });

  test('when a raised server is missing from a window, then its state is kept; a server never raised is forgotten', () => {
    const raised = run([...learned(), { a: 40, b: 1, c: 1 }, { a: 40, b: 1, c: 1 }]);
    const { state, decisions } = run([{ b: 1, c: 1 }], {}, raised.state, 10000);
    expect(decisions).toEqual([]);
    expect(state.servers.a).toMatchObject({ raised: true });
    const after = run([{ a: 1, b: 1 }], {}, state, 11000);
    expect(after.state.servers.c).toBeUndefined();
  });

  test('when one server\'s disk probe slows down while its replies do not, then it is raised on the disk signal, with the disk probe in its reason', () => {
    const steady = { a: 1, b: 1, c: 1, 'a:disk': 2, 'b:disk': 2, 'c:disk': 2 };
    const slowDisk = { ...steady, 'a:disk': 180 };
    const { state, decisions } = run([steady, steady, steady, slowDisk, slowDisk]);
    expect(decisions).toEqual([expect.objectContaining({
      type: 'raise', pod: 'rethinkdb-a', evidence: expect.objectContaining({ signal: 'disk', valueMs: 180, baselineMs: 2 }), baselines: { reply: 1, disk: 2 },
    })]);
    expect(decisions[0].reason).toMatch(/^rethinkdb_a writes its disk probe \(a durable write to a table on it alone\) in 180 ms \(median of 20 in the last window\)/);
    expect(reply(state, 'a').anomalous).toBe(false);
  });

  test('when every server\'s disk probe slows down at once (a disk they share), then nothing is raised on it, while a reply anomaly still raises', () => {
    const steady = { a: 1, b: 1, c: 1, 'a:disk': 2, 'b:disk': 2, 'c:disk': 2 };
    const shared = { a: 1, b: 1, c: 1, 'a:disk': 90, 'b:disk': 90, 'c:disk': 90 };
    const diskOnly = run([steady, steady, steady, shared, shared]);
    expect(diskOnly.decisions).toEqual([]);
    expect(diskOnly.held).toBe("3 of 3 servers are slow at once on the disk probe: load everywhere, a shared resource, or the manager's own host; nothing raised on it");
    const alsoSlow = { ...shared, b: 40 };
    const withReply = run([steady, steady, steady, alsoSlow, alsoSlow]);
    expect(withReply.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-b', evidence: expect.objectContaining({ signal: 'reply' }) })]);
  });

  test('when a server raised on its disk answers in time on both signals for the cooldown, then it is cleared, naming both', () => {
    const steady = { a: 1, b: 1, c: 1, 'a:disk': 2, 'b:disk': 2, 'c:disk': 2 };
    const slowDisk = { ...steady, 'a:disk': 180 };
    const raised = run([steady, steady, steady, slowDisk, slowDisk]);
    const { decisions } = run([steady, steady], { clearCooldownMs: 1000, ownWarnings: [{ pod: 'rethinkdb-a' }] }, raised.state, 10000);
    expect(decisions).toEqual([expect.objectContaining({ type: 'clear', reason: 'rethinkdb_a answers in 1.0 ms, writes its disk probe in 2.0 ms, under the thresholds for 1 s (cooldown 1 s)' })]);
  });

  test('when a server raised on its disk has its disk stalled (no verdict: too few writes answered), then it is not cleared on its replies alone', () => {
    const steady = { a: 1, b: 1, c: 1, 'a:disk': 2, 'b:disk': 2, 'c:disk': 2 };
    const slowDisk = { ...steady, 'a:disk': 180 };
    const raised = run([steady, steady, steady, slowDisk, slowDisk]);
    const stalled = { ...steady, 'a:disk': null };
    const { decisions, state } = run(Array.from({ length: 5 }, () => stalled), { clearCooldownMs: 1000, ownWarnings: [{ pod: 'rethinkdb-a' }] }, raised.state, 10000);
    expect(decisions).toEqual([]);
    expect(state.servers.a.raised).toBe(true);
  });

  test('when a window has few answers because each took long, then the slowest judges it: few and slow is anomalous, few and fast is no verdict', () => {
    const before = run(learned());
    const few = (maxMs) => window({ a: 1, b: 1, c: 1 }).map((x) => (x.serverId === 'a' ? {
      ...x, n: 2, valueMs: null, maxMs, p50Ms: null, p90Ms: null,
    } : x));
    const slowStep = decideLatencyStep(before.state, few(600), { ...SETTINGS, now: 5000 });
    expect(reply(slowStep.state, 'a')).toMatchObject({ anomalous: true, valueMs: 600 });
    const fastStep = decideLatencyStep(before.state, few(2), { ...SETTINGS, now: 5000 });
    expect(reply(fastStep.state, 'a')).toMatchObject({ anomalous: null, valueMs: null, learned: 3 });
  });

  const tableWith = (states) => ({ tables: [{ db: 'd', name: 't', shards: [{ states }] }] });
  test.each([
    ['nothing moves', tableWith({ s1: 'ready', s2: 'ready' }), [], null],
    ['a replica backfills', tableWith({ s1: 'ready', s2: 'backfilling' }), [], 'replicas of d.t are backfilling or transitioning'],
    ['a replica transitions', tableWith({ s1: 'transitioning' }), [], 'replicas of d.t are backfilling or transitioning'],
    ['a replica is only disconnected (an outage, not data moving)', tableWith({ s1: 'ready', s2: 'disconnected' }), [], null],
    ['a table has no shards (unavailable: no data moves)', { tables: [{ db: 'd', name: 't', shards: [] }] }, [], null],
    ['a migration is on record', { tables: [] }, [{ server: 'rethinkdb_1' }], "a migration of rethinkdb_1's replicas is under way"],
    ['no cluster read yet', null, [], null],
  ])('dataMoving when %s', (_, cluster, migrations, expected) => {
    expect(dataMoving({ cluster, migrations })).toBe(expected);
  });
});

describe('the prober\'s answer times', () => {
  // A fake connection per server whose probe answers when the test says.
  function setup() {
    const clock = createVirtualClock(0);
    const pending = new Map();
    const conn = (id) => Object.assign(new EventEmitter(), { id, close: async () => {} });
    const prober = createProber({
      listServers: () => ['a', 'b'].map((id) => ({ serverId: id, name: id, hostname: `pod-${id}`, addresses: [{ host: id, port: 1 }] })),
      connect: async ({ host }) => conn(host),
      probe: (c) => new Promise((resolve) => { pending.set(c.id, resolve); }),
      clock, logger: quiet, intervalMs: 50, suspectAfterMs: 150, latencies: true,
    });
    const answer = (id) => { pending.get(id)(1); pending.delete(id); };
    return { clock, prober, answer };
  }
  const flush = () => new Promise((resolve) => { setImmediate(resolve); });

  test('when probes on open connections are answered, then their times are taken once; a connect is not timed; a probe waiting shows its wait', async () => {
    const { clock, prober, answer } = setup();
    prober.round(); // connects
    await flush();
    answer('a');
    answer('b');
    await flush();
    prober.round(); // probes on the connections
    clock.advance(7);
    answer('a');
    await flush();
    clock.advance(5);
    const taken = prober.takeLatencies();
    expect(taken).toEqual([
      {
        serverId: 'a', name: 'a', pod: 'pod-a', signal: 'reply', samples: [7], waitingMs: null,
      },
      {
        serverId: 'b', name: 'b', pod: 'pod-b', signal: 'reply', samples: [], waitingMs: 12,
      },
    ]);
    expect(prober.takeLatencies()[0].samples).toEqual([]);
  });

  test('when latencies are off, then no time is kept', async () => {
    const clock = createVirtualClock(0);
    const prober = createProber({
      listServers: () => [{ serverId: 'a', name: 'a', hostname: 'pod-a', addresses: [{ host: 'a', port: 1 }] }],
      connect: async () => Object.assign(new EventEmitter(), { close: async () => {} }), probe: async () => 1, clock, logger: quiet, intervalMs: 50, suspectAfterMs: 150,
    });
    prober.round();
    await flush();
    prober.round();
    await flush();
    expect(prober.takeLatencies()).toEqual([{
      serverId: 'a', name: 'a', pod: 'pod-a', signal: 'reply', samples: [], waitingMs: null,
    }]);
  });
});

describe('the prober\'s disk probe', () => {
  const flush = () => new Promise((resolve) => { setImmediate(resolve); });
  test('when the disk probe is on, then each server gets one write in flight at a time, at most every diskIntervalMs, timed as its own signal; a failed one is no time', async () => {
    const clock = createVirtualClock(0);
    const writes = [];
    const prober = createProber({
      listServers: () => [{ serverId: 'a', name: 'rethinkdb_a', hostname: 'pod-a', addresses: [{ host: 'a', port: 1 }] }],
      connect: async () => Object.assign(new EventEmitter(), { close: async () => {} }), probe: async () => 1,
      probeDisk: (conn, server) => new Promise((resolve, reject) => { writes.push({ server, resolve, reject }); }),
      diskIntervalMs: 200, clock, logger: quiet, intervalMs: 50, suspectAfterMs: 150, latencies: true,
    });
    prober.round(); // connects: no connection yet, no disk probe
    await flush();
    expect(writes).toEqual([]);
    prober.round();
    expect(writes.map((w) => w.server)).toEqual(['rethinkdb_a']);
    clock.advance(30);
    prober.round(); // one in flight: none more
    expect(writes).toHaveLength(1);
    writes[0].resolve();
    await flush();
    clock.advance(100);
    prober.round(); // 130 ms after the last was sent: not yet
    expect(writes).toHaveLength(1);
    clock.advance(70);
    prober.round();
    expect(writes).toHaveLength(2);
    writes[1].reject(Object.assign(new Error('Table `rethinkdb_manager.disk_probe_rethinkdb_a` does not exist.'), { name: 'ReqlOpFailedError' }));
    await flush();
    const [replyEntry, diskEntry] = prober.takeLatencies();
    expect(replyEntry.signal).toBe('reply');
    expect(diskEntry).toEqual({
      serverId: 'a', name: 'rethinkdb_a', pod: 'pod-a', signal: 'disk', samples: [30], waitingMs: null,
    });
    expect(prober.view()[0].diskLastError).toBe('ReqlOpFailedError: Table `rethinkdb_manager.disk_probe_rethinkdb_a` does not exist.');
  });
});

describe('the disk probes\' tables (pure)', () => {
  const servers = [{ name: 'rethinkdb_0' }, { name: 'rethinkdb_1' }];
  test('when servers lack their tables, then each is created; one elsewhere or with more replicas is placed; other tables are left alone', () => {
    const plan = planProbeTables({
      servers,
      tables: [
        { id: 't1', name: 'disk_probe_rethinkdb_1', replicas: ['rethinkdb_0'] },
        { id: 'x', name: 'notes', replicas: ['rethinkdb_9'] },
      ],
      now: 0, dropAfterMs: 1000,
    });
    expect(plan).toEqual({
      create: [{ table: 'disk_probe_rethinkdb_0', server: 'rethinkdb_0' }],
      place: [{ tableId: 't1', table: 'disk_probe_rethinkdb_1', server: 'rethinkdb_1' }],
      drop: [],
      missingSince: new Map(),
    });
    expect(planProbeTables({ servers, tables: [{ id: 't0', name: probeTableOf('rethinkdb_0'), replicas: ['rethinkdb_0', 'rethinkdb_1'] }, { id: 't1', name: probeTableOf('rethinkdb_1'), replicas: ['rethinkdb_1'] }], now: 0, dropAfterMs: 1000 }).place)
      .toEqual([{ tableId: 't0', table: 'disk_probe_rethinkdb_0', server: 'rethinkdb_0' }]);
  });

  test('when a table\'s server is not connected, then it is dropped only after dropAfterMs; a server back in time keeps it', () => {
    const tables = [{ id: 't0', name: 'disk_probe_rethinkdb_0', replicas: ['rethinkdb_0'] }, { id: 't2', name: 'disk_probe_rethinkdb_2', replicas: null }];
    const first = planProbeTables({ servers: [{ name: 'rethinkdb_0' }], tables, now: 1000, dropAfterMs: 5000 });
    expect(first.drop).toEqual([]);
    expect(first.missingSince).toEqual(new Map([['disk_probe_rethinkdb_2', 1000]]));
    const later = planProbeTables({ servers: [{ name: 'rethinkdb_0' }], tables, missingSince: first.missingSince, now: 6000, dropAfterMs: 5000 });
    expect(later.drop).toEqual([{ tableId: 't2', table: 'disk_probe_rethinkdb_2', reason: 'server rethinkdb_2 has not been connected for 5 s' }]);
    const reachable = tables.map((t) => (t.id === 't2' ? { ...t, replicas: ['rethinkdb_2'] } : t));
    const back = planProbeTables({ servers: [{ name: 'rethinkdb_0' }, { name: 'rethinkdb_2' }], tables: reachable, missingSince: first.missingSince, now: 6000, dropAfterMs: 5000 });
    expect(back).toEqual({ create: [], place: [], drop: [], missingSince: new Map() });
    // Connected, yet its table unreachable: the server that holds it is gone, and a new one has its name. Made again.
    const replaced = planProbeTables({ servers: [{ name: 'rethinkdb_0' }, { name: 'rethinkdb_2' }], tables, now: 6000, dropAfterMs: 5000 });
    expect(replaced.drop).toEqual([{ tableId: 't2', table: 'disk_probe_rethinkdb_2', reason: 'no replica of it is reachable while rethinkdb_2 is connected (a server that replaced one of that name)' }]);
    expect(planProbeTables({ servers: [], tables, now: 1e12, dropAfterMs: Infinity }).drop).toEqual([]);
  });

  test('when the system tables hold the probe database, then withoutProbeTables leaves out its probe tables, their status and jobs, and the servers only they name; another table of that database stays', () => {
    const raw = {
      dbConfig: [{ id: 'd1', name: 'app' }, { id: 'd2', name: 'rethinkdb_manager' }],
      tableConfig: [
        { id: 'a', db: 'd1', name: 't', shards: [{ primary_replica: 's0', replicas: ['s0'], nonvoting_replicas: [] }] },
        { id: 'p', db: 'd2', name: 'disk_probe_gone', shards: [{ primary_replica: 'sX', replicas: ['sX'], nonvoting_replicas: [] }] },
      ],
      tableConfigByName: [{ id: 'a', shards: [{ replicas: ['rethinkdb_0'] }] }, { id: 'p', shards: [{ replicas: ['gone'] }] }],
      tableStatus: [{ id: 'a', shards: [] }, { id: 'p', shards: [] }],
      serverStatus: [{ id: 's0', name: 'rethinkdb_0', network: { hostname: 'rethinkdb-0' } }],
      jobs: [{ type: 'backfill', info: { db: 'rethinkdb_manager', table: 'disk_probe_gone' } }, { type: 'backfill', info: { db: 'app', table: 't' } }],
    };
    const options = { db: 'rethinkdb_manager', prefix: 'disk_probe_' };
    const without = withoutProbeTables(raw, options);
    expect(without.tableConfig.map((t) => t.id)).toEqual(['a']);
    expect(without.tableConfigByName.map((t) => t.id)).toEqual(['a']);
    expect(without.tableStatus.map((t) => t.id)).toEqual(['a']);
    expect(without.jobs).toEqual([raw.jobs[1]]);
    expect(normalizeSystemTables(without).servers.map((x) => x.name)).toEqual(['rethinkdb_0']);
    expect(normalizeSystemTables(raw).servers.map((x) => x.name)).toEqual(['gone', 'rethinkdb_0']);
    expect(withoutProbeTables(raw, { db: 'other', prefix: 'disk_probe_' })).toBe(raw);
    const mine = { ...raw, tableConfig: [...raw.tableConfig, { id: 'n', db: 'd2', name: 'notes', shards: [] }] };
    expect(withoutProbeTables(mine, options).tableConfig.map((t) => t.id)).toEqual(['a', 'n']);
  });
});

describe('the trigger', () => {
  function setup({ warnings = [], migrations = [], raise = async () => ({ event: 'PERFWARNING', pods: [{ pod: 'rethinkdb-a', outcome: 'completed' }] }) } = {}) {
    const clock = createVirtualClock(0);
    let times = { a: 1, b: 1, c: 1 };
    const calls = [];
    const prober = {
      takeLatencies: () => Object.entries(times).map(([id, ms]) => ({
        serverId: id, name: `rethinkdb_${id}`, pod: `rethinkdb-${id}`, signal: 'reply', samples: Array.from({ length: 10 }, () => ms), waitingMs: null,
      })),
      suspects: () => [],
    };
    const events = {
      raiseFromLatency: async (args) => { calls.push(['raise', args]); return raise(args); },
      clearFromLatency: async (args) => { calls.push(['clear', args]); return { event: 'PERFWARNING_END', ended: true, reason: args.reason }; },
    };
    let moving = [];
    const marks = { perfWarnings: async () => warnings, migrations: async () => moving };
    const config = {
      latency: {
        enabled: true, windowMs: 1000, factor: 4, minDeltaMs: 5, consecutiveWindows: 2, warmupWindows: 3, clearCooldownSeconds: 10, diskProbeIntervalMs: 0,
      },
      lossRestore: { afterSeconds: 0 },
    };
    const trigger = createLatencyTrigger({
      prober, events, marks, recentCluster: () => null, config, clock, logger: quiet,
    });
    const windows = async (n) => { for (let i = 0; i < n; i += 1) { clock.advance(1000); await trigger.reconcile(); } };
    return {
      trigger, calls, windows, setTimes: (t) => { times = t; }, startMigrations: () => { moving = migrations; },
    };
  }

  test('when one server slows down after the warm-up, then the trigger raises its pod through the events, and shows why in its view', async () => {
    const { trigger, calls, windows, setTimes } = setup();
    await windows(3);
    setTimes({ a: 40, b: 1, c: 1 });
    await windows(2);
    expect(calls).toEqual([['raise', { pod: 'rethinkdb-a', reason: expect.stringMatching(/^rethinkdb_a answers the manager's probes in 40 ms/), baselines: { reply: 1 } }]]);
    const view = trigger.view();
    expect(view).toMatchObject({ enabled: true, windows: 5, held: null });
    expect(view.servers.find((s) => s.server === 'rethinkdb_a')).toMatchObject({ p90Ms: 40, baselineMs: 1, anomalous: true, raised: true });
    expect(view.lastDecisions).toEqual([expect.objectContaining({
      type: 'raise', pod: 'rethinkdb-a', result: { event: 'PERFWARNING', outcomes: ['rethinkdb-a: completed'] }, decidedAt: view.lastWindowAt, time: view.lastWindowAt,
    })]);
  });

  test('when GET /v1/monitor carries the trigger\'s view (a raise, its evidence, its result), then it is what /openapi.json documents; off, it is null', async () => {
    const { trigger, windows, setTimes } = setup();
    await windows(3);
    setTimes({ a: 40, b: 1, c: 1 });
    await windows(2);
    const h = createSandboxHarness();
    const res = await request(h.app).get('/v1/monitor');
    expect(res.body.latency).toBeNull();
    const checker = createResponseChecker(buildOpenApiDocument());
    expect(checker.check({ method: 'GET', path: '/v1/monitor', status: 200, body: res.body })).toEqual([]);
    expect(checker.check({ method: 'GET', path: '/v1/monitor', status: 200, body: { ...res.body, latency: trigger.view() } })).toEqual([]);
    expect(checker.check({ method: 'GET', path: '/v1/monitor', status: 200, body: { ...res.body, latency: { ...trigger.view(), extra: 1 } } })).not.toEqual([]);
  });

  test('when the disk probe is on, then the first window makes the missing tables and places them, through the store, and says so in its view', async () => {
    const clock = createVirtualClock(0);
    const tables = [{ id: 'old', name: 'disk_probe_rethinkdb_a', replicas: ['rethinkdb_b'] }];
    const calls = [];
    const store = {
      readProbeTables: async (db) => { calls.push(['read', db]); return tables; },
      createProbeTable: async (db, table) => { calls.push(['create', db, table]); tables.push({ id: `new-${table}`, name: table, replicas: ['rethinkdb_a'] }); },
      placeProbeTable: async (id, server) => { calls.push(['place', id, server]); },
      dropProbeTable: async (id) => { calls.push(['drop', id]); },
    };
    const prober = {
      takeLatencies: () => ['a', 'b'].flatMap((id) => ['reply', 'disk'].map((signal) => ({
        serverId: id, name: `rethinkdb_${id}`, pod: `rethinkdb-${id}`, signal, samples: [1, 1, 1], waitingMs: null,
      }))),
      suspects: () => [],
    };
    const trigger = createLatencyTrigger({
      prober, events: {}, marks: { perfWarnings: async () => [], migrations: async () => [] }, store, recentCluster: () => null, clock, logger: quiet,
      config: {
        latency: {
          enabled: true, windowMs: 1000, factor: 4, minDeltaMs: 5, consecutiveWindows: 2, warmupWindows: 3, clearCooldownSeconds: 10, diskProbeIntervalMs: 250, diskProbeDb: 'rethinkdb_manager',
        },
        lossRestore: { afterSeconds: 1800 },
      },
    });
    await trigger.reconcile();
    expect(calls).toEqual([
      ['read', 'rethinkdb_manager'], ['create', 'rethinkdb_manager', 'disk_probe_rethinkdb_b'], ['read', 'rethinkdb_manager'],
      ['place', 'old', 'rethinkdb_a'], ['place', 'new-disk_probe_rethinkdb_b', 'rethinkdb_b'],
    ]);
    expect(trigger.view().diskProbe).toEqual({
      db: 'rethinkdb_manager', intervalMs: 250, lastTables: 2, lastError: null,
    });
    calls.length = 0;
    for (let i = 1; i < PROBE_TABLES_EVERY; i += 1) await trigger.reconcile();
    expect(calls).toEqual([]);
    store.readProbeTables = async () => { throw new Error('RethinkDB unavailable'); };
    await trigger.reconcile();
    expect(trigger.view()).toMatchObject({ diskProbe: { lastError: 'read: RethinkDB unavailable' }, windows: PROBE_TABLES_EVERY + 1 });
  });

  test('when the trigger is on for a backend without probes (the sandbox), then the manager says it is off, and /v1/monitor shows none', async () => {
    const h = createSandboxHarness({ env: { LATENCY_TRIGGER_ENABLED: 'true' } });
    expect(h.logs.filter((l) => /LATENCY_TRIGGER_ENABLED/.test(l.msg)).map((l) => [l.level, l.msg])).toEqual([
      [40, 'LATENCY_TRIGGER_ENABLED is set, but this backend has no probes (the sandbox): the latency trigger is off'],
    ]);
    expect((await request(h.app).get('/v1/monitor')).body.latency).toBeNull();
  });

  test('when raising fails, then the error is in the view, the raise is forgotten, and the next window raises again', async () => {
    let fail = true;
    const { trigger, windows, setTimes } = setup({
      raise: async () => {
        if (fail) throw new Error('cluster unreachable');
        return { event: 'PERFWARNING', pods: [{ pod: 'rethinkdb-a', outcome: 'completed' }] };
      },
    });
    await windows(3);
    setTimes({ a: 40, b: 1, c: 1 });
    await windows(3);
    expect(trigger.view().lastDecisions).toEqual([
      expect.objectContaining({ type: 'raise', error: 'cluster unreachable' }), expect.objectContaining({ type: 'raise', error: 'cluster unreachable' }),
    ]);
    fail = false;
    await windows(2);
    expect(trigger.view().lastDecisions.map((d) => d.error ?? d.result.event)).toEqual(['cluster unreachable', 'cluster unreachable', 'PERFWARNING']);
    expect(trigger.view().windows).toBe(8);
  });

  test('when a migration is on record, then nothing is raised and the view says why', async () => {
    const {
      trigger, calls, windows, setTimes, startMigrations,
    } = setup({ migrations: [{ server: 'rethinkdb_b' }] });
    await windows(3);
    startMigrations();
    setTimes({ a: 40, b: 1, c: 1 });
    await windows(2);
    expect(calls).toEqual([]);
    expect(trigger.view().held).toBe("a migration of rethinkdb_b's replicas is under way; nothing raised while data moves");
  });

  test('when its own warning is on record and the server answers in time for the cooldown, then it clears it', async () => {
    const { calls, windows } = setup({ warnings: [{ pod: 'rethinkdb-a', source: 'latency', baselines: { reply: 1 } }] });
    await windows(12);
    expect(calls).toEqual([['clear', { pod: 'rethinkdb-a', reason: expect.stringMatching(/^rethinkdb_a answers in 1.0 ms, under the thresholds/) }]]);
  });
});
