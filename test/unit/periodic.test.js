// Periodic work (src/lib/periodic.js): a round runs every job even when one fails, logging the failure with the job's
// name; timers never overlap a run still going. The retry book (src/lib/retry.js) keeps one backoff per key, and the
// runner (src/lib/runner.js) starts and stops its groups of parts.

import { runJobs, startTimers } from '../../src/lib/periodic.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createRetryBook } from '../../src/lib/retry.js';
import { createRunner } from '../../src/lib/runner.js';

const recordingLog = () => {
  const lines = [];
  return { lines, warn: (fields, message) => lines.push({ ...fields, message }) };
};

describe('runJobs', () => {
  test('when one job throws, then the others still run, its result is its fallback, and the failure is logged with its name', async () => {
    const log = recordingLog();
    const ran = [];
    const results = await runJobs([
      { name: 'a', run: async () => { ran.push('a'); return [1]; }, fallback: [] },
      { name: 'b', run: async () => { ran.push('b'); throw new Error('store down'); }, fallback: [], failure: 'b failed; retried next tick' },
      { name: 'c', run: () => { ran.push('c'); return null; } },
    ], log);
    expect(ran).toEqual(['a', 'b', 'c']);
    expect(results).toEqual({ a: [1], b: [], c: null });
    expect(log.lines).toEqual([{ job: 'b', err: 'store down', message: 'b failed; retried next tick' }]);
  });
});

describe('startTimers', () => {
  test('when a run outlasts its interval, then the timer skips until it ends; stop clears every timer', async () => {
    const fired = [];
    const cleared = [];
    let release;
    let runs = 0;
    const stop = startTimers([
      { name: 'slow', intervalMs: 1000, run: () => { runs += 1; return new Promise((resolve) => { release = resolve; }); } },
      { name: 'fails', intervalMs: 500, run: () => { throw new Error('never out of the timer'); } },
    ], { setInterval: (fn, ms) => { fired.push({ fn, ms }); return fired.length; }, clearInterval: (h) => cleared.push(h) });
    expect(fired.map((f) => f.ms)).toEqual([1000, 500]);
    fired[0].fn();
    await Promise.resolve();
    fired[0].fn();
    await Promise.resolve();
    expect(runs).toBe(1);
    release();
    await new Promise((resolve) => { setImmediate(resolve); });
    fired[0].fn();
    await Promise.resolve();
    expect(runs).toBe(2);
    fired[1].fn();
    await new Promise((resolve) => { setImmediate(resolve); });
    stop();
    expect(cleared).toEqual([1, 2]);
  });
});

describe('createRetryBook', () => {
  test('when a key fails twice, then it waits 500 then 1000 ms; another key is not held; success forgets it', () => {
    const clock = createVirtualClock();
    const book = createRetryBook({ clock, retry: { minMs: 500, maxMs: 30000 } });
    expect(book.due('node:n1')).toBe(true);
    expect(book.failed('node:n1')).toEqual({ attempts: 1, retryInMs: 500, at: clock.now() + 500 });
    expect(book.due('node:n1')).toBe(false);
    expect(book.due('votes:s1')).toBe(true);
    clock.advance(500);
    expect(book.due('node:n1')).toBe(true);
    expect(book.failed('node:n1').retryInMs).toBe(1000);
    expect(book.view()).toEqual([{ key: 'node:n1', attempts: 2, retryAt: clock.now() + 1000 }]);
    book.succeeded('node:n1');
    expect(book.failing('node:n1')).toBe(false);
    expect(book.view()).toEqual([]);
  });
});

describe('createRunner', () => {
  const silent = { child: () => ({ warn() {} }) };

  test('when the groups start and stop, then the leading parts run only between startLeading and stopLeading, each once, and stop in reverse order', async () => {
    const events = [];
    const runner = createRunner({ logger: silent });
    const part = (name, group) => ({ name, group, start: () => { events.push(`start ${name}`); return () => { events.push(`stop ${name}`); }; } });
    runner.add(part('timers', 'always'));
    runner.add(part('watch-a', 'leading'));
    runner.add(part('watch-b', 'leading'));
    runner.add({ name: 'off', group: 'leading', start: () => null });
    await runner.start();
    await runner.startLeading();
    await runner.startLeading();
    expect(runner.running()).toEqual(['timers', 'watch-a', 'watch-b']);
    await runner.stopLeading();
    expect(runner.running()).toEqual(['timers']);
    await runner.stopAlways();
    expect(events).toEqual(['start timers', 'start watch-a', 'start watch-b', 'stop watch-b', 'stop watch-a', 'stop timers']);
  });

  test('when the manager starts, then the ports open before the timers; a port that fails stops the start; the ports close last', async () => {
    const events = [];
    const runner = createRunner({ logger: silent });
    const part = (name, group, fails = false) => ({
      name, group, start: () => { if (fails) throw new Error(`${name} in use`); events.push(`start ${name}`); return () => { events.push(`stop ${name}`); }; },
    });
    runner.add(part('timers', 'always'));
    runner.add(part('http', 'serving'));
    await runner.start();
    await runner.stopAlways();
    await runner.stopServing();
    expect(events).toEqual(['start http', 'start timers', 'stop timers', 'stop http']);
    const failing = createRunner({ logger: silent });
    failing.add(part('timers', 'always'));
    failing.add(part('http', 'serving', true));
    await expect(failing.start()).rejects.toThrow('http in use');
    expect(failing.running()).toEqual([]);
  });

  test('when the leading group is stopped while it is still starting, then what that start started is stopped too', async () => {
    const runner = createRunner({ logger: silent });
    let watching = 0;
    runner.add({ name: 'watch', group: 'leading', start: async () => { await new Promise((resolve) => { setImmediate(resolve); }); watching += 1; return () => { watching -= 1; }; } });
    const starting = runner.startLeading();
    await runner.stopLeading();
    await starting;
    expect(watching).toBe(0);
    expect(runner.running()).toEqual([]);
  });

  test('when a part fails to stop, then it is logged and the others still stop', async () => {
    const warned = [];
    const runner = createRunner({ logger: { child: () => ({ warn: (fields) => warned.push(fields) }) } });
    let stopped = false;
    runner.add({ name: 'a', group: 'leading', start: () => () => { stopped = true; } });
    runner.add({ name: 'b', group: 'leading', start: () => () => { throw new Error('stuck'); } });
    await runner.startLeading();
    await runner.stopLeading();
    expect(stopped).toBe(true);
    expect(warned).toEqual([{ part: 'b', err: 'stuck' }]);
    expect(() => runner.add({ name: 'c', group: 'sometimes', start: () => null })).toThrow('unknown runner group');
  });
});
