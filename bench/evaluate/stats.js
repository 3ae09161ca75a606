// Pure statistics over the load generator's op records: per-second buckets and window summaries.
//
// A record is { startMs, endMs, ok, kind: 'read'|'update', entry, errorKind, issuedMs? } on one monotonic
// clock. startMs is when the op was due (open loop), so latency = endMs - startMs includes any lateness of
// the generator itself and never hides a stall (no coordinated omission). Times below are relative to t0.
//
// Percentiles are nearest-rank: for n sorted values and 0 < p <= 100, the value at 1-based rank ceil(p/100 * n),
// i.e. the smallest observed value with at least p% of the values at or below it. No interpolation: p99 of
// 100 values is the 99th smallest. p = 0 gives the minimum; no values gives null.

export function percentile(sortedValues, p) {
  const n = sortedValues.length;
  if (n === 0) return null;
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile must be within [0, 100], got ${p}`);
  // p * n / 100 less a hair, so that float error (0.07 * 100 = 7.000000000000001) cannot add a rank.
  const rank = Math.max(1, Math.ceil((p * n) / 100 - 1e-9));
  return sortedValues[rank - 1];
}

// { count, mean, p50, p99, p999, max } of latencies in ms; null statistics when there are none.
export function summarizeLatencies(latenciesMs) {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  const count = sorted.length;
  const mean = count === 0 ? null : sorted.reduce((sum, v) => sum + v, 0) / count;
  return {
    count,
    mean,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    p999: percentile(sorted, 99.9),
    max: count === 0 ? null : sorted[count - 1],
  };
}

// Counts of one group of records (by start time) plus the latency of its ok ops.
function tally(records) {
  const failedByKind = {};
  const latencies = [];
  let ok = 0;
  for (const rec of records) {
    if (rec.ok) {
      ok += 1;
      latencies.push(rec.endMs - rec.startMs);
    } else {
      const kind = rec.errorKind ?? 'other';
      failedByKind[kind] = (failedByKind[kind] ?? 0) + 1;
    }
  }
  return { attempted: records.length, ok, failed: records.length - ok, failedByKind, latency: summarizeLatencies(latencies) };
}

function groupBy(records, keyOf) {
  const groups = new Map();
  for (const rec of records) {
    const key = keyOf(rec);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(rec);
  }
  return groups;
}

function entryNames(records) {
  return [...new Set(records.map((rec) => rec.entry))].sort();
}

// A time relative to t0, for deciding which bucket or window it falls in. Due times are t0 + i x interval in
// floating point, so (t0 + 1000) - t0 can come out a hair under 1000: a nanosecond of tolerance keeps an op due on
// a boundary on the side it was due, for buckets and windows alike.
const sinceT0 = (ms, t0) => ms - t0 + 1e-6;
const bucketIndex = (ms, t0, bucketMs) => Math.floor(sinceT0(ms, t0) / bucketMs);

// Index range of buckets to report: every bucket from the first to the last start or ok completion.

function bucketRange(records, t0, bucketMs) {
  let first = 0;
  let last = -1;
  for (const rec of records) {
    const startIndex = bucketIndex(rec.startMs, t0, bucketMs);
    const endIndex = rec.ok ? bucketIndex(rec.endMs, t0, bucketMs) : startIndex;
    first = Math.min(first, startIndex);
    last = Math.max(last, startIndex, endIndex);
  }
  return { first, last };
}

function bucketOf(startedRecords, okCompletions, bucketMs) {
  return { ...tally(startedRecords), throughput: okCompletions / (bucketMs / 1000) };
}

// Per-second (or per-bucketMs) buckets. Attempts, failures and latency are counted in the bucket where the op
// was due; throughput is ok ops completing in the bucket, per second. byEntry has every entry in every bucket.
export function bucketize(records, { t0 = 0, bucketMs = 1000 } = {}) {
  const { first, last } = bucketRange(records, t0, bucketMs);
  const byStart = groupBy(records, (rec) => bucketIndex(rec.startMs, t0, bucketMs));
  const okByEnd = groupBy(records.filter((rec) => rec.ok), (rec) => bucketIndex(rec.endMs, t0, bucketMs));
  const entries = entryNames(records);
  const buckets = [];
  for (let index = first; index <= last; index += 1) {
    const started = byStart.get(index) ?? [];
    const ended = okByEnd.get(index) ?? [];
    const byEntry = {};
    for (const entry of entries) {
      byEntry[entry] = bucketOf(started.filter((rec) => rec.entry === entry),
        ended.filter((rec) => rec.entry === entry).length, bucketMs);
    }
    buckets.push({ index, tMs: index * bucketMs, ...bucketOf(started, ended.length, bucketMs), byEntry });
  }
  return buckets;
}

// The window's extent for throughput: the given bounds, or from min(0, first start) to the last start or end.
function windowBounds(records, t0, fromMs, toMs) {
  let first = 0;
  let last = 0;
  for (const rec of records) {
    first = Math.min(first, rec.startMs - t0);
    last = Math.max(last, rec.startMs - t0, rec.endMs - t0);
  }
  return { from: Number.isFinite(fromMs) ? fromMs : first, to: Number.isFinite(toMs) ? toMs : last };
}

function windowSummary(started, okCompletions, durationMs) {
  const counts = tally(started);
  return {
    ...counts,
    availability: counts.attempted === 0 ? null : counts.ok / counts.attempted,
    throughput: durationMs > 0 ? okCompletions / (durationMs / 1000) : null,
  };
}

// Summary of the ops due in [fromMs, toMs) relative to t0 (default: all), overall, per kind and per entry.
// Throughput is ok ops completing inside the window per second of window; lateness is issuedMs - startMs.
export function summarize(records, { t0 = 0, fromMs = -Infinity, toMs = Infinity } = {}) {
  const { from, to } = windowBounds(records, t0, fromMs, toMs);
  const durationMs = to - from;
  const inWindow = (ms) => sinceT0(ms, t0) >= fromMs && sinceT0(ms, t0) < toMs;
  const summaryOf = (group) => windowSummary(group.filter((rec) => inWindow(rec.startMs)),
    group.filter((rec) => rec.ok && inWindow(rec.endMs)).length, durationMs);
  const byGroup = (keyOf) => Object.fromEntries([...groupBy(records, keyOf)]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([key, group]) => [key, summaryOf(group)]));
  const lateness = records.filter((rec) => rec.issuedMs !== undefined && inWindow(rec.startMs))
    .map((rec) => rec.issuedMs - rec.startMs);
  return {
    fromMs: from,
    toMs: to,
    durationMs,
    ...summaryOf(records),
    byKind: byGroup((rec) => rec.kind),
    byEntry: byGroup((rec) => rec.entry),
    lateness: summarizeLatencies(lateness),
  };
}

// Points for a plot: one { t (seconds since t0, bucket start), v } per bucket, v = pick(bucket) (null = gap).
export function bucketPoints(buckets, pick) {
  return buckets.map((bucket) => ({ t: bucket.tMs / 1000, v: pick(bucket) ?? null }));
}
