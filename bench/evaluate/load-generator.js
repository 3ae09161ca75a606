// Open-loop YCSB-style load on RethinkDB for the evaluation: op i is due at t0 + i / rate whatever happened to
// the ops before it, so a stalled server shows up as latency and failures rather than as fewer requests.

import { performance } from 'node:perf_hooks';
import { createResilientConnection } from '../../examples/clients/resilient-connection.js';
import { createKeyChooser, createSeededRandom, keyName } from './zipf.js';

const FIELD_COUNT = 10;
const FIELD_LENGTH = 100;
const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

// RethinkDB 2.4's availability errors (src/clustering/**: exec_primary.cc, table_query_client.cc) and the
// driver's connection errors, most specific first.
const ERROR_KINDS = [
  ['primary-changing', /primary replica is currently changing/i],
  ['no-quorum', /isn't connected to a quorum of replicas/i],
  ['lost-contact', /lost contact with/i],
  ['table-unavailable', /table configuration|no replica is available|no replicas are ready|does not have any data available|not available for any operations/i],
  ['primary-unavailable', /primary replicas? .*(not available|unavailable)|not available/i],
  ['connection', /connection is closed|could not connect|ECONNREFUSED|ECONNRESET|EPIPE|EHOSTUNREACH|socket hang up/i],
];

export function errorMessage(err) {
  return String(err?.msg ?? err?.message ?? err);
}

// The kind of a failed op, from the error's message: one of ERROR_KINDS' names, or 'other'.
export function classifyError(err) {
  const message = errorMessage(err);
  const found = ERROR_KINDS.find(([, pattern]) => pattern.test(message));
  return found ? found[0] : 'other';
}

const ALPHABET_CODES = [...ALPHABET].map((ch) => ch.charCodeAt(0));

function randomString(random, length) {
  const codes = new Array(length);
  for (let i = 0; i < length; i += 1) codes[i] = ALPHABET_CODES[Math.floor(random() * ALPHABET_CODES.length)];
  return String.fromCharCode(...codes);
}

// A YCSB usertable record: id plus field0..field9 of 100 characters each.
function makeDocument(keyNumber, random) {
  const doc = { id: keyName(keyNumber) };
  for (let f = 0; f < FIELD_COUNT; f += 1) doc[`field${f}`] = randomString(random, FIELD_LENGTH);
  return doc;
}

function connectWithin({ r, entry, connectTimeoutMs, timers }) {
  return new Promise((resolve, reject) => {
    let done = false;
    const timer = timers.setTimeout(() => {
      done = true;
      reject(new Error(`Could not connect to ${entry.name} (${entry.host}:${entry.port}) within ${connectTimeoutMs} ms`));
    }, connectTimeoutMs);
    // An entry may carry credentials (the chart's servers have an admin password); without them the driver logs in
    // as admin with no password, as the process labs' servers expect.
    const credentials = entry.user ? { user: entry.user, password: entry.password ?? '' } : {};
    r.connect({ host: entry.host, port: entry.port, timeout: Math.max(1, Math.ceil(connectTimeoutMs / 1000)), ...credentials }).then(
      (conn) => {
        timers.clearTimeout(timer);
        if (done) conn.close({ noreplyWait: false }).catch(() => {});
        else resolve(conn);
      },
      (err) => { timers.clearTimeout(timer); if (!done) reject(err); },
    );
  });
}

// connectionsPerEntry connections to each entry. client 'plain': a broken one is replaced in the background with
// exponential backoff; meanwhile its slot has no connection and ops given to it fail at once as 'connection'. The
// backoff is capped low (reconnectMaxMs) because a server's measured recovery includes up to that much of it.
// client 'resilient': each slot is examples/clients/resilient-connection.js (what docs/install.md asks of an
// application): an op waits for the reconnect, reads are sent again, updates never (their outcome is then unknown).
function createConnectionPool({
  r, entries, connectionsPerEntry, connectTimeoutMs, reconnectMinMs, reconnectMaxMs, timers, client = 'plain', opTimeoutMs = 5000,
}) {
  if (client === 'resilient') return createResilientPool({ r, entries, connectionsPerEntry, connectTimeoutMs, timers, opTimeoutMs });
  const slots = entries.flatMap((entry) => Array.from({ length: connectionsPerEntry },
    (_, index) => ({ entry, index, conn: null, retryTimer: null, backoffMs: reconnectMinMs, reconnects: 0, lastError: null })));
  let closed = false;

  function attach(slot, conn) {
    slot.conn = conn;
    slot.backoffMs = reconnectMinMs;
    conn.on?.('close', () => markBroken(slot, conn, 'connection closed'));
    conn.on?.('error', (err) => markBroken(slot, conn, errorMessage(err)));
  }

  function markBroken(slot, conn, reason) {
    if (slot.conn !== conn) return;
    slot.conn = null;
    slot.lastError = reason;
    conn.close?.({ noreplyWait: false }).catch(() => {});
    scheduleReconnect(slot);
  }

  function scheduleReconnect(slot) {
    if (closed || slot.retryTimer) return;
    slot.retryTimer = timers.setTimeout(async () => {
      try {
        const conn = await connectWithin({ r, entry: slot.entry, connectTimeoutMs, timers });
        slot.retryTimer = null;
        if (closed) { conn.close({ noreplyWait: false }).catch(() => {}); return; }
        slot.reconnects += 1;
        attach(slot, conn);
      } catch (err) {
        slot.retryTimer = null;
        slot.lastError = errorMessage(err);
        slot.backoffMs = Math.min(reconnectMaxMs, slot.backoffMs * 2);
        scheduleReconnect(slot);
      }
    }, slot.backoffMs);
  }

  // All or nothing: a run must not start with an entry silently missing.
  async function open() {
    const results = await Promise.allSettled(slots.map((slot) => connectWithin({ r, entry: slot.entry, connectTimeoutMs, timers })));
    const failure = results.find((res) => res.status === 'rejected');
    if (failure) {
      await Promise.all(results.filter((res) => res.status === 'fulfilled')
        .map((res) => res.value.close({ noreplyWait: false }).catch(() => {})));
      throw new Error(`load generator could not connect: ${errorMessage(failure.reason)}`);
    }
    results.forEach((res, i) => attach(slots[i], res.value));
  }

  async function close() {
    closed = true;
    for (const slot of slots) if (slot.retryTimer) timers.clearTimeout(slot.retryTimer);
    const open = slots.filter((slot) => slot.conn).map((slot) => slot.conn);
    for (const slot of slots) slot.conn = null;
    await Promise.all(open.map((conn) => conn.close({ noreplyWait: false }).catch(() => {})));
  }

  const reportBroken = (slot, conn, reason) => { if (conn.open === false) markBroken(slot, conn, reason); };
  return {
    open, close, slotFor: (i) => slotOf(slots, entries, connectionsPerEntry, i), reportBroken,
    reconnects: () => reconnectsByEntry(slots, entries, (s) => s.reconnects), anyConnection: () => slots.find((s) => s.conn)?.conn ?? null,
  };
}

// Op i goes to entry i mod E, and to that entry's connections in turn (both pools).
function slotOf(slots, entries, connectionsPerEntry, i) {
  const entryIndex = i % entries.length;
  const connIndex = Math.floor(i / entries.length) % connectionsPerEntry;
  return slots[entryIndex * connectionsPerEntry + connIndex];
}

const reconnectsByEntry = (slots, entries, count) => Object.fromEntries(entries.map((e) => [e.name,
  slots.filter((s) => s.entry === e).reduce((n, s) => n + count(s), 0)]));

function createResilientPool({ r, entries, connectionsPerEntry, connectTimeoutMs, timers, opTimeoutMs }) {
  const slots = entries.flatMap((entry) => Array.from({ length: connectionsPerEntry }, (_, index) => ({
    entry,
    index,
    conn: null,
    db: createResilientConnection({
      r, connect: () => connectWithin({ r, entry, connectTimeoutMs, timers }), maxWaitMs: opTimeoutMs, sleep: (ms) => new Promise((resolve) => { timers.setTimeout(resolve, ms); }),
    }),
  })));
  return {
    // The first query of each slot connects it; all or nothing, as the plain pool.
    async open() {
      const results = await Promise.allSettled(slots.map((slot) => slot.db.run(r.expr(1), { resend: true })));
      const failure = results.find((res) => res.status === 'rejected');
      if (failure) {
        await Promise.all(slots.map((slot) => slot.db.close()));
        throw new Error(`load generator could not connect: ${errorMessage(failure.reason)}`);
      }
    },
    close: () => Promise.all(slots.map((slot) => slot.db.close())),
    slotFor: (i) => slotOf(slots, entries, connectionsPerEntry, i),
    reportBroken: () => {},
    reconnects: () => reconnectsByEntry(slots, entries, (s) => s.db.reconnects()),
    // None to lend: reading the counters back and loading the documents open one of their own.
    anyConnection: () => null,
  };
}

// What an answered op means: an update can answer with errors in its result instead of rejecting.
function outcomeOfResult(kind, result) {
  if (kind === 'update' && result?.errors > 0) {
    const message = result.first_error ?? 'update reported errors';
    return { errorKind: classifyError(message), message };
  }
  return { errorKind: null };
}

// Runs one op with its deadline and settles its record once: the first of answer, error or deadline wins.
function createOpRunner({ tableTerm, pool, timers, opTimeoutMs, onSettled }) {
  return function runOp(record, slot, buildValue) {
    const conn = slot.conn;
    if (!conn && !slot.db) {
      const cause = slot.lastError ? ` (${slot.lastError})` : '';
      onSettled(record, { errorKind: 'connection', message: `no open connection to ${slot.entry.name}${cause}` });
      return;
    }
    let settled = false;
    const settle = (outcome) => {
      if (settled) return;
      settled = true;
      timers.clearTimeout(timer);
      onSettled(record, outcome);
    };
    const timer = timers.setTimeout(() => settle({ errorKind: 'timeout', message: `no answer within ${opTimeoutMs} ms` }), opTimeoutMs);
    const query = record.kind === 'read'
      ? tableTerm.get(record.key)
      : tableTerm.get(record.key).update(buildValue());
    const sent = slot.db ? slot.db.run(query, { resend: record.kind === 'read' }) : Promise.resolve().then(() => query.run(conn));
    sent.then(
      (result) => settle(outcomeOfResult(record.kind, result)),
      (err) => {
        const errorKind = classifyError(err);
        if (errorKind === 'connection' && conn) pool.reportBroken(slot, conn, errorMessage(err));
        settle({ errorKind, message: errorMessage(err), errorType: err?.name ?? null });
      },
    );
  };
}

function validateOptions({ entries, rateOpsPerSec, readFraction, keyCount, connectionsPerEntry, opTimeoutMs }) {
  const problems = [];
  if (!Array.isArray(entries) || entries.length === 0) problems.push('entries must list at least one { name, host, port }');
  if (!(rateOpsPerSec > 0)) problems.push(`rateOpsPerSec must be positive, got ${rateOpsPerSec}`);
  if (!(readFraction >= 0 && readFraction <= 1)) problems.push(`readFraction must be within [0, 1], got ${readFraction}`);
  if (!(Number.isInteger(keyCount) && keyCount > 0)) problems.push(`keyCount must be a positive integer, got ${keyCount}`);
  if (!(Number.isInteger(connectionsPerEntry) && connectionsPerEntry > 0)) problems.push(`connectionsPerEntry must be a positive integer, got ${connectionsPerEntry}`);
  if (!(opTimeoutMs > 0)) problems.push(`opTimeoutMs must be positive, got ${opTimeoutMs}`);
  if (problems.length > 0) throw new RangeError(`invalid load generator options: ${problems.join('; ')}`);
}

// Issues every op that is due, then sleeps until the next one is: a late timer catches up in one batch, and
// stop() issues whatever fell due before it, so the op count depends only on the run's length.
function createOpenLoopScheduler({ rateOpsPerSec, clock, timers, issue }) {
  const intervalMs = 1000 / rateOpsPerSec;
  let t0 = null;
  let issued = 0;
  let timer = null;

  function issueDue() {
    const due = Math.floor((clock.now() - t0) / intervalMs) + 1;
    while (issued < due) {
      issue(issued, t0 + issued * intervalMs);
      issued += 1;
    }
  }

  function tick() {
    issueDue();
    timer = timers.setTimeout(tick, Math.max(0, t0 + issued * intervalMs - clock.now()));
  }

  return {
    start() { t0 = clock.now(); tick(); return t0; },
    stop() {
      timers.clearTimeout(timer);
      timer = null;
      issueDue();
    },
    issuedCount: () => issued,
  };
}

// Resolves when the count of ops in flight reaches zero (each op settles by its own deadline).
function createInFlightTracker() {
  let count = 0;
  let waiters = [];
  return {
    add() { count += 1; },
    done() {
      count -= 1;
      if (count === 0) { waiters.forEach((resolve) => resolve()); waiters = []; }
    },
    drained: () => (count === 0 ? Promise.resolve() : new Promise((resolve) => waiters.push(resolve))),
    count: () => count,
  };
}

// Keeps the records, the first message of each error kind, and the count of ops in flight.
function createRecorder({ clock }) {
  const records = [];
  const examples = {};
  const inFlight = createInFlightTracker();
  return {
    records,
    examples,
    inFlight,
    opened(record) { records.push(record); inFlight.add(); },
    settled(record, { errorKind, message, errorType = null }) {
      record.endMs = clock.now();
      record.ok = errorKind === null;
      record.errorKind = errorKind;
      if (errorType) record.errorType = errorType;
      if (errorKind !== null && !(errorKind in examples)) examples[errorKind] = message;
      inFlight.done();
    },
  };
}

// Op i: its connection by round robin, then from the seeded streams its kind, its key and an update's value.
// countWrites: every update also adds 1 to the record's counter `n` (checkCounters below reads them back).
function createOpIssuer({ pool, keys, random, readFraction, clock, recorder, runOp, counter = null }) {
  const buildValue = counter
    ? () => ({ field0: randomString(random, FIELD_LENGTH), n: counter() })
    : () => ({ field0: randomString(random, FIELD_LENGTH) });
  return function issue(i, dueMs) {
    const slot = pool.slotFor(i);
    const kind = random() < readFraction ? 'read' : 'update';
    const record = {
      i, startMs: dueMs, issuedMs: clock.now(), endMs: null, ok: false, kind, key: keys.next(), entry: slot.entry.name, errorKind: null,
    };
    recorder.opened(record);
    runOp(record, slot, buildValue);
  };
}

// Waits for ops in flight (each settles by its own deadline), with a spare second as a backstop.
async function drain(inFlight, timers, opTimeoutMs) {
  let backstop;
  const spare = new Promise((resolve) => { backstop = timers.setTimeout(resolve, opTimeoutMs + 1000); });
  await Promise.race([inFlight.drained(), spare]);
  timers.clearTimeout(backstop);
}

// createLoadGenerator(...).start() connects and starts issuing; stop() returns { records, t0, examples, reconnects }.
// Records: { i, startMs (due), issuedMs, endMs, ok, kind, key, entry, errorKind } on clock.now()'s scale.
export function createLoadGenerator({
  r, entries, db, table, rateOpsPerSec, readFraction = 0.5, keyCount, connectionsPerEntry = 4, opTimeoutMs = 5000,
  seed, clock = { now: () => performance.now() }, timers = { setTimeout, clearTimeout },
  connectTimeoutMs = 5000, reconnectMinMs = 100, reconnectMaxMs = 500, countWrites = false, client = 'plain',
}) {
  validateOptions({ entries, rateOpsPerSec, readFraction, keyCount, connectionsPerEntry, opTimeoutMs });
  if (!['plain', 'resilient'].includes(client)) throw new Error(`client must be plain or resilient, got ${client}`);
  const pool = createConnectionPool({
    r, entries, connectionsPerEntry, connectTimeoutMs, reconnectMinMs, reconnectMaxMs, timers, client, opTimeoutMs,
  });
  const recorder = createRecorder({ clock });
  const runOp = createOpRunner({ tableTerm: r.db(db).table(table), pool, timers, opTimeoutMs, onSettled: recorder.settled });
  const issue = createOpIssuer({
    pool, keys: createKeyChooser({ keyCount, seed }), random: createSeededRandom((Number(seed) ^ 0x2545f491) >>> 0),
    readFraction, clock, recorder, runOp, counter: countWrites ? () => r.row('n').default(0).add(1) : null,
  });
  const scheduler = createOpenLoopScheduler({ rateOpsPerSec, clock, timers, issue });
  let state = 'new';
  let t0 = null;

  async function start() {
    if (state !== 'new') throw new Error(`start() called when the load generator is ${state}`);
    state = 'starting';
    await pool.open().catch((err) => { state = 'failed'; throw err; });
    state = 'running';
    t0 = scheduler.start();
    return { t0 };
  }

  async function stop() {
    if (state !== 'running') throw new Error(`stop() called when the load generator is ${state}`);
    state = 'stopping';
    scheduler.stop();
    await drain(recorder.inFlight, timers, opTimeoutMs);
    const counters = countWrites ? await readCounters() : null;
    await pool.close();
    state = 'stopped';
    return {
      records: recorder.records, t0, examples: recorder.examples, reconnects: pool.reconnects(), ...(counters ? { counters } : {}),
    };
  }

  // The counters of every key updated, read back (majority) and checked against what the clients were told.
  async function readCounters() {
    const updates = recorder.records.filter((rec) => rec.kind === 'update');
    const keys = [...new Set(updates.map((rec) => rec.key))];
    const shared = pool.anyConnection();
    const conn = shared ?? await connectWithin({ r, entry: entries[0], connectTimeoutMs, timers }).catch(() => null);
    if (!conn) return { error: 'no open connection to read the counters back' };
    const read = async () => {
      const rows = keys.length === 0 ? [] : await r.db(db).table(table).getAll(r.args(keys)).pluck('id', 'n').coerceTo('array').run(conn, { readMode: 'majority' });
      return checkCounters(updates, new Map(rows.map((row) => [row.id, row.n ?? 0])));
    };
    try {
      const first = await read();
      if (first.ok) return first;
      // Not what was acknowledged: read once more after the cluster has had time to settle, to tell a read that came
      // too early from a write that is not there.
      await new Promise((resolve) => { timers.setTimeout(resolve, COUNTERS_REREAD_MS); });
      const again = await read();
      return { ...again, firstRead: { missing: first.missing, beyond: first.beyond, wrongKeys: first.wrongKeys } };
    } catch (err) {
      return { error: `the counters could not be read back: ${errorMessage(err)}` };
    } finally {
      if (!shared) await conn.close({ noreplyWait: false }).catch(() => {});
    }
  }

  const load = (count = keyCount, { batch = 500, seed: loadSeed = seed } = {}) => loadDocuments({
    r, entries, db, table, count, batch, seed: loadSeed, pool, connectTimeoutMs, timers,
  });
  const progress = () => ({ state, issued: scheduler.issuedCount(), inFlight: recorder.inFlight.count() });
  return { start, stop, load, progress };
}

// How long after a first read-back that does not add up the counters are read again.
const COUNTERS_REREAD_MS = 3000;

// Pure: the counted writes' check. updates: the update records ({ key, ok, errorType }); applied: key -> the counter
// read back. An update answered OP_FAILED was not applied; one that timed out, lost its connection or answered
// OP_INDETERMINATE may have been. missing: acknowledged increments not found; beyond: increments found beyond the
// acknowledged and the unknown ones (a write applied twice, or one applied that was said not to be).
export function checkCounters(updates, applied) {
  const perKey = new Map();
  for (const rec of updates) {
    const k = perKey.get(rec.key) ?? { acked: 0, unknown: 0, failed: 0 };
    if (rec.ok) k.acked += 1;
    else if (rec.errorType === 'ReqlOpFailedError') k.failed += 1;
    else k.unknown += 1;
    perKey.set(rec.key, k);
  }
  const totals = {
    keys: perKey.size, acked: 0, failed: 0, unknown: 0, unknownApplied: 0, missing: 0, beyond: 0,
  };
  const wrong = [];
  for (const [key, k] of perKey) {
    const n = applied.get(key) ?? 0;
    totals.acked += k.acked;
    totals.failed += k.failed;
    totals.unknown += k.unknown;
    if (n < k.acked || n > k.acked + k.unknown) wrong.push({ key, n, ...k });
    totals.missing += Math.max(0, k.acked - n);
    totals.beyond += Math.max(0, n - k.acked - k.unknown);
    totals.unknownApplied += Math.min(k.unknown, Math.max(0, n - k.acked));
  }
  // The keys that do not add up (at most 20), each with its updates (issued at, answered at, ok, error), to look them
  // up afterwards.
  const listed = wrong.slice(0, 20).map((w) => ({
    ...w,
    updates: updates.filter((rec) => rec.key === w.key).map((rec) => [Math.round(rec.issuedMs ?? 0), rec.endMs === null || rec.endMs === undefined ? null : Math.round(rec.endMs), rec.ok ? 1 : 0, rec.errorType ?? rec.errorKind ?? null]),
  }));
  return { ...totals, ok: totals.missing === 0 && totals.beyond === 0, ...(listed.length > 0 ? { wrongKeys: listed } : {}) };
}

// Inserts user0 .. user(count - 1) in batches with conflict 'replace', so a rerun resets the records.
async function loadDocuments({ r, entries, db, table, count, batch, seed, pool, connectTimeoutMs, timers }) {
  const shared = pool.anyConnection();
  const conn = shared ?? await connectWithin({ r, entry: entries[0], connectTimeoutMs, timers });
  const random = createSeededRandom((Number(seed) ^ 0x1b873593) >>> 0);
  const totals = { inserted: 0, replaced: 0, unchanged: 0 };
  try {
    for (let from = 0; from < count; from += batch) {
      const docs = [];
      for (let k = from; k < Math.min(count, from + batch); k += 1) docs.push(makeDocument(k, random));
      const result = await r.db(db).table(table).insert(docs, { conflict: 'replace' }).run(conn);
      if (result.errors > 0) throw new Error(`loading ${db}.${table} failed at ${keyName(from)}: ${result.first_error}`);
      for (const key of Object.keys(totals)) totals[key] += result[key] ?? 0;
    }
  } finally {
    if (!shared) await conn.close({ noreplyWait: false }).catch(() => {});
  }
  return totals;
}
