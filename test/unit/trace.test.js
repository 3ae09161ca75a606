// The request trace: what counts as reading, writing, planning and waiting, and that nothing is counted outside one.
import {
  recordQuery, timePlanning, timeReading, timeWaiting, timeWriting, traced,
} from '../../src/lib/trace.js';

const busy = (ms) => { const until = performance.now() + ms; while (performance.now() < until) { /* spin */ } };

describe('a request trace', () => {
  test('when queries run before, during and after a wait, then reads in the wait count as waiting, the others as reading and writing', async () => {
    const { result, timings } = await traced(async () => {
      recordQuery('read', 5);
      recordQuery('write', 3);
      await timeWaiting(async () => { recordQuery('read', 7); recordQuery('read', 7); await timeWaiting(async () => recordQuery('read', 1)); });
      return 'done';
    });
    expect(result).toBe('done');
    expect(timings.queries).toEqual({ reads: 1, writes: 1, readsWhileWaiting: 3 });
    expect(timings).toMatchObject({ readMs: 5, writeMs: 3 });
  });

  test('when writes run concurrently in a batch, then writing counts the batch\'s wall time and the mean is of each write\'s own duration', async () => {
    const { timings } = await traced(async () => {
      await timeWriting(async () => {
        await new Promise((res) => { setTimeout(res, 30); });
        for (let i = 0; i < 4; i += 1) recordQuery('write', 25);
      });
      recordQuery('write', 10);
    });
    expect(timings.queries.writes).toBe(5);
    expect(timings.meanWriteMs).toBe(22);
    // 30 ms of wall time plus the lone write, not 4 x 25 + 10.
    expect(timings.writeMs).toBeGreaterThanOrEqual(39);
    expect(timings.writeMs).toBeLessThan(100);
    expect(timings.writeMs).toBeLessThanOrEqual(timings.totalMs + 10);
  });

  test('when reads run concurrently, then reading counts their wall time and each read is counted', async () => {
    const { timings } = await traced(async () => {
      await timeReading(async () => {
        await new Promise((res) => { setTimeout(res, 30); });
        recordQuery('read', 28);
        recordQuery('read', 29);
      });
      recordQuery('read', 10);
    });
    expect(timings.queries).toEqual({ reads: 3, writes: 0, readsWhileWaiting: 0 });
    // 30 ms of wall time plus the lone read, not 28 + 29 + 10.
    expect(timings.readMs).toBeGreaterThanOrEqual(39);
    expect(timings.readMs).toBeLessThan(60);
  });

  test('when planning nests (a planner called inside another timed plan), then its time is counted once', async () => {
    const { timings } = await traced(async () => timePlanning(() => timePlanning(() => busy(20))));
    expect(timings.planMs).toBeGreaterThanOrEqual(19);
    expect(timings.planMs).toBeLessThanOrEqual(timings.totalMs);
  });

  test('when code runs outside a trace, then nothing is recorded and the functions still return what they run', async () => {
    recordQuery('read', 10);
    expect(timePlanning(() => 42)).toBe(42);
    expect(await timeWaiting(async () => 'w')).toBe('w');
    const { timings } = await traced(async () => {});
    expect(timings.queries).toEqual({ reads: 0, writes: 0, readsWhileWaiting: 0 });
  });

  test('when two traces run concurrently, then each counts only its own queries', async () => {
    const tick = () => new Promise((res) => { setImmediate(res); });
    const run = (n) => traced(async () => { for (let i = 0; i < n; i += 1) { await tick(); recordQuery('read', 1); } });
    const [a, b] = await Promise.all([run(3), run(5)]);
    expect([a.timings.queries.reads, b.timings.queries.reads]).toEqual([3, 5]);
  });
});
