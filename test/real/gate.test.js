// The query gate (gate/) in front of a `rethinkdb proxy` on four real RethinkDB 2.4.4 servers, with the official
// JavaScript driver: the same answers through the gate as straight to the proxy for a corpus of queries (every
// response type, cursors over many batches and closed early, a changefeed, noreply with noreplyWait, server(), each
// error type, a password user, right and wrong, a document of several MB, many queries pipelined on one connection, a
// client closing mid-query); then writes while the usertable's primaries are moved: no client error, with the
// retries counted.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import pino from 'pino';
import r from 'rethinkdb';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { eventually, settled, startRealCluster } from '../helpers/real-cluster.js';

jest.setTimeout(180000);

const run = promisify(execFile);
const LOGIN = fileURLToPath(new URL('../helpers/driver-login.js', import.meta.url));
const PY_CORPUS = fileURLToPath(new URL('../helpers/python-corpus.py', import.meta.url));
const PYTHON_VENV = fileURLToPath(new URL('../.python-rethinkdb/bin/python', import.meta.url));
const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };
let cluster;
let proxy;
let gate;
let gatePort;
let metrics;
const connections = [];

beforeAll(async () => {
  cluster = await startRealCluster();
  proxy = await cluster.addProxy();
  metrics = createGateMetrics();
  gate = createGate({
    config: {
      port: 0, host: '127.0.0.1', upstream: { host: proxy.host, port: proxy.driverPort }, retry: { budgetMs: 3000, minMs: 20, maxMs: 200 },
      maxFrameBytes: 128 * 1024 * 1024, connectTimeoutMs: 5000, drainSeconds: 5, tls: { enabled: false }, upstreamTls: { enabled: false },
    },
    metrics, clock, logger: pino({ level: 'silent' }),
  });
  ({ port: gatePort } = await gate.start());
  await cluster.withConnection(async (c) => {
    await r.db('ycsb').tableCreate('gate', { shards: 2, replicas: 3 }).run(c);
    await r.db('ycsb').table('gate').wait().run(c);
    await r.db('rethinkdb').table('users').insert({ id: 'gateuser', password: 'right-password' }).run(c);
    await r.db('ycsb').grant('gateuser', { read: true, write: true }).run(c);
  });
}, 120000);

afterAll(async () => {
  for (const c of connections) await c.close({ noreplyWait: false }).catch(() => {});
  await gate?.stop(0);
  await cluster?.destroy();
});

const open = async (via, options = {}) => {
  const c = await r.connect({ host: '127.0.0.1', port: via === 'gate' ? gatePort : proxy.driverPort, ...options });
  connections.push(c);
  return c;
};
// A result or the error as the driver gives it: its class and message.
const outcome = (promise) => promise.then((value) => ({ value }), (err) => ({ error: err.name, message: err.message }));
const metric = async (name, labels = {}) => {
  const m = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (m?.values ?? []).filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
};

// Moves every usertable shard's primary to its next replica, `rounds` times, each once the last has settled, through
// the driver (as a raw config write, not through the manager).
async function movePrimaries(rounds) {
  for (let round = 0; round < rounds; round += 1) {
    await cluster.withConnection(async (conn) => {
      const conf = await r.db('ycsb').table('usertable').config().run(conn);
      const shards = conf.shards.map((s) => ({ ...s, primary_replica: s.replicas[(s.replicas.indexOf(s.primary_replica) + 1) % s.replicas.length] }));
      await r.db('ycsb').table('usertable').config().update({ shards }).run(conn);
    });
    await eventually(() => settled(cluster), { timeoutMs: 30000, what: 'the moved primaries acting' });
  }
}

// [name, (conn) => a promise of a comparable result]
const CORPUS = [
  ['an atom', (c) => r.expr({ a: 1, b: [1, 2, 3], s: 'text' }).run(c)],
  ['a count', (c) => r.db('ycsb').table('usertable').count().run(c)],
  ['a sequence over many batches', async (c) => (await (await r.db('ycsb').table('usertable').orderBy({ index: 'id' }).limit(2000).run(c, { maxBatchRows: 37 })).toArray()).map((d) => d.id)],
  ['a cursor closed after two batches (STOP)', async (c) => {
    const cursor = await r.db('ycsb').table('usertable').orderBy({ index: 'id' }).run(c, { maxBatchRows: 10 });
    const first = [];
    for (let i = 0; i < 15; i += 1) first.push((await cursor.next()).id);
    await cursor.close();
    return first;
  }],
  ['server()', (c) => c.server()],
  ['a user error', (c) => r.error('boom').run(c)],
  ['a logic error', (c) => r.expr(1).add('a').run(c)],
  ['an op error (a database that does not exist)', (c) => r.db('nonexistent').table('x').run(c)],
  ['a compile error (a term with the wrong arity)', (c) => r.expr(1).coerceTo().run(c)],
  ['many queries pipelined on one connection', (c) => Promise.all(Array.from({ length: 200 }, (_, i) => r.expr(i).mul(2).run(c)))],
];

describe('the query gate on real RethinkDB servers, with the JavaScript driver', () => {
  test.each(CORPUS)('when the query is %s, then the answer through the gate is the answer straight from the proxy', async (_, query) => {
    const [direct, gated] = await Promise.all([open('direct'), open('gate')]);
    const expected = await outcome(query(direct));
    expect(await outcome(query(gated))).toEqual(expected);
  });

  test('when a document of several MB is written and read through the gate, then it comes back whole', async () => {
    const c = await open('gate');
    const doc = { id: 'big', blob: 'x'.repeat(3 * 1024 * 1024), list: Array.from({ length: 20000 }, (_, i) => i) };
    expect((await r.db('ycsb').table('gate').insert(doc, { conflict: 'replace' }).run(c)).errors).toBe(0);
    expect(await r.db('ycsb').table('gate').get('big').run(c)).toEqual(doc);
  });

  test('when writes are sent noreply, then noreplyWait waits for them through the gate', async () => {
    const c = await open('gate');
    for (let i = 0; i < 50; i += 1) await r.db('ycsb').table('gate').insert({ id: `nr-${i}` }, { conflict: 'replace' }).run(c, { noreply: true });
    await c.noreplyWait();
    expect(await r.db('ycsb').table('gate').getAll(...Array.from({ length: 50 }, (_, i) => `nr-${i}`)).count().run(c)).toBe(50);
  });

  test('when a changefeed is open through the gate, then a change made meanwhile reaches it', async () => {
    const [feedConn, writer] = await Promise.all([open('gate'), open('direct')]);
    const feed = await r.db('ycsb').table('gate').get('feed').changes().run(feedConn);
    await r.db('ycsb').table('gate').insert({ id: 'feed', n: 1 }, { conflict: 'replace' }).run(writer);
    const change = await feed.next();
    expect(change.new_val).toEqual({ id: 'feed', n: 1 });
    await feed.close();
  });

  test('when a user logs in through the gate with the right and a wrong password, then it is admitted and refused as straight to the proxy', async () => {
    const c = await open('gate', { user: 'gateuser', password: 'right-password' });
    expect(await r.db('ycsb').table('gate').count().run(c)).toBeGreaterThan(0);
    // A refused login, in a process of its own (test/helpers/driver-login.js says why).
    const wrong = async (via) => {
      const { stdout } = await run(process.execPath, [LOGIN, String(via === 'gate' ? gatePort : proxy.driverPort), 'gateuser', 'wrong']);
      return JSON.parse(stdout);
    };
    const [throughGate, direct] = await Promise.all([wrong('gate'), wrong('direct')]);
    expect(throughGate).toEqual(direct);
    expect(throughGate).toMatchObject({ ok: false, message: expect.stringMatching(/Wrong password/) });
  });

  test('when the official Python driver runs the corpus through the gate and straight to the proxy, then every answer is the same', async () => {
    const python = process.env.PYTHON_RETHINKDB ?? PYTHON_VENV;
    if (!existsSync(python)) throw new Error(`no Python with the rethinkdb driver at ${python}: npm test's set-up (test/setup.sh) makes it`);
    const corpus = async (port) => JSON.parse((await run(python, [PY_CORPUS, String(port)], { maxBuffer: 64 * 1024 * 1024 })).stdout);
    const direct = await corpus(proxy.driverPort);
    const gated = await corpus(gatePort);
    expect(gated).toEqual(direct);
    // The corpus ran: its answers are answers, not all errors.
    expect(direct['a count'].value).toBeGreaterThan(0);
    expect(direct['a document of several MB']).toEqual({ value: true });
    expect(direct['a changefeed']).toEqual({ value: true });
    expect(direct['a wrong password']).toMatchObject({ error: 'ReqlAuthError' });
  });

  test('when a client closes its connection mid-query, then the gate lets it go and serves the next client', async () => {
    const c = await open('gate');
    const relayed = await metric('rethinkdb_gate_queries_total');
    const running = r.range().count().run(c).catch(() => 'closed');
    // Until the gate has relayed it: the query is running upstream when the client goes.
    await eventually(async () => (await metric('rethinkdb_gate_queries_total')) > relayed, { intervalMs: 5, what: 'the endless count relayed' });
    await c.close({ noreplyWait: false });
    expect(await running).toBe('closed');
    await eventually(() => gate.connections() <= connections.filter((x) => x.open).length, { timeoutMs: 5000, what: 'the closed connection gone from the gate' });
    expect(await r.expr('next').run(await open('gate'))).toBe('next');
  });

  test('when the usertable\'s primaries are moved while writes run, then no write fails through the gate, and the retries are counted', async () => {
    const retriesBefore = await metric('rethinkdb_gate_retries_total');
    const c = await open('gate');
    const errors = [];
    let written = 0;
    let stop = false;
    // Four writers, each inserting new ids: one write term per query. A retry of a write that had been applied would
    // fail with a duplicate key, so no error also means nothing was written twice.
    const writer = async (w) => {
      for (let i = 0; !stop; i += 1) {
        try {
          const res = await r.db('ycsb').table('usertable').insert({ id: `gate-w${w}-${i}`, field0: 'x' }).run(c);
          if (res.errors) errors.push(res.first_error); else written += 1;
        } catch (err) {
          errors.push(`${err.name}: ${err.message}`);
        }
      }
    };
    const writers = [0, 1, 2, 3].map(writer);
    await movePrimaries(4);
    stop = true;
    await Promise.all(writers);
    const retries = await metric('rethinkdb_gate_retries_total') - retriesBefore;
    // OP_INDETERMINATE ("lost contact with primary replica"): the write may have been applied, so the gate never sends
    // it again and the client sees it. A raw config write like this one can cause it at a handover (seen 2-5 times in
    // 1,300 tight-loop writes over 3 moves); the gate's part is that no OP_FAILED reaches the client.
    const indeterminate = errors.filter((e) => e.startsWith('ReqlOpIndeterminateError'));
    process.stdout.write(`gate: ${written} writes while the primaries moved 4 times, ${errors.length} failed (${indeterminate.length} OP_INDETERMINATE), ${retries} retries\n`);
    expect(errors.filter((e) => !e.startsWith('ReqlOpIndeterminateError'))).toEqual([]);
    expect(written).toBeGreaterThan(0);
    expect(retries).toBeGreaterThan(0);
  });

  test('when the primaries move under queries with two write terms, and under a gate whose budget is 0, then neither is sent again: the client gets the OP_FAILED', async () => {
    const noBudgetMetrics = createGateMetrics();
    const noBudget = createGate({
      config: {
        port: 0, host: '127.0.0.1', upstream: { host: proxy.host, port: proxy.driverPort }, retry: { budgetMs: 0, minMs: 20, maxMs: 200 },
        maxFrameBytes: 128 * 1024 * 1024, connectTimeoutMs: 5000, drainSeconds: 5, tls: { enabled: false }, upstreamTls: { enabled: false },
      },
      metrics: noBudgetMetrics, clock, logger: pino({ level: 'silent' }),
    });
    const { port: noBudgetPort } = await noBudget.start();
    try {
      const retriesBefore = await metric('rethinkdb_gate_retries_total');
      const [gated, unbudgeted] = await Promise.all([open('gate'), r.connect({ host: '127.0.0.1', port: noBudgetPort })]);
      connections.push(unbudgeted);
      const failures = { double: [], single: [] };
      let stop = false;
      const table = r.db('ycsb').table('usertable');
      const loop = async (kind, run) => {
        for (let i = 0; !stop; i += 1) {
          try {
            const res = await run(i);
            if (res.errors) failures[kind].push(res.first_error);
          } catch (err) {
            failures[kind].push(`${err.name}: ${err.message}`);
          }
        }
      };
      const loops = [
        // Two inserts in one query: RethinkDB classifies each on its own; the gate never sends it again.
        ...[0, 1].map((w) => loop('double', (i) => r.expr([table.insert({ id: `two-${w}-${i}-a` }), table.insert({ id: `two-${w}-${i}-b` })]).run(gated))),
        ...[0, 1].map((w) => loop('single', (i) => table.insert({ id: `nobudget-${w}-${i}` }).run(unbudgeted))),
      ];
      await movePrimaries(3);
      stop = true;
      await Promise.all(loops);
      const gaveUp = await noBudgetMetrics.registry.getMetricsAsJSON().then((all) => all.find((x) => x.name === 'rethinkdb_gate_gave_up_total').values.reduce((n, v) => n + v.value, 0));
      process.stdout.write(`gate: two-write queries failed ${failures.double.length} times (not sent again); with a budget of 0, ${failures.single.length} single writes failed, ${gaveUp} given up\n`);
      const opFailed = (list) => list.filter((f) => f.startsWith('ReqlOpFailedError'));
      const others = [...failures.single, ...failures.double].filter((f) => !f.startsWith('ReqlOpFailedError'));
      if (others.length > 0) process.stdout.write(`gate: other failures (not OP_FAILED, never sent again): ${[...new Set(others)].join(' | ')}\n`);
      expect(await metric('rethinkdb_gate_retries_total') - retriesBefore).toBe(0);
      expect(opFailed(failures.single).length).toBeGreaterThan(0);
      // Every OP_FAILED the budget-0 gate's clients saw is one it gave up on: none was hidden, none sent again.
      expect(gaveUp).toBe(opFailed(failures.single).length);
    } finally {
      await noBudget.stop(0);
    }
  });
});
