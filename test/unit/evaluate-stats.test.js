// The evaluation's statistics: nearest-rank percentiles, per-second buckets, window summaries, on hand-made records.

import fc from 'fast-check';
import {
  bucketize, bucketPoints, percentile, summarize, summarizeLatencies,
} from '../../bench/evaluate/stats.js';

const T0 = 10_000;
const op = (startMs, latencyMs, { ok = true, kind = 'read', entry = 'a', errorKind = null, lateMs } = {}) => ({
  startMs: T0 + startMs,
  endMs: T0 + startMs + latencyMs,
  ok,
  kind,
  entry,
  errorKind: ok ? null : errorKind,
  ...(lateMs === undefined ? {} : { issuedMs: T0 + startMs + lateMs }),
});

describe('percentile (nearest rank)', () => {
  const hundred = Array.from({ length: 100 }, (_, i) => i + 1);

  test.each([
    [50, 50],
    [99, 99],
    [99.9, 100],
    [100, 100],
    [1, 1],
    [7, 7],
    [29, 29],
    [0, 1],
  ])('when p = %d over 1..100, then it is %d', (p, expected) => {
    expect(percentile(hundred, p)).toBe(expected);
  });

  test.each([
    [[7], 50, 7],
    [[7], 99, 7],
    [[1, 2], 50, 1],
    [[1, 2], 51, 2],
    [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 99, 10],
    [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 90, 9],
    [[1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 91, 10],
  ])('when values are %j and p = %d, then it is %d', (values, p, expected) => {
    expect(percentile(values, p)).toBe(expected);
  });

  test('when there are no values, then it is null', () => {
    expect(percentile([], 99)).toBeNull();
  });

  test('when p is outside [0, 100], then it refuses', () => {
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  test('when values vary, then the result is an observed value with at least p% at or below it', () => {
    fc.assert(fc.property(fc.array(fc.integer(), { minLength: 1 }), fc.double({ min: 0.01, max: 100, noNaN: true }),
      (values, p) => {
        const sorted = [...values].sort((a, b) => a - b);
        const result = percentile(sorted, p);
        const atOrBelow = sorted.filter((v) => v <= result).length;
        const below = sorted.filter((v) => v < result).length;
        return sorted.includes(result) && atOrBelow / sorted.length >= p / 100 && below / sorted.length < p / 100;
      }));
  });
});

describe('summarizeLatencies', () => {
  test('when latencies are given unsorted, then it reports count, mean, p50, p99, max', () => {
    expect(summarizeLatencies([30, 10, 20, 40])).toEqual({ count: 4, mean: 25, p50: 20, p99: 40, p999: 40, max: 40 });
  });

  test('when there are none, then statistics are null', () => {
    expect(summarizeLatencies([])).toEqual({ count: 0, mean: null, p50: null, p99: null, p999: null, max: null });
  });
});

describe('bucketize', () => {
  // Seen on a real run: with this t0, (t0 + 200 x 5) - t0 is 999.9999999... in floating point.
  test('when ops are due every 5 ms from a t0 with floating-point error, then each second holds exactly 200', () => {
    const t0 = 130698.22340947956;
    expect((t0 + 1000) - t0).toBeLessThan(1000);
    const due = Array.from({ length: 600 }, (_, i) => ({ startMs: t0 + i * 5, endMs: t0 + i * 5 + 1, ok: true, kind: 'read', entry: 'a', errorKind: null }));
    expect(bucketize(due, { t0 }).map((b) => b.attempted)).toEqual([200, 200, 200]);
  });

  const records = [
    op(0, 5),
    op(200, 15, { entry: 'b', kind: 'update' }),
    op(900, 200), // due in second 0, completes in second 1
    op(1100, 5000, { ok: false, errorKind: 'timeout', entry: 'b' }),
    op(1500, 0, { ok: false, errorKind: 'connection' }),
    op(1600, 0, { ok: false, errorKind: 'connection' }),
    op(3050, 10, { entry: 'b' }),
  ];
  const buckets = bucketize(records, { t0: T0 });

  test('when ops span four seconds, then there is one bucket per second, empty seconds included', () => {
    expect(buckets.map((b) => [b.index, b.tMs])).toEqual([[0, 0], [1, 1000], [2, 2000], [3, 3000]]);
    expect(buckets[2]).toMatchObject({ attempted: 0, ok: 0, failed: 0, throughput: 0, latency: { count: 0, p99: null } });
  });

  test('when ops are due in a second, then they are counted there with their latency', () => {
    expect(buckets[0]).toMatchObject({ attempted: 3, ok: 3, failed: 0, failedByKind: {} });
    expect(buckets[0].latency).toMatchObject({ count: 3, mean: 220 / 3, p50: 15, p99: 200, max: 200 });
  });

  test('when ops fail, then they are counted by error kind where they were due, with no latency', () => {
    expect(buckets[1]).toMatchObject({ attempted: 3, ok: 0, failed: 3, failedByKind: { timeout: 1, connection: 2 } });
    expect(buckets[1].latency.count).toBe(0);
  });

  test('when an ok op completes in a later second, then throughput counts it there', () => {
    expect(buckets.map((b) => b.throughput)).toEqual([2, 1, 0, 1]);
  });

  test('when entries differ, then each bucket has the same breakdown per entry, zeros included', () => {
    expect(Object.keys(buckets[2].byEntry)).toEqual(['a', 'b']);
    expect(buckets[0].byEntry.a).toMatchObject({ attempted: 2, ok: 2, throughput: 1, latency: { p50: 5, max: 200 } });
    expect(buckets[0].byEntry.b).toMatchObject({ attempted: 1, ok: 1, throughput: 1, latency: { p99: 15 } });
    expect(buckets[1].byEntry.a).toMatchObject({ attempted: 2, failedByKind: { connection: 2 }, throughput: 1 });
    expect(buckets[1].byEntry.b).toMatchObject({ attempted: 1, failedByKind: { timeout: 1 }, throughput: 0 });
  });

  test('when buckets are half a second, then they split accordingly', () => {
    const half = bucketize(records, { t0: T0, bucketMs: 500 });
    expect(half[0]).toMatchObject({ attempted: 2, throughput: 4 });
    expect(half.length).toBe(7);
  });

  test('when there are no records, then there are no buckets', () => {
    expect(bucketize([], { t0: T0 })).toEqual([]);
  });

  test('when plotted, then points are (seconds, value) with null for gaps', () => {
    expect(bucketPoints(buckets, (b) => b.latency.p99)).toEqual([
      { t: 0, v: 200 }, { t: 1, v: null }, { t: 2, v: null }, { t: 3, v: 10 },
    ]);
  });
});

describe('summarize', () => {
  const records = [
    op(0, 10, { lateMs: 1 }),
    op(500, 20, { kind: 'update', entry: 'b', lateMs: 3 }),
    op(1000, 30, { lateMs: 0 }),
    op(1500, 5000, { ok: false, errorKind: 'timeout', entry: 'b', lateMs: 2 }),
    op(2000, 40, { kind: 'update', lateMs: 0 }),
    op(2990, 20, { entry: 'b', lateMs: 9 }), // ends at 3010
  ];

  test('when summarizing everything, then the window runs from t0 to the last end', () => {
    const all = summarize(records, { t0: T0 });
    expect(all).toMatchObject({ fromMs: 0, toMs: 6500, durationMs: 6500, attempted: 6, ok: 5, failed: 1 });
    expect(all.failedByKind).toEqual({ timeout: 1 });
    expect(all.availability).toBeCloseTo(5 / 6);
    expect(all.throughput).toBeCloseTo(5 / 6.5);
    expect(all.latency).toMatchObject({ count: 5, mean: 24, p50: 20, p99: 40, max: 40 });
    expect(all.lateness).toMatchObject({ count: 6, p50: 1, max: 9 });
  });

  test('when given a sub-window, then only ops due in it count, and throughput only completions in it', () => {
    const mid = summarize(records, { t0: T0, fromMs: 1000, toMs: 3000 });
    expect(mid).toMatchObject({ fromMs: 1000, toMs: 3000, durationMs: 2000, attempted: 4, ok: 3, failed: 1 });
    expect(mid.throughput).toBe(1); // 1030 and 2040 complete inside; 3010 does not
    expect(mid.latency).toMatchObject({ count: 3, p50: 30, max: 40 });
  });

  test('when broken down, then per kind and per entry summaries use the same window', () => {
    const mid = summarize(records, { t0: T0, fromMs: 1000, toMs: 3000 });
    expect(Object.keys(mid.byEntry)).toEqual(['a', 'b']);
    expect(mid.byEntry.a).toMatchObject({ attempted: 2, ok: 2, throughput: 1, availability: 1 });
    expect(mid.byEntry.b).toMatchObject({ attempted: 2, ok: 1, failedByKind: { timeout: 1 }, availability: 0.5 });
    expect(mid.byKind.update).toMatchObject({ attempted: 1, ok: 1, latency: { p99: 40 } });
  });

  test('when the window holds nothing, then counts are zero and ratios null', () => {
    const empty = summarize(records, { t0: T0, fromMs: 8000, toMs: 9000 });
    expect(empty).toMatchObject({ attempted: 0, ok: 0, availability: null, throughput: 0, latency: { p99: null } });
    expect(summarize([], {})).toMatchObject({ attempted: 0, throughput: null });
  });
});
