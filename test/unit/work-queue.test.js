// The keyed work queue: one reconcile per key at a time, a key never waiting twice, delays and backoffs on injected
// timers, and nothing run before start() or after stop().

import { createVirtualClock } from '../../src/lib/clock.js';
import { createWorkQueue } from '../../src/lib/work-queue.js';
import { createMetrics } from '../../src/metrics/metrics.js';

const silent = { child: () => silent, info() {}, warn() {}, debug() {} };

// Timers that fire only when the test advances them, on the virtual clock.
function manualTimers(clock) {
  const pending = new Set();
  return {
    setTimeout(fn, ms) { const t = { at: clock.now() + ms, fn }; pending.add(t); return t; },
    clearTimeout(t) { pending.delete(t); },
    // Advances the clock by ms, firing the timers due on the way, in order, and letting what each starts run before
    // the next.
    async advance(ms) {
      const until = clock.now() + ms;
      for (;;) {
        const next = [...pending].filter((t) => t.at <= until).sort((a, b) => a.at - b.at)[0];
        if (!next) break;
        pending.delete(next);
        clock.advanceTo(next.at);
        next.fn();
        await new Promise((resolve) => { setImmediate(resolve); });
      }
      clock.advanceTo(until);
    },
    count: () => pending.size,
  };
}

function setup({ reconcile, backoff = { baseMs: 500, maxMs: 4000 }, workers = 1 } = {}) {
  const clock = createVirtualClock();
  const timers = manualTimers(clock);
  const metrics = createMetrics();
  const runs = [];
  const queue = createWorkQueue({
    name: 'test', clock, logger: silent, metrics, backoff, timers, workers,
    reconcile: async (key) => { runs.push({ key, at: clock.now() - clock.start }); return reconcile?.(key); },
  });
  return { clock, timers, queue, runs, metrics };
}

describe('createWorkQueue', () => {
  test('when a key is added before start(), then nothing runs; after start(), each added key runs once, in order', async () => {
    const { queue, runs } = setup();
    queue.add('a');
    await queue.idle();
    expect(runs).toEqual([]);
    queue.start();
    queue.add('a');
    queue.add('b');
    queue.add('c');
    queue.add('b');
    await queue.idle();
    expect(runs.map((r) => r.key)).toEqual(['a', 'b', 'c']);
  });

  test('when a key is added while it is being reconciled, then it is reconciled once more after, not twice at once', async () => {
    let release;
    let inside = 0;
    let most = 0;
    const { queue, runs } = setup({
      reconcile: async () => {
        inside += 1; most = Math.max(most, inside);
        if (runs.length === 1) await new Promise((resolve) => { release = resolve; });
        inside -= 1;
      },
    });
    queue.start();
    queue.add('k');
    await new Promise((resolve) => { setImmediate(resolve); });
    queue.add('k');
    queue.add('k');
    release();
    await queue.idle();
    expect(runs.map((r) => r.key)).toEqual(['k', 'k']);
    expect(most).toBe(1);
  });

  test('when there are two workers, then a slow key does not hold another back, and one key still never runs twice at once', async () => {
    let releaseSlow;
    const inside = new Map();
    let twice = false;
    const { queue, runs } = setup({
      workers: 2,
      reconcile: async (key) => {
        inside.set(key, (inside.get(key) ?? 0) + 1);
        twice ||= inside.get(key) > 1;
        if (key === 'slow' && runs.filter((r) => r.key === 'slow').length === 1) await new Promise((resolve) => { releaseSlow = resolve; });
        inside.set(key, inside.get(key) - 1);
      },
    });
    queue.start();
    queue.add('slow');
    queue.add('fast');
    await new Promise((resolve) => { setImmediate(resolve); });
    queue.add('slow');
    expect(runs.map((r) => r.key)).toEqual(['slow', 'fast']);
    expect(queue.view().current).toEqual(['slow']);
    releaseSlow();
    await queue.idle();
    expect(runs.map((r) => r.key)).toEqual(['slow', 'fast', 'slow']);
    expect(twice).toBe(false);
  });

  test('when a reconcile adds another key before its first await, then the add does not run it inside the caller, and one worker runs both in turn', async () => {
    let inside = 0;
    let most = 0;
    let queue;
    const setupDone = setup({
      reconcile: async (key) => {
        inside += 1; most = Math.max(most, inside);
        if (key === 'a') queue.add('b');
        await null;
        inside -= 1;
      },
    });
    ({ queue } = setupDone);
    queue.start();
    queue.add('a');
    expect(setupDone.runs).toEqual([]);
    await queue.idle();
    expect(setupDone.runs.map((r) => r.key)).toEqual(['a', 'b']);
    expect(most).toBe(1);
  });

  test('when a key is added just as the last worker finishes, then a worker takes it (no key is left waiting)', async () => {
    const { queue, runs } = setup();
    queue.start();
    queue.add('a');
    await queue.idle();
    queue.add('b');
    await queue.idle();
    expect(runs.map((r) => r.key)).toEqual(['a', 'b']);
    expect(queue.view().queued).toEqual([]);
  });

  test('when a failing key is added again while it runs, then it waits for its backoff, not once more at once', async () => {
    let release;
    const { queue, runs, timers } = setup({
      reconcile: async () => {
        if (runs.length === 1) await new Promise((resolve) => { release = resolve; });
        throw new Error('down');
      },
    });
    queue.start();
    queue.add('k');
    await new Promise((resolve) => { setImmediate(resolve); });
    queue.add('k');
    release();
    await queue.idle();
    expect(runs.length).toBe(1);
    await timers.advance(500);
    await queue.idle();
    expect(runs.length).toBe(2);
  });

  test('when a reconcile asks to be looked at again, then the key runs again after that delay (a resync)', async () => {
    const { queue, runs, timers } = setup({ reconcile: () => ({ requeueAfterMs: 2000 }) });
    queue.start();
    queue.add('failover');
    await queue.idle();
    await timers.advance(1999);
    await queue.idle();
    expect(runs.length).toBe(1);
    await timers.advance(1);
    await queue.idle();
    expect(runs.map((r) => r.at)).toEqual([0, 2000]);
  });

  test('when reconciles fail in a row, then the key waits 500, 1000, 2000, 4000, 4000 ms; a success forgets the failures', async () => {
    let failing = 5;
    const { queue, runs, timers, metrics } = setup({ reconcile: () => { if (failing > 0) { failing -= 1; throw new Error('down'); } } });
    queue.start();
    queue.add('k');
    await queue.idle();
    await timers.advance(20000);
    await queue.idle();
    const gaps = runs.slice(1).map((r, i) => r.at - runs[i].at);
    expect(gaps).toEqual([500, 1000, 2000, 4000, 4000]);
    expect(queue.view().failures).toEqual({});
    expect(await metrics.render()).toMatch(/rethinkdb_manager_work_queue_retries_total\{queue="test"\} 5/);
  });

  test('when addAfter is asked twice, then the earlier wins; add() now cancels the delay', async () => {
    const { queue, runs, timers } = setup();
    queue.start();
    queue.addAfter('k', 3000);
    queue.addAfter('k', 1000);
    queue.addAfter('k', 5000);
    expect(queue.view().delayed).toEqual([{ key: 'k', inMs: 1000 }]);
    await timers.advance(1000);
    await queue.idle();
    expect(runs.map((r) => r.at)).toEqual([1000]);
    queue.addAfter('k', 1000);
    queue.add('k');
    await queue.idle();
    expect(timers.count()).toBe(0);
    expect(runs.length).toBe(2);
  });

  test('when stopped (through the function start() returned, as the runner does), then delayed keys are dropped and nothing runs until started again', async () => {
    const { queue, runs, timers } = setup({ reconcile: () => ({ requeueAfterMs: 1000 }) });
    const stop = queue.start();
    queue.add('k');
    await queue.idle();
    await stop();
    expect(timers.count()).toBe(0);
    await timers.advance(5000);
    queue.add('k');
    await queue.idle();
    expect(runs.length).toBe(1);
  });
});
