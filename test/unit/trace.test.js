// The request trace: what counts as reading, writing, planning and waiting, and that nothing is counted outside one.
import {
  recordQuery, timePlanning, timeQuery, timeReading, timeWaiting, timeWriting, traced,
} from '../../src/lib/trace.js';

// A virtual clock for the trace (traced(fn, { now })): time passes only when a test says so, so no figure depends on
// how busy the machine is.
function virtualClock() {
  let t = 1000;
  return { now: () => t, pass: (ms) => { t += ms; } };
}

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
    const clock = virtualClock();
    const { timings } = await traced(async () => {
      await timeWriting(async () => {
        clock.pass(30);
        for (let i = 0; i < 4; i += 1) recordQuery('write', 25);
      });
      clock.pass(10);
      recordQuery('write', 10);
    }, clock);
    expect(timings.queries.writes).toBe(5);
    expect(timings.meanWriteMs).toBe(22);
    // 30 ms of the batch's wall time plus the lone write, not 4 x 25 + 10.
    expect(timings.writeMs).toBe(40);
    expect(timings.totalMs).toBe(40);
    expect(timings.otherMs).toBe(0);
  });

  test('when reads run concurrently, then reading counts their wall time and each read is counted', async () => {
    const clock = virtualClock();
    const { timings } = await traced(async () => {
      await timeReading(async () => {
        clock.pass(30);
        recordQuery('read', 28);
        recordQuery('read', 29);
      });
      recordQuery('read', 10);
    }, clock);
    expect(timings.queries).toEqual({ reads: 3, writes: 0, readsWhileWaiting: 0 });
    // 30 ms of the batch's wall time plus the lone read, not 28 + 29 + 10.
    expect(timings.readMs).toBe(40);
  });

  test('when a query is timed, then its duration is read from the trace\'s clock and the waiting around it counts apart', async () => {
    const clock = virtualClock();
    const { timings } = await traced(async () => {
      await timeQuery('read', async () => { clock.pass(12); });
      await timeWaiting(async () => { clock.pass(100); await timeQuery('read', async () => { clock.pass(5); }); });
    }, clock);
    expect(timings).toMatchObject({ readMs: 12, waitMs: 105, totalMs: 117, otherMs: 0, queries: { reads: 1, writes: 0, readsWhileWaiting: 1 } });
  });

  test('when planning nests (a planner called inside another timed plan), then its time is counted once', async () => {
    const clock = virtualClock();
    const { timings } = await traced(async () => timePlanning(() => timePlanning(() => clock.pass(20))), clock);
    expect(timings.planMs).toBe(20);
    expect(timings.totalMs).toBe(20);
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
