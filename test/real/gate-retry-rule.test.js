// The gate's retry rule on two real RethinkDB 2.4.4 servers: no query writes more through the gate than straight to
// the server. First, during real primary handovers: a query that writes one table and then reads another whose
// primary moves is answered as the server answered it, its write applied once. Then, with one server killed (so a
// table on it answers "primary replica ... not available", a table half on it answers so for one shard): random
// queries built with the driver's own terms (zero, one and several writes, writes under functions over sequences,
// do, branch, default, a failure before, inside or after the write), each run on fresh data straight against the
// server and through the gate; the documents written and the answers must be the same, every time.

import fc from 'fast-check';
import { jest } from '@jest/globals';
import pino from 'pino';
import r from 'rethinkdb';
import { loadGateConfig } from '../../gate/src/config.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { eventually, startRealCluster } from '../helpers/real-cluster.js';

jest.setTimeout(600000);

const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };
const db = r.db('atk');
let cluster;
let gate;
let metrics;
let names;
let direct;
let gated;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

beforeAll(async () => {
  cluster = await startRealCluster({ size: 2, tables: [] });
  const [a, b] = cluster.servers.map((s) => s.name);
  names = { a, b };
  await cluster.withConnection(async (c) => {
    await r.dbCreate('atk').run(c);
    for (const t of ['t', 'u', 'v', 'w']) await db.tableCreate(t).run(c);
    const shard = (primary, replicas = [primary]) => ({ primary_replica: primary, replicas, nonvoting_replicas: [] });
    // t on a (always there), u on b (gone once b is killed), v half on each, w on both (its primary moves).
    await db.table('t').config().update({ shards: [shard(a)] }).run(c);
    await db.table('u').config().update({ shards: [shard(b)] }).run(c);
    await db.table('v').config().update({ shards: [shard(a), shard(b)] }).run(c);
    await db.table('w').config().update({ shards: [shard(a, [a, b])] }).run(c);
    await db.wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
    await db.table('w').insert({ id: 'x', n: 0 }).run(c);
  });
  const server = cluster.servers[0];
  metrics = createGateMetrics();
  // The gate's defaults but a short budget: a query it may send again that keeps failing comes back after 0.4 s.
  const config = loadGateConfig({
    GATE_UPSTREAM: `${server.host}:${server.driverPort}`, GATE_PORT: '0', GATE_HOST: '127.0.0.1', GATE_METRICS_PORT: '0', GATE_RETRY_BUDGET_MS: '400', GATE_RETRY_MAX_MS: '100',
  });
  gate = createGate({ config, metrics, clock, logger: pino({ level: 'silent' }) });
  const { port } = await gate.start();
  direct = await r.connect({ host: server.host, port: server.driverPort });
  gated = await r.connect({ host: '127.0.0.1', port });
}, 180000);

afterAll(async () => {
  await direct?.close({ noreplyWait: false }).catch(() => {});
  await gated?.close({ noreplyWait: false }).catch(() => {});
  await gate?.stop(0);
  await cluster?.destroy();
});

const retries = async () => (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'rethinkdb_gate_retries_total').values.reduce((n, v) => n + v.value, 0);
const outcome = (promise) => promise.then((value) => ({ value: stripKeys(value) }), (err) => ({ error: err.name, message: err.message.split('\n')[0] }));
// Generated keys differ from run to run: a result is compared without them, a document without a generated id.
function stripKeys(value) {
  if (Array.isArray(value)) return value.map(stripKeys);
  if (value && typeof value === 'object') {
    const out = {};
    for (const [k, v] of Object.entries(value)) if (k !== 'generated_keys' && !(k === 'id' && typeof v === 'string' && UUID.test(v))) out[k] = stripKeys(v);
    return out;
  }
  return value;
}

describe('the retry rule during real primary handovers', () => {
  test('when a query writes t and then reads w with read_mode majority while w\'s primary moves, then its write is applied once, whatever the read met', async () => {
    const { a, b } = names;
    const tag = 'handover';
    let sent = 0;
    const failures = [];
    let stop = false;
    const loop = async (w) => {
      for (let i = 0; !stop; i += 1) {
        sent += 1;
        try {
          await db.table('t').insert({ tag, q: `${w}-${i}` }).do(() => r.db('atk').table('w', { readMode: 'majority' }).get('x')).run(gated);
        } catch (err) {
          failures.push(`${err.name}: ${err.message.split('\n')[0]}`);
        }
      }
    };
    const loops = [0, 1, 2, 3].map(loop);
    // Moves w's primary back and forth until the reads have met the handover a few times (at most 20 moves).
    for (let move = 0; move < 20 && failures.length < 5; move += 1) {
      const primary = move % 2 === 0 ? b : a;
      await cluster.withConnection((c) => db.table('w').config().update({ shards: [{ primary_replica: primary, replicas: [a, b], nonvoting_replicas: [] }] }).run(c));
      await eventually(() => cluster.withConnection(async (c) => (await db.table('w').status().run(c)).shards[0].primary_replicas[0] === primary), { timeoutMs: 30000, what: `w's primary on ${primary}` });
      await cluster.withConnection((c) => db.table('w').wait({ waitFor: 'all_replicas_ready', timeout: 30 }).run(c));
    }
    stop = true;
    await Promise.all(loops);
    const rows = await db.table('t').filter({ tag }).group('q').count().ungroup().run(direct);
    const twice = rows.filter((row) => row.reduction > 1);
    process.stdout.write(`gate retry rule: ${sent} write-then-read queries while w's primary moved, ${failures.length} failed `
      + `(${[...new Set(failures)].slice(0, 3).join(' | ')}), ${rows.length} rows, ${twice.length} applied twice\n`);
    expect(failures.length).toBeGreaterThan(0);
    expect(twice).toEqual([]);
    // Every query's insert ran once: the failures are the read's, after its write committed.
    expect(rows.length).toBe(sent);
  });
});

describe('the retry rule with one server gone', () => {
  beforeAll(async () => {
    await cluster.stopServer(1, 'SIGKILL');
    await eventually(() => cluster.withConnection(async (c) => (await r.db('rethinkdb').table('server_status').count().run(c)) === 1), { timeoutMs: 30000, what: 'b gone' });
  });

  // Fresh data before each run: t holds a counter and ten rows; v's half on a is emptied (its half on b is gone).
  async function reset() {
    await db.table('t').delete().run(direct);
    await db.table('t').insert([{ id: 'c', n: 0 }, ...Array.from({ length: 10 }, (_, i) => ({ id: `r${i}`, n: i }))]).run(direct);
    await db.table('v').between(r.minval, '7').delete().run(direct, { readMode: 'outdated' });
  }
  const contents = async () => ({
    t: stripKeys(await db.table('t').orderBy('id', 'tag', 'n').run(direct)).map((d) => JSON.stringify(d)).sort(),
    v: (await db.table('v').between(r.minval, '7').count().run(direct, { readMode: 'outdated' })),
  });

  // The pieces: writes (W), failures (F: OP_FAILED of availability or of a missing table or database), reads (R).
  const T = () => db.table('t');
  const writes = {
    insertOne: (tag) => T().insert({ tag }),
    counter: () => T().get('c').update({ n: r.row('n').add(1) }),
    replaceOne: (tag) => T().get('r1').replace({ id: 'r1', tag }),
    deleteOne: () => T().get('r2').delete(),
    insertMany: (tag) => T().insert([{ tag }, { tag, second: true }]),
    updateSelection: () => T().filter((d) => d('n').lt(5)).update({ n: r.row('n').add(10) }),
    insertStreamHalfGone: () => db.table('v').insert(r.range(0, 300).map((i) => r.branch(i.lt(250), { id: r.expr('0-').add(i.coerceTo('string')) }, { id: r.expr('z-').add(i.coerceTo('string')) }))),
    insertGone: (tag) => db.table('u').insert({ tag }),
    pointWriteGone: () => db.table('v').get('9').update({ n: 1 }),
  };
  const fails = {
    missingTable: () => db.table('missing').get(1),
    missingDb: () => r.db('nodb').table('x').count(),
    goneRead: () => db.table('u').get(1),
    goneCount: () => db.table('u').count(),
    halfGoneRead: () => db.table('v').get('9'),
  };
  const reads = {
    count: () => T().count(),
    get: () => T().get('c'),
  };
  const compose = {
    alone: (w) => w,
    thenFail: (w, f) => w.do(() => f),
    failThen: (w, f) => f.do(() => w),
    array: (w, f) => r.expr([w, f]),
    inDocument: (w, f, tag) => T().insert({ tag, x: f }),
    branchWrite: (w, f) => r.branch(T().count().gt(0), w, f),
    defaulted: (w, f) => w.do(() => f.default('d')),
    forEachTables: (w, f, tag) => r.expr(['t', 'missing']).forEach((name) => db.table(name).insert({ tag })),
    contains: (w, f, tag) => r.expr(['t', 't', 'missing']).contains((name) => db.table(name).insert({ tag }).do(() => false)),
    merge: (w, f, tag) => r.expr([{}, {}]).merge(() => ({ x: T().insert({ tag })('inserted') })).do(() => f),
    offsetsOf: (w, f, tag) => r.expr(['t', 'missing']).offsetsOf((name) => db.table(name).insert({ tag }).do(() => false)),
    twoWrites: (w, f, tag) => r.expr([T().insert({ tag }), w]),
    readOnly: (w, f, tag, read) => read.do(() => f),
    readAlone: (w, f, tag, read) => read,
  };
  const pick = (object) => fc.constantFrom(...Object.keys(object));
  const cases = fc.record({ write: pick(writes), fail: pick(fails), read: pick(reads), shape: pick(compose), tag: fc.constantFrom('a', 'b') });
  const build = ({ write, fail, read, shape, tag }) => compose[shape](writes[write](tag), fails[fail](), tag, reads[read]());

  // The shapes, each once, then random ones.
  const examples = [
    { write: 'insertOne', fail: 'missingTable', read: 'count', shape: 'thenFail', tag: 'a' },
    { write: 'counter', fail: 'missingDb', read: 'count', shape: 'thenFail', tag: 'a' },
    { write: 'insertOne', fail: 'missingTable', read: 'count', shape: 'contains', tag: 'a' },
    { write: 'insertOne', fail: 'goneRead', read: 'count', shape: 'merge', tag: 'a' },
    { write: 'insertOne', fail: 'missingTable', read: 'count', shape: 'offsetsOf', tag: 'a' },
    { write: 'insertOne', fail: 'goneRead', read: 'count', shape: 'thenFail', tag: 'a' },
    { write: 'counter', fail: 'goneCount', read: 'count', shape: 'thenFail', tag: 'a' },
    { write: 'insertStreamHalfGone', fail: 'goneRead', read: 'count', shape: 'alone', tag: 'a' },
    { write: 'insertGone', fail: 'goneRead', read: 'count', shape: 'alone', tag: 'a' },
    { write: 'insertOne', fail: 'goneRead', read: 'get', shape: 'readOnly', tag: 'a' },
  ];

  test('when random queries run straight and through the gate, each on fresh data, then the documents written and the answers are the same', async () => {
    const retriesBefore = await retries();
    const seen = { failed: 0, wroteThenFailed: 0 };
    await fc.assert(fc.asyncProperty(cases, async (c) => {
      await reset();
      const fresh = await contents();
      const expected = await outcome(build(c).run(direct));
      const expectedData = await contents();
      await reset();
      const got = await outcome(build(c).run(gated));
      const gotData = await contents();
      if (expected.error) seen.failed += 1;
      if (expected.error && JSON.stringify(expectedData) !== JSON.stringify(fresh)) seen.wroteThenFailed += 1;
      expect({ answer: got, data: gotData }).toEqual({ answer: expected, data: expectedData });
    }), { numRuns: 60, examples: examples.map((e) => [e]), endOnFailure: true });
    const retried = await retries() - retriesBefore;
    process.stdout.write(`gate retry rule: ${60 + examples.length} queries, ${seen.failed} failed straight, ${seen.wroteThenFailed} of them after writing; the gate sent ${retried} again\n`);
    // Not vacuous: some failed after a write committed, and the gate did send some again (the reads of a gone table).
    expect(seen.wroteThenFailed).toBeGreaterThan(0);
    expect(retried).toBeGreaterThan(0);
  });
});
