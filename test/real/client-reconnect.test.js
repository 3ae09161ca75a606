// The client side of a gate's stop and crash (examples/clients/): a real RethinkDB 2.4.4 server, two gates in front of
// it, and a relay in front of the gates that plays the client Service (new connections go to the backend it is told;
// a connection's two halves close together). A gate stops as in a rollout: the Service switches to the other gate, the
// old one leaves and drains. With the examples' resilient connection, the official JavaScript and Python drivers lose
// no read and no resendable write; a write that is not resent is either acknowledged or reported as unknown, and the
// counters read back say nothing acknowledged is missing and nothing was applied twice. A plain driver connection,
// for contrast, fails its next query.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { connect as tcpConnect, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { jest } from '@jest/globals';
import pino from 'pino';
import r from 'rethinkdb';
import { createResilientConnection, OutcomeUnknownError } from '../../examples/clients/resilient-connection.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { createRethinkDbCluster } from '../lab/rethinkdb-cluster.js';
import { eventually } from '../helpers/harness.js';

jest.setTimeout(120000);

const run = promisify(execFile);
const PY_EXAMPLE = fileURLToPath(new URL('../../examples/clients/resilient_connection.py', import.meta.url));
const PYTHON_VENV = fileURLToPath(new URL('../.python-rethinkdb/bin/python', import.meta.url));
const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };
const sleep = clock.sleep;

let cluster;
let server;
const gates = [];
let relay;

async function startGate() {
  const gate = createGate({
    config: {
      port: 0, host: '127.0.0.1', upstream: { host: server.host, port: server.driverPort }, retry: { budgetMs: 3000, minMs: 20, maxMs: 200 },
      maxFrameBytes: 64 * 1024 * 1024, connectTimeoutMs: 5000, drainSeconds: 5, shutdownDelaySeconds: 0, tls: { enabled: false }, upstreamTls: { enabled: false },
    },
    metrics: createGateMetrics(), clock, logger: pino({ level: 'silent' }),
  });
  const { port } = await gate.start();
  gates.push(gate);
  return { gate, port };
}

// The Service: each new connection goes to `backend`; cut() ends every relayed connection with a reset, as a gate's
// crash looks to its clients.
async function startRelay(backend) {
  const pairs = new Set();
  const srv = createServer((client) => {
    const upstream = tcpConnect({ host: '127.0.0.1', port: state.backend });
    const pair = { client, upstream };
    pairs.add(pair);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => { pairs.delete(pair); client.destroy(); upstream.destroy(); };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', () => {});
    upstream.on('error', () => {});
  });
  const state = {
    backend,
    port: 0,
    cut: () => { for (const { client, upstream } of [...pairs]) { client.resetAndDestroy(); upstream.destroy(); } },
    close: () => new Promise((resolve) => { for (const p of pairs) { p.client.destroy(); p.upstream.destroy(); } srv.close(resolve); }),
  };
  await new Promise((resolve) => { srv.listen(0, '127.0.0.1', resolve); });
  state.port = srv.address().port;
  return state;
}

beforeAll(async () => {
  cluster = createRethinkDbCluster({ size: 1 });
  await cluster.start();
  [server] = cluster.servers;
  await cluster.withConnection(async (c) => {
    await r.dbCreate('clients').run(c);
    await r.db('clients').tableCreate('docs').run(c);
    await r.db('clients').tableCreate('counters').run(c);
    await r.db('clients').table('docs').insert(Array.from({ length: 100 }, (_, i) => ({ id: `k${i}`, v: 0 }))).run(c);
  });
}, 120000);

afterAll(async () => {
  await relay?.close();
  for (const gate of gates) await gate.stop(0);
  await cluster?.destroy();
});

const connectViaService = () => r.connect({ host: '127.0.0.1', port: relay.port });

// Workers that read, replace (both resent) and increment a counter of their own (never resent) through the Service
// until stop() is called; what each saw.
function startLoad(workers = 4) {
  let running = true;
  const results = Array.from({ length: workers }, (_, w) => ({ id: `w${w}`, reads: 0, replaces: 0, acked: 0, unknown: 0, failed: [] }));
  const loops = results.map(async (res) => {
    const db = createResilientConnection({ r, connect: connectViaService });
    await db.run(r.db('clients').table('counters').insert({ id: res.id, n: 0 }, { conflict: 'replace' }), { resend: true });
    const docs = r.db('clients').table('docs');
    for (let i = 0; running; i += 1) {
      const key = `k${(i * 7 + res.id.length) % 100}`;
      try {
        if (i % 3 === 0) { await db.run(docs.get(key), { resend: true }); res.reads += 1; }
        else if (i % 3 === 1) { await db.run(docs.insert({ id: key, v: i }, { conflict: 'replace' }), { resend: true }); res.replaces += 1; }
        else {
          const out = await db.run(r.db('clients').table('counters').get(res.id).update({ n: r.row('n').add(1) }, { durability: 'hard' }));
          if (out.replaced === 1) res.acked += 1; else res.failed.push(`increment answered ${JSON.stringify(out)}`);
        }
      } catch (err) {
        if (err instanceof OutcomeUnknownError && i % 3 === 2) res.unknown += 1; else res.failed.push(`${err.name}: ${err.message}`);
      }
    }
    res.reconnects = db.reconnects();
    await db.close();
  });
  return { stop: async () => { running = false; await Promise.all(loops); return results; } };
}

async function counters() {
  return cluster.withConnection((c) => r.db('clients').table('counters').coerceTo('array').run(c));
}

// Nothing acknowledged missing, nothing beyond acknowledged plus unknown.
async function expectCountersExact(results) {
  const byId = Object.fromEntries((await counters()).map((doc) => [doc.id, doc.n]));
  for (const res of results) {
    const n = byId[res.id];
    expect({ id: res.id, atLeastAcked: n >= res.acked, atMostAckedPlusUnknown: n <= res.acked + res.unknown })
      .toEqual({ id: res.id, atLeastAcked: true, atMostAckedPlusUnknown: true });
  }
}

describe('clients through a gate that stops or crashes', () => {
  test('when the Service switches gates and the old gate leaves and drains, then the resilient JavaScript client fails nothing, and a plain connection fails its next query', async () => {
    const a = await startGate();
    const b = await startGate();
    relay = await startRelay(a.port);
    const plain = await connectViaService();
    const load = startLoad();
    await sleep(1000);
    // The rollout: the endpoints drop gate a, which then leaves (no delay here: the relay switched already) and drains.
    relay.backend = b.port;
    await a.gate.leave(0);
    const drained = await a.gate.stop(5000);
    await sleep(1000);
    const results = await load.stop();
    expect(drained).toEqual({ closedWithQueriesInFlight: 0 });
    for (const res of results) {
      // Not even an unknown increment: the gate closed no connection under a query; the query each busy client sent
      // next was answered "the gate is stopping" (not run) and sent again through gate b.
      expect({ id: res.id, failed: res.failed, unknown: res.unknown }).toEqual({ id: res.id, failed: [], unknown: 0 });
      expect(res.reads + res.replaces + res.acked).toBeGreaterThan(20);
      expect(res.reconnects).toBeGreaterThanOrEqual(1);
    }
    await expectCountersExact(results);
    process.stderr.write(`gate stop, JavaScript: ${JSON.stringify(results.map(({ failed, ...rest }) => rest))}\n`);
    const err = await r.db('clients').table('docs').get('k1').run(plain).then(() => null, (e) => e);
    expect(err?.message).toMatch(/Connection is closed/);
    await relay.close();
  });

  test('when the gate crashes under load (every connection reset), then the resilient client sends reads and replaces again and reports the increments it cannot know as unknown', async () => {
    const a = await startGate();
    relay = await startRelay(a.port);
    const load = startLoad();
    await sleep(1000);
    relay.cut();
    await sleep(500);
    relay.cut();
    await sleep(1000);
    const results = await load.stop();
    for (const res of results) {
      expect({ id: res.id, failed: res.failed }).toEqual({ id: res.id, failed: [] });
      expect(res.reconnects).toBeGreaterThanOrEqual(1);
    }
    await expectCountersExact(results);
    process.stderr.write(`gate crash, JavaScript: ${JSON.stringify(results.map(({ failed, ...rest }) => rest))}\n`);
    await relay.close();
  });

  test('when the Service switches gates and the old gate leaves and drains, then the resilient Python client fails nothing', async () => {
    const python = process.env.PYTHON_RETHINKDB ?? PYTHON_VENV;
    if (!existsSync(python)) throw new Error(`no Python with the rethinkdb driver at ${python}: npm test's set-up (test/setup.sh) makes it`);
    const a = await startGate();
    const b = await startGate();
    relay = await startRelay(a.port);
    const child = run(python, [PY_EXAMPLE, '127.0.0.1', String(relay.port), '4']);
    // The example has made its table and is reading and writing through gate a.
    await eventually(() => a.gate.connections() > 0, { what: 'the Python client connected through gate a' });
    await sleep(1000);
    relay.backend = b.port;
    await a.gate.leave(0);
    expect(await a.gate.stop(5000)).toEqual({ closedWithQueriesInFlight: 0 });
    const counts = JSON.parse((await child).stdout);
    process.stderr.write(`gate stop, Python: ${JSON.stringify(counts)}\n`);
    expect({ failed: counts.failed, unknown: counts.unknown }).toEqual({ failed: 0, unknown: 0 });
    expect(counts.reconnects).toBeGreaterThanOrEqual(1);
    expect(counts.reads + counts.writes).toBeGreaterThan(50);
    await relay.close();
  });
});
