// Where one request's time goes: RethinkDB queries (reads and writes, how many and how long), planning, and
// waiting for RethinkDB to act on a new configuration. A hook or an action answers with it (`timings`), so that an
// operator can tell the manager's own share from RethinkDB's, and the scale benchmark can print it.
// Attribution follows the async context (AsyncLocalStorage): code outside a traced request records nothing.
// The clock is the trace's own (traced(fn, { now })): performance.now() by default, a virtual one in the tests.

import { AsyncLocalStorage } from 'node:async_hooks';
import { performance } from 'node:perf_hooks';

const storage = new AsyncLocalStorage();

function newTrace(now) {
  return {
    now,
    startedAt: now(),
    reads: { count: 0, ms: 0 },
    // ms: wall time (concurrent writes overlap); sumMs: the writes' own durations added up.
    writes: { count: 0, ms: 0, sumMs: 0 },
    waiting: { ms: 0, reads: 0 },
    planMs: 0,
    planning: false,
  };
}

// Runs fn in a new trace. Returns { result, timings }; a failure propagates as it is.
export async function traced(fn, { now = () => performance.now() } = {}) {
  const trace = newTrace(now);
  const result = await storage.run({ trace, phase: null }, fn);
  return { result, timings: summarize(trace, now()) };
}

const clockOf = (ctx) => ctx?.trace.now ?? (() => performance.now());

// A query's duration, as 'read' or 'write'. Reads made while waiting count as waiting.
export function recordQuery(kind, ms) {
  const ctx = storage.getStore();
  if (!ctx) return;
  if (ctx.phase === 'wait') {
    ctx.trace.waiting.reads += 1;
    return;
  }
  if (kind !== 'write') {
    ctx.trace.reads.count += 1;
    // Inside timeReading the reads' wall time is counted instead.
    if (ctx.phase !== 'read') ctx.trace.reads.ms += ms;
    return;
  }
  ctx.trace.writes.count += 1;
  ctx.trace.writes.sumMs += ms;
  // Inside timeWriting the batch's wall time is counted instead.
  if (ctx.phase !== 'write') ctx.trace.writes.ms += ms;
}

// Runs one query (fn) and records its duration as kind.
export async function timeQuery(kind, fn) {
  const now = clockOf(storage.getStore());
  const startedAt = now();
  try {
    return await fn();
  } finally {
    recordQuery(kind, now() - startedAt);
  }
}

// A batch of queries that may run concurrently: its wall time counts as writing or reading, not each query's own.
async function timeBatch(phase, bucket, fn) {
  const ctx = storage.getStore();
  if (!ctx || ctx.phase) return fn();
  const start = ctx.trace.now();
  try {
    return await storage.run({ ...ctx, phase }, fn);
  } finally {
    ctx.trace[bucket].ms += ctx.trace.now() - start;
  }
}

export const timeWriting = (fn) => timeBatch('write', 'writes', fn);
export const timeReading = (fn) => timeBatch('read', 'reads', fn);

// Pure planning (synchronous): its time counts as planning, once when calls nest.
export function timePlanning(fn) {
  const ctx = storage.getStore();
  if (!ctx || ctx.trace.planning) return fn();
  const start = ctx.trace.now();
  ctx.trace.planning = true;
  try {
    return fn();
  } finally {
    ctx.trace.planning = false;
    ctx.trace.planMs += ctx.trace.now() - start;
  }
}

// Waiting for RethinkDB (polling until new primaries act, replicas are ready...): the whole wait counts as waiting,
// its reads included.
export async function timeWaiting(fn) {
  const ctx = storage.getStore();
  if (!ctx || ctx.phase === 'wait') return fn();
  const start = ctx.trace.now();
  try {
    return await storage.run({ ...ctx, phase: 'wait' }, fn);
  } finally {
    ctx.trace.waiting.ms += ctx.trace.now() - start;
  }
}

const round = (ms) => Math.round(ms * 10) / 10;

// Milliseconds, one decimal. otherMs: the rest (locks, marks, audit, the policy, the event loop).
export function summarize(trace, now = trace.now()) {
  const totalMs = now - trace.startedAt;
  const accounted = trace.reads.ms + trace.writes.ms + trace.waiting.ms + trace.planMs;
  return {
    totalMs: round(totalMs),
    readMs: round(trace.reads.ms),
    planMs: round(trace.planMs),
    writeMs: round(trace.writes.ms),
    meanWriteMs: trace.writes.count > 0 ? round(trace.writes.sumMs / trace.writes.count) : null,
    waitMs: round(trace.waiting.ms),
    otherMs: round(Math.max(0, totalMs - accounted)),
    queries: { reads: trace.reads.count, writes: trace.writes.count, readsWhileWaiting: trace.waiting.reads },
  };
}
