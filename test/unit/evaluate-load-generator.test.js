// The load generator against a fake driver on manual time: open-loop issue, deadlines, errors, reconnects, load.

import { EventEmitter } from 'node:events';
import { createLoadGenerator } from '../../bench/evaluate/load-generator.js';
import { createKeyChooser } from '../../bench/evaluate/zipf.js';

// Time that moves only when a test says so; timers fire in due order, with promise callbacks run in between.
function createManualTime(start = 1000) {
  let now = start;
  let nextId = 0;
  const pending = new Map();
  const flush = async () => { for (let i = 0; i < 5; i += 1) await new Promise((resolve) => { setImmediate(resolve); }); };
  return {
    clock: { now: () => now },
    timers: {
      setTimeout: (fn, ms) => { nextId += 1; pending.set(nextId, { id: nextId, at: now + Math.max(0, ms), fn }); return nextId; },
      clearTimeout: (id) => { pending.delete(id); },
    },
    async advance(ms) {
      const target = now + ms;
      for (;;) {
        await flush();
        const due = [...pending.values()].filter((t) => t.at <= target).sort((a, b) => a.at - b.at || a.id - b.id)[0];
        if (!due) break;
        pending.delete(due.id);
        now = Math.max(now, due.at);
        due.fn();
      }
      now = target;
      await flush();
    },
    // The event loop was busy: time passes and no timer fires.
    stall(ms) { now += ms; },
  };
}

// A driver double: r.db(db).table(t).get(k)[.update(v)] and .insert(docs, opts), each .run(conn) answered by
// answer(query). Connections are event emitters that a test can break; refused ports fail to connect.
function createFakeR({ answer = () => Promise.resolve(null), refuse = new Set() } = {}) {
  const queries = [];
  const connections = [];
  const leaf = (query) => ({ run: (conn) => { const q = { ...query, conn: conn.id }; queries.push(q); return answer(q); } });
  const tableTerm = (db, table) => ({
    get: (key) => ({ ...leaf({ kind: 'read', db, table, key }), update: (value) => leaf({ kind: 'update', db, table, key, value }) }),
    insert: (docs, options) => leaf({ kind: 'insert', db, table, docs, options }),
  });
  const r = {
    db: (db) => ({ table: (table) => tableTerm(db, table) }),
    expr: (value) => leaf({ kind: 'expr', value }),
    async connect({ host, port }) {
      if (refuse.has(port)) throw new Error(`Could not connect to ${host}:${port}.\nconnect ECONNREFUSED ${host}:${port}`);
      const conn = Object.assign(new EventEmitter(), { id: `${host}:${port}#${connections.length}`, port, open: true });
      conn.close = async () => { conn.open = false; };
      conn.breakNow = () => { conn.open = false; conn.emit('close'); };
      connections.push(conn);
      return conn;
    },
  };
  return { r, queries, connections };
}

const entries = [{ name: 'a', host: 'h', port: 1 }, { name: 'b', host: 'h', port: 2 }];
const never = () => new Promise(() => {});

function makeGenerator(fake, time, options = {}) {
  return createLoadGenerator({
    r: fake.r, entries, db: 'ycsb', table: 'usertable', rateOpsPerSec: 100, keyCount: 1000, seed: 7,
    connectionsPerEntry: 2, opTimeoutMs: 250, clock: time.clock, timers: time.timers, ...options,
  });
}

async function runFor(generator, time, ms, drainMs = 300) {
  await generator.start();
  await time.advance(ms);
  const stopping = generator.stop();
  await time.advance(drainMs);
  return stopping;
}

describe('open-loop issue', () => {
  test('when no op is ever answered, then ops are still issued on schedule and each times out at its deadline', async () => {
    const time = createManualTime();
    const { records, t0, examples } = await runFor(makeGenerator(createFakeR({ answer: never }), time), time, 1000);
    expect(records).toHaveLength(101); // due at 0, 10, ..., 1000 ms
    expect(records.map((rec) => rec.startMs - t0)).toEqual(records.map((_, i) => i * 10));
    expect(records.every((rec) => !rec.ok && rec.errorKind === 'timeout' && rec.endMs - rec.issuedMs === 250)).toBe(true);
    expect(examples).toEqual({ timeout: 'no answer within 250 ms' });
  });

  test('when the event loop stalls, then the late ops are issued in one batch with their due times kept', async () => {
    const time = createManualTime();
    const generator = makeGenerator(createFakeR(), time);
    await generator.start();
    await time.advance(100);
    time.stall(500);
    await time.advance(100);
    const stopping = generator.stop();
    await time.advance(300);
    const { records, t0 } = await stopping;
    expect(records).toHaveLength(71);
    // op 11 was due at 110 ms; the timer fired at 600 ms and issued ops 11 to 60 together
    const batch = records.filter((rec) => rec.issuedMs - t0 === 600);
    expect(batch.map((rec) => rec.i)).toEqual(Array.from({ length: 50 }, (_, k) => 11 + k));
    const late = records.filter((rec) => rec.issuedMs - rec.startMs > 0);
    expect(late).toHaveLength(49);
    expect(Math.max(...late.map((rec) => rec.issuedMs - rec.startMs))).toBe(490);
    // latency counts from the due time: the stall shows up as latency, not as missing ops
    expect(late.every((rec) => rec.ok && rec.endMs - rec.startMs === rec.issuedMs - rec.startMs)).toBe(true);
    expect(records[70].startMs - t0).toBe(700);
  });

  test('when ops are issued, then they go round-robin over entries and their connections', async () => {
    const time = createManualTime();
    const fake = createFakeR();
    const { records } = await runFor(makeGenerator(fake, time), time, 70);
    expect(records.map((rec) => rec.entry)).toEqual(['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']);
    expect(fake.queries.map((q) => q.conn)).toEqual(['h:1#0', 'h:2#2', 'h:1#1', 'h:2#3', 'h:1#0', 'h:2#2', 'h:1#1', 'h:2#3']);
  });

  test('when reads and updates are issued, then a read is get(key) and an update sets field0 to 100 characters', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: (q) => Promise.resolve(q.kind === 'update' ? { replaced: 1, errors: 0 } : { id: q.key }) });
    const { records } = await runFor(makeGenerator(fake, time), time, 2000);
    const chooser = createKeyChooser({ keyCount: 1000, seed: 7 });
    expect(records.map((rec) => rec.key)).toEqual(records.map(() => chooser.next()));
    expect(fake.queries.map((q) => [q.kind, q.key])).toEqual(records.map((rec) => [rec.kind, rec.key]));
    const updates = fake.queries.filter((q) => q.kind === 'update');
    expect(updates.length).toBeGreaterThan(60);
    expect(updates.length).toBeLessThan(140);
    expect(updates.every((q) => Object.keys(q.value).join() === 'field0' && q.value.field0.length === 100)).toBe(true);
    expect(fake.queries.every((q) => q.db === 'ycsb' && q.table === 'usertable')).toBe(true);
    expect(records.every((rec) => rec.ok && rec.errorKind === null)).toBe(true);
  });

  test('when two generators share a seed, then they issue the same ops', async () => {
    const runOnce = async () => {
      const time = createManualTime();
      const { records } = await runFor(makeGenerator(createFakeR(), time, { readFraction: 0.3 }), time, 500);
      return records.map((rec) => [rec.kind, rec.key, rec.entry]);
    };
    expect(await runOnce()).toEqual(await runOnce());
  });
});

describe('failures', () => {
  test('when the server refuses an op, then it fails with its kind and the first message of each kind is kept', async () => {
    const quorum = 'Cannot perform read: The primary replica isn\'t connected to a quorum of replicas. The read was not performed, you can do an outdated read using `read_mode="outdated"`.';
    const shard = 'Cannot perform write: primary replica for shard ["", "Suser3") not available';
    const answer = (q) => (q.kind === 'read'
      ? Promise.reject(Object.assign(new Error(`${quorum} in:\n...`), { name: 'ReqlOpFailedError', msg: quorum }))
      : Promise.resolve({ replaced: 0, errors: 1, first_error: shard }));
    const time = createManualTime();
    const { records, examples } = await runFor(makeGenerator(createFakeR({ answer }), time), time, 500);
    expect(records.filter((rec) => rec.kind === 'read').every((rec) => rec.errorKind === 'no-quorum')).toBe(true);
    expect(records.filter((rec) => rec.kind === 'update').every((rec) => rec.errorKind === 'primary-unavailable')).toBe(true);
    expect(examples).toEqual({ 'no-quorum': quorum, 'primary-unavailable': shard });
  });

  test('when an answer comes after the deadline, then the op stays a timeout recorded at the deadline', async () => {
    const late = [];
    const answer = () => new Promise((resolve) => { late.push(resolve); });
    const time = createManualTime();
    const generator = makeGenerator(createFakeR({ answer }), time);
    await generator.start();
    await time.advance(300);
    late.forEach((resolve) => resolve({ id: 'x' }));
    const stopping = generator.stop();
    await time.advance(300);
    const { records } = await stopping;
    expect(records.slice(0, 6).every((rec) => rec.errorKind === 'timeout' && rec.endMs === rec.issuedMs + 250)).toBe(true);
  });

  test('when a connection breaks, then ops given to it fail as connection at once until it is replaced', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: (q) => Promise.resolve({ id: q.key }) });
    const generator = makeGenerator(fake, time, { reconnectMinMs: 100 });
    await generator.start();
    await time.advance(95);
    fake.connections[0].breakNow(); // entry a's first connection: ops 0, 4, 8, ...
    await time.advance(300);
    const stopping = generator.stop();
    await time.advance(300);
    const { records, reconnects, examples } = await stopping;
    const failed = records.filter((rec) => !rec.ok);
    expect(failed.map((rec) => rec.i)).toEqual([12, 16]); // due at 120 and 160 ms; replaced at 195 ms
    expect(failed.every((rec) => rec.errorKind === 'connection' && rec.endMs === rec.issuedMs)).toBe(true);
    expect(records.find((rec) => rec.i === 20).ok).toBe(true);
    expect(reconnects).toEqual({ a: 1, b: 0 });
    expect(examples.connection).toBe('no open connection to a (connection closed)');
  });

  test('when a connection breaks with client resilient, then an op given to it waits for the reconnect, and none fails', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: (q) => Promise.resolve({ id: q.key }) });
    const generator = makeGenerator(fake, time, { client: 'resilient' });
    await generator.start();
    await time.advance(95);
    fake.connections[0].breakNow();
    await time.advance(300);
    const stopping = generator.stop();
    await time.advance(300);
    const { records, reconnects } = await stopping;
    expect(records.filter((rec) => !rec.ok)).toEqual([]);
    expect(records.length).toBeGreaterThan(30);
    expect(reconnects).toEqual({ a: 1, b: 0 });
    // Ops 12 and 16, due while it was closed, went on the new connection.
    expect(fake.queries.filter((q) => q.kind !== 'expr' && q.conn === fake.connections[4].id).length).toBeGreaterThan(0);
  });

  test('when an update is in flight as its connection closes with client resilient, then it is not sent again and fails as connection (unknown)', async () => {
    const time = createManualTime();
    let broke = false;
    const fake = createFakeR({
      answer: (q) => {
        if (q.kind === 'update' && !broke) { broke = true; return Promise.reject(Object.assign(new Error('Connection is closed.'), { name: 'ReqlDriverError' })); }
        return Promise.resolve({ id: q.key, replaced: 1 });
      },
    });
    const { records } = await runFor(makeGenerator(fake, time, { client: 'resilient' }), time, 100);
    const failed = records.filter((rec) => !rec.ok);
    expect(failed.map((rec) => [rec.kind, rec.errorKind, rec.errorType])).toEqual([['update', 'connection', 'OutcomeUnknownError']]);
    expect(fake.queries.filter((q) => q.kind === 'update' && q.key === failed[0].key)).toHaveLength(1);
  });

  test('when a reconnect is refused, then it retries with doubling backoff', async () => {
    const time = createManualTime();
    const refuse = new Set();
    const fake = createFakeR({ refuse });
    const generator = makeGenerator(fake, time, { reconnectMinMs: 100, reconnectMaxMs: 1000 });
    await generator.start();
    refuse.add(2);
    const attempts = [];
    const connect = fake.r.connect;
    fake.r.connect = (opts) => { attempts.push(time.clock.now()); return connect(opts); };
    fake.connections[2].breakNow();
    await time.advance(1000);
    refuse.delete(2);
    await time.advance(1000);
    const stopping = generator.stop();
    await time.advance(300);
    const { reconnects } = await stopping;
    expect(attempts.map((at) => at - 1000)).toEqual([100, 300, 700, 1500]);
    expect(reconnects).toEqual({ a: 0, b: 1 });
  });

  test('when an op is in flight as its connection closes, then it fails as connection', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: () => Promise.reject(Object.assign(new Error('Connection is closed.'), { msg: 'Connection is closed.' })) });
    const { records } = await runFor(makeGenerator(fake, time), time, 30);
    expect(records.every((rec) => rec.errorKind === 'connection')).toBe(true);
  });
});

describe('start, stop and options', () => {
  test('when an entry cannot be reached, then start fails naming it and closes what it opened', async () => {
    const time = createManualTime();
    const fake = createFakeR({ refuse: new Set([2]) });
    const generator = makeGenerator(fake, time);
    await expect(generator.start()).rejects.toThrow(/could not connect: Could not connect to h:2/);
    expect(fake.connections.every((conn) => conn.open === false)).toBe(true);
    expect(generator.progress().state).toBe('failed');
  });

  test('when stopped, then every connection is closed and the run cannot be stopped again', async () => {
    const time = createManualTime();
    const fake = createFakeR();
    const generator = makeGenerator(fake, time);
    await runFor(generator, time, 100);
    expect(fake.connections.every((conn) => conn.open === false)).toBe(true);
    await expect(generator.stop()).rejects.toThrow(/stopped/);
  });

  test('when options are wrong, then it says every problem at once', () => {
    expect(() => createLoadGenerator({ r: createFakeR().r, entries: [], rateOpsPerSec: 0, keyCount: 1.5, readFraction: 2 }))
      .toThrow(/entries.*rateOpsPerSec.*readFraction.*keyCount/);
  });
});

describe('load', () => {
  test('when loading, then it inserts YCSB records in batches, replacing on conflict', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: (q) => Promise.resolve({ inserted: q.docs.length, replaced: 0, unchanged: 0, errors: 0 }) });
    const totals = await makeGenerator(fake, time).load(1200, { batch: 500 });
    expect(totals).toEqual({ inserted: 1200, replaced: 0, unchanged: 0 });
    expect(fake.queries.map((q) => [q.kind, q.docs.length, q.options])).toEqual([
      ['insert', 500, { conflict: 'replace' }], ['insert', 500, { conflict: 'replace' }], ['insert', 200, { conflict: 'replace' }],
    ]);
    const docs = fake.queries.flatMap((q) => q.docs);
    expect(docs.map((d) => d.id)).toEqual(docs.map((_, i) => `user${i}`));
    expect(docs.every((d) => Object.keys(d).length === 11 && Array.from({ length: 10 }, (_, f) => d[`field${f}`].length).every((n) => n === 100))).toBe(true);
    expect(fake.connections.every((conn) => conn.open === false)).toBe(true);
  });

  test('when the server reports an insert error, then load fails with it', async () => {
    const time = createManualTime();
    const fake = createFakeR({ answer: () => Promise.resolve({ inserted: 0, errors: 1, first_error: 'Cannot perform write: no replica is available' }) });
    await expect(makeGenerator(fake, time).load(10)).rejects.toThrow(/at user0: Cannot perform write: no replica is available/);
  });
});
