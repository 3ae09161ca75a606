// The query gate as its own process (node gate/server.js, configured by its environment) in front of a real RethinkDB
// 2.4.4 server, attacked as a hostile client would: queries sent and answers never read, half-sent frames, half-done
// handshakes, a flood of connections, a duplicated noreply, deep nesting. Each bound bites (its metric says so), the
// gate's memory stays under its container's limit, and a bystander through the same gate sees no error.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { jest } from '@jest/globals';
import r from 'rethinkdb';
import { firstJsonLine } from '../../bench/lab/child-lines.js';
import { eventually, startRealCluster } from '../helpers/real-cluster.js';
import { frameOf, rawClient } from '../helpers/raw-client.js';
import { freeLoopbackPorts } from '../helpers/processes.js';

jest.setTimeout(300000);

const GATE = fileURLToPath(new URL('../../gate/server.js', import.meta.url));
const MiB = 1024 * 1024;
// The limits of the chart's gate container (512 MiB), with this test's own bounds set low enough to bite quickly.
const ENV = {
  GATE_MAX_RETAINED_BYTES: String(32 * MiB), GATE_MAX_PARTIAL_FRAME_BYTES: String(128 * MiB), GATE_MAX_FRAME_BYTES: String(64 * MiB),
  GATE_HANDSHAKE_TIMEOUT_MS: '1500', GATE_FRAME_TIMEOUT_MS: '3000', GATE_MAX_CONNECTIONS: '40', LOG_LEVEL: 'info',
};
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
let cluster;
let server;
let gate;
let ports;
let bystander;
const logs = [];
const errors = [];
let bystanderRunning = true;
let bystanderDone;
let bystanderReads = 0;

beforeAll(async () => {
  cluster = await startRealCluster({ size: 1, tables: [] });
  [server] = cluster.servers;
  const [port, metricsPort] = await freeLoopbackPorts(2);
  ports = { port, metricsPort };
  gate = spawn(process.execPath, [GATE], {
    env: {
      ...process.env, ...ENV, GATE_UPSTREAM: `${server.host}:${server.driverPort}`, GATE_PORT: String(port), GATE_METRICS_PORT: String(metricsPort), GATE_HOST: '127.0.0.1',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await firstJsonLine(gate, { what: 'the gate', marker: 'query gate listening' });
  gate.stdout.on('data', (chunk) => logs.push(...chunk.toString().split('\n').filter(Boolean)));
  bystander = await r.connect({ host: '127.0.0.1', port });
  // One read after another through everything below: none may fail.
  bystanderDone = (async () => {
    while (bystanderRunning) {
      try {
        await r.expr({ n: bystanderReads }).run(bystander);
        bystanderReads += 1;
      } catch (err) {
        errors.push(err.message);
      }
      await sleep(5);
    }
  })();
}, 120000);

afterAll(async () => {
  bystanderRunning = false;
  await bystanderDone;
  await bystander?.close({ noreplyWait: false }).catch(() => {});
  gate?.kill('SIGKILL');
  await cluster?.destroy();
});

const rssMiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gate.pid}/status`, 'utf8'))[1]) / 1024;
async function metric(name, label = null) {
  const text = await (await fetch(`http://127.0.0.1:${ports.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(label ? `${name}{${label}}` : `${name} `));
  return line ? Number(line.split(' ').at(-1)) : 0;
}
const report = (what) => process.stdout.write(`gate bounds: ${what}\n`);

describe('the query gate under a hostile client, on a real server', () => {
  test('when 12 clients send queries of 1 MiB that may be sent again and never read, then each is no longer read and the gate keeps at most its budget', async () => {
    const hostile = await Promise.all(Array.from({ length: 12 }, () => rawClient(ports.port)));
    const big = JSON.stringify('x'.repeat(MiB));
    const written = hostile.map(() => 0);
    // Each writes as fast as its socket takes it, 600 at most; a client that does not read soon cannot write either.
    const writing = hostile.map(async (c, k) => {
      c.socket.pause();
      for (let i = 1; i <= 600 && !c.socket.destroyed; i += 1) {
        written[k] = i;
        if (!c.socket.write(frameOf(i, `[1,${big},{}]`))) await Promise.race([new Promise((resolve) => { c.socket.once('drain', resolve); }), sleep(200)]);
      }
    });
    await sleep(4000);
    const retained = await metric('rethinkdb_gate_retained_bytes');
    const rss = rssMiB();
    const hits = await metric('rethinkdb_gate_limit_hits_total', 'limit="retained_bytes"');
    report(`12 clients not reading: ${written.reduce((a, b) => a + b, 0)} 1-MiB queries written in 4 s (at most ${Math.max(...written)} by one), `
      + `${(retained / MiB).toFixed(1)} MiB kept for retries, ${hits} relayed with no copy, the gate's RSS ${rss.toFixed(0)} MiB`);
    expect(Math.max(...written)).toBeLessThan(600);
    expect(retained).toBeLessThanOrEqual(32 * MiB);
    expect(hits).toBeGreaterThan(0);
    expect(rss).toBeLessThan(400);
    for (const c of hostile) c.socket.destroy();
    await Promise.all(writing);
    await eventually(async () => (await metric('rethinkdb_gate_retained_bytes')) === 0, { timeoutMs: 10000, what: 'the copies given back' });
  });

  test('when four clients each send 59 MiB of a 60 MiB frame, then the one past the gate-wide limit is closed, the rest at the frame time-out', async () => {
    const clients = await Promise.all([0, 1, 2, 3].map(() => rawClient(ports.port)));
    const header = Buffer.alloc(12);
    header.writeBigUInt64LE(1n, 0);
    header.writeUInt32LE(60 * MiB, 8);
    const part = Buffer.alloc(59 * MiB, 0x20);
    for (const c of clients) { c.socket.write(header); c.socket.write(part); await sleep(300); }
    const peak = rssMiB();
    const closed = await Promise.all(clients.map((c) => Promise.race([c.closed, sleep(8000).then(() => false)])));
    report(`four half-sent 60 MiB frames: the gate's RSS ${peak.toFixed(0)} MiB; closed ${closed.filter(Boolean).length} of 4; limit hits partial ${await metric('rethinkdb_gate_limit_hits_total', 'limit="partial_frame_bytes"')}, frame time-out ${await metric('rethinkdb_gate_limit_hits_total', 'limit="frame_timeout"')}`);
    expect(closed).toEqual([true, true, true, true]);
    expect(await metric('rethinkdb_gate_limit_hits_total', 'limit="partial_frame_bytes"')).toBeGreaterThanOrEqual(1);
    expect(await metric('rethinkdb_gate_limit_hits_total', 'limit="frame_timeout"')).toBeGreaterThanOrEqual(1);
    expect(await metric('rethinkdb_gate_partial_frame_bytes')).toBe(0);
    expect(peak).toBeLessThan(400);
  });

  test('when 60 connections stop after the magic number, then the gate refuses past its limit and closes the rest at the handshake time-out', async () => {
    const half = [];
    for (let n = 0; n < 60; n += 1) half.push(await rawClient(ports.port, { login: false }));
    const closed = await Promise.all(half.map((c) => Promise.race([c.closed, sleep(6000).then(() => false)])));
    const refused = await metric('rethinkdb_gate_limit_hits_total', 'limit="connections"');
    const timedOut = await metric('rethinkdb_gate_limit_hits_total', 'limit="handshake_timeout"');
    report(`60 half-done handshakes: ${refused} refused at the connection limit, ${timedOut} closed at the handshake time-out`);
    expect(closed.every(Boolean)).toBe(true);
    expect(refused).toBeGreaterThanOrEqual(20);
    expect(timedOut).toBeGreaterThan(0);
  });

  test('when 2,000 queries say noreply true then false, and one is nested 10,000 deep, then nothing is kept for them and the deep one is answered as straight', async () => {
    const c = await rawClient(ports.port);
    for (let n = 1; n <= 2000; n += 1) c.send(n, '[1,[2,[1]],{"noreply":true,"noreply":false}]');
    const deep = `[1,${'[2,['.repeat(10000)}1${']]'.repeat(10000)},{}]`;
    c.send(5000, deep);
    const throughGate = await c.answer(5000);
    const straight = await rawClient(server.driverPort, { host: server.host });
    straight.send(1, deep);
    expect(throughGate).toBe(await straight.answer(1));
    expect(c.answered()).toBe(0);
    // Nothing kept for the 2,000 (about 90 KB): 0 once the bystander's own read in flight, if any, is answered.
    await eventually(async () => (await metric('rethinkdb_gate_retained_bytes')) === 0, { timeoutMs: 5000, what: 'nothing kept for the noreply queries' });
    c.socket.destroy();
    straight.socket.destroy();
  });

  test('then the bystander met no error, and the gate said which bound bit', async () => {
    report(`the bystander: ${bystanderReads} reads, ${errors.length} errors`);
    expect(errors).toEqual([]);
    expect(bystanderReads).toBeGreaterThan(0);
    const said = logs.map((l) => JSON.parse(l)).filter((l) => l.limit).map((l) => l.limit);
    expect(new Set(said)).toEqual(new Set(['retained_bytes', 'partial_frame_bytes', 'frame_timeout', 'handshake_timeout', 'connections']));
  });
});
