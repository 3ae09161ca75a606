// The query gate's sessions (gate/src/session.js, gate/src/gate.js) on loopback, against a scripted upstream that
// speaks the V1_0 handshake and answers each query as a test says: what is sent again, what is passed through, and
// what closes a connection. The real server and drivers are in test/real/gate.test.js.

import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import pino from 'pino';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { GATE_STOPPING, V1_0 } from '../../gate/src/protocol.js';

const logger = pino({ level: 'silent' });
const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };
const OP_FAILED = { t: 18, e: 4100000, r: ['Cannot perform write: The primary replica is currently changing from one replica to another.'], b: [] };
const OP_INDETERMINATE = { t: 18, e: 4200000, r: ['Cannot perform write: lost contact with primary replica'], b: [] };
const READ_NOT_AVAILABLE = { t: 18, e: 4100000, r: ['Cannot perform read: primary replica for shard ["", +inf) not available'], b: [] };
const TABLE_MISSING = { t: 18, e: 4100000, r: ['Table `ycsb.usertable` does not exist.'], b: [0] };
const table = [15, [[14, ['ycsb']], 'usertable']];
const insert = (id) => [56, [table, { id }]];

const closers = [];
afterEach(async () => { for (const close of closers.splice(0)) await close(); });

function frame(token, object) {
  const body = Buffer.from(JSON.stringify(object));
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(token), 0);
  header.writeUInt32LE(body.length, 8);
  return Buffer.concat([header, body]);
}

// Reads frames from a socket: next() resolves with the next { token, body } (or null once closed).
function frameStream(socket, initial = Buffer.alloc(0)) {
  let buffer = initial;
  const waiting = [];
  let closed = false;
  const pump = () => {
    while (waiting.length > 0) {
      if (buffer.length >= 12 && buffer.length >= 12 + buffer.readUInt32LE(8)) {
        const length = buffer.readUInt32LE(8);
        const out = { token: Number(buffer.readBigUInt64LE(0)), body: JSON.parse(buffer.subarray(12, 12 + length).toString()) };
        buffer = buffer.subarray(12 + length);
        waiting.shift()(out);
      } else if (closed) waiting.shift()(null);
      else return;
    }
  };
  socket.on('data', (chunk) => { buffer = Buffer.concat([buffer, chunk]); pump(); });
  socket.on('close', () => { closed = true; pump(); });
  return { next: () => new Promise((resolve) => { waiting.push(resolve); pump(); }) };
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
// Until check() holds (polled every 5 ms, at most 3 s): the tests wait for what happened, not for a guessed time.
const until = async (check) => {
  for (let i = 0; i < 600; i += 1) { if (check()) return; await sleep(5); }
  throw new Error('timed out waiting');
};

// The upstream: the handshake's three server messages, then answer(query, attempt) for each frame, where attempt
// counts the times this token was seen. Keeps every query it got.
async function scriptedUpstream(answer) {
  const seen = [];
  const sockets = new Set();
  const server = createServer((socket) => {
    sockets.add(socket);
    // The gate may close its side while an answer is still being written (a connection it closes for a bound).
    socket.on('error', () => {});
    let buffer = Buffer.alloc(0);
    let stage = 0;
    const attempts = new Map();
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk]);
      if (stage === 0 && buffer.length >= 4) {
        if (buffer.readUInt32LE(0) !== V1_0) { socket.destroy(); return; }
        buffer = buffer.subarray(4);
        stage = 1;
      }
      while (stage === 1 || stage === 2) {
        const end = buffer.indexOf(0);
        if (end < 0) return;
        buffer = buffer.subarray(end + 1);
        if (stage === 1) socket.write('{"success":true,"max_protocol_version":0,"min_protocol_version":0,"server_version":"2.4.4"}\0{"success":true,"authentication":"r=x,s=y,i=4096"}\0');
        else socket.write('{"success":true,"authentication":"v=z"}\0');
        stage += 1;
      }
      while (buffer.length >= 12 && buffer.length >= 12 + buffer.readUInt32LE(8)) {
        const length = buffer.readUInt32LE(8);
        const token = Number(buffer.readBigUInt64LE(0));
        let query;
        try {
          query = JSON.parse(buffer.subarray(12, 12 + length).toString());
        } catch {
          // What RethinkDB answers a frame it cannot read (and a test sees as corruption).
          seen.push({ token, corrupt: buffer.subarray(12, 12 + length).toString() });
          buffer = buffer.subarray(12 + length);
          socket.write(frame(token, { t: 16, r: ['Client is buggy (failed to deserialize query).'] }));
          continue;
        }
        buffer = buffer.subarray(12 + length);
        const attempt = (attempts.get(token) ?? 0) + 1;
        attempts.set(token, attempt);
        seen.push({ token, query, attempt });
        const reply = answer(query, attempt, token);
        if (reply === 'close') { socket.destroy(); return; }
        if (reply) setTimeout(() => socket.write(frame(token, reply.response ?? reply)), reply.delayMs ?? 0);
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  closers.push(() => { for (const s of sockets) s.destroy(); return new Promise((resolve) => { server.close(resolve); }); });
  return { port: server.address().port, seen };
}

// gateClock: the gate's clock (a test that moves time on gives one of its own).
async function startGate(upstreamPort, overrides = {}, { gateClock = clock } = {}) {
  const config = {
    port: 0, host: '127.0.0.1', upstream: { host: '127.0.0.1', port: upstreamPort }, retry: { budgetMs: 3000, minMs: 5, maxMs: 20 },
    maxFrameBytes: 1024 * 1024, connectTimeoutMs: 1000, drainSeconds: 1, tls: { enabled: false }, upstreamTls: { enabled: false }, hold: { maxMs: 5000 }, ...overrides,
  };
  const metrics = createGateMetrics();
  const gate = createGate({ config, metrics, clock: gateClock, logger });
  const { port } = await gate.start();
  closers.push(() => gate.stop(0));
  return { port, metrics, gate };
}

// A client through the gate, handshake done: send(token, query) and the frames it gets back.
async function client(port) {
  const socket = connect(port, '127.0.0.1');
  await once(socket, 'connect');
  closers.push(() => socket.destroy());
  const magic = Buffer.alloc(4);
  magic.writeUInt32LE(V1_0, 0);
  socket.write(Buffer.concat([magic, Buffer.from('{"protocol_version":0,"authentication_method":"SCRAM-SHA-256","authentication":"n,,n=admin,r=abc"}\0')]));
  let got = Buffer.alloc(0);
  const handshake = async (count) => {
    while (got.toString('latin1').split('\0').length - 1 < count) {
      const [chunk] = await once(socket, 'data');
      got = Buffer.concat([got, chunk]);
    }
  };
  await handshake(2);
  socket.write('{"authentication":"c=biws,r=abc,p=proof"}\0');
  await handshake(3);
  socket.removeAllListeners('data');
  const rest = got.subarray(got.lastIndexOf(0) + 1);
  const frames = frameStream(socket, rest);
  return { socket, send: (token, query) => socket.write(frame(token, query)), next: frames.next };
}

const value = async (metrics, name, labels = {}) => {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value ?? 0;
};

describe('the query gate', () => {
  test('when a one-write query is answered OP_FAILED twice, then it is sent again and the client gets only the success', async () => {
    const up = await scriptedUpstream((q, attempt) => (attempt <= 2 ? OP_FAILED : { t: 1, r: [{ inserted: 1 }] }));
    const { port, metrics } = await startGate(up.port);
    const c = await client(port);
    c.send(1, [1, insert('k1'), {}]);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [{ inserted: 1 }] } });
    expect(up.seen.map((s) => s.attempt)).toEqual([1, 2, 3]);
    expect(await value(metrics, 'rethinkdb_gate_retries_total', { class: 'primary_changing' })).toBe(2);
  });

  test('when a query is sent again while the client is midway through sending another, then the other arrives whole', async () => {
    const up = await scriptedUpstream((q, attempt, token) => (token === 1 && attempt === 1 ? OP_FAILED : { t: 1, r: [token] }));
    const { port } = await startGate(up.port, { retry: { budgetMs: 3000, minMs: 200, maxMs: 200 } });
    const c = await client(port);
    c.socket.setNoDelay(true);
    c.send(1, [1, insert('retried'), {}]);
    const second = frame(2, [1, insert('split across two chunks'), {}]);
    // The first part once the first attempt has failed (the retry is 200 ms later), the rest once the retry was sent.
    await until(() => up.seen.length === 1);
    c.socket.write(second.subarray(0, 20));
    await until(() => up.seen.some((x) => x.token === 1 && x.attempt === 2));
    c.socket.write(second.subarray(20));
    const answers = [await c.next(), await c.next()].sort((a, b) => a.token - b.token);
    expect(answers).toEqual([{ token: 1, body: { t: 1, r: [1] } }, { token: 2, body: { t: 1, r: [2] } }]);
    expect(up.seen.filter((s) => s.corrupt)).toEqual([]);
  });

  test.each([
    ['an OP_INDETERMINATE answer', [1, insert('k1'), {}], OP_INDETERMINATE],
    ['a query with two write terms', [1, [2, [insert('a'), insert('b')]], {}], OP_FAILED],
    ['a forEach', [1, [68, [table, [69, [[2, [1]], insert('c')]]]], {}], OP_FAILED],
    // The write may have committed before the read failed: RethinkDB's OP_FAILED speaks of the term that failed.
    ['a write followed by a read', [1, [64, [[69, [[2, []], [16, [table, 'x']]]], insert('w')]], {}], READ_NOT_AVAILABLE],
    ['an insert of many rows', [1, [56, [table, [2, [{ id: 'a' }, { id: 'b' }]]]], {}], OP_FAILED],
    ['a table that does not exist', [1, insert('k1'), {}], TABLE_MISSING],
    ['a read of a table that does not exist', [1, [16, [table, 'k1']], {}], TABLE_MISSING],
  ])('when %s meets a handover, then the answer passes through and the query is sent once', async (_, query, answer) => {
    const up = await scriptedUpstream(() => answer);
    const { port } = await startGate(up.port);
    const c = await client(port);
    c.send(7, query);
    expect(await c.next()).toEqual({ token: 7, body: answer });
    expect(up.seen).toHaveLength(1);
  });

  test('when the retry budget runs out, then the client gets the last OP_FAILED', async () => {
    const up = await scriptedUpstream(() => OP_FAILED);
    const { port, metrics } = await startGate(up.port, { retry: { budgetMs: 60, minMs: 10, maxMs: 20 } });
    const c = await client(port);
    c.send(3, [1, insert('k3'), {}]);
    expect(await c.next()).toEqual({ token: 3, body: OP_FAILED });
    expect(up.seen.length).toBeGreaterThan(1);
    expect(await value(metrics, 'rethinkdb_gate_gave_up_total', { class: 'primary_changing' })).toBe(1);
  });

  test('when one query waits for its retry, then another token on the same connection is answered meanwhile', async () => {
    const up = await scriptedUpstream((q, attempt, token) => (token === 1 && attempt === 1 ? OP_FAILED : { t: 1, r: [token] }));
    const { port } = await startGate(up.port, { retry: { budgetMs: 3000, minMs: 200, maxMs: 200 } });
    const c = await client(port);
    c.send(1, [1, insert('slow'), {}]);
    c.send(2, [1, [16, [table, 'k2']], {}]);
    expect(await c.next()).toEqual({ token: 2, body: { t: 1, r: [2] } });
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
  });

  test('when a noreply query is sent, then it is relayed and nothing waits for an answer', async () => {
    const up = await scriptedUpstream((q) => (q[0] === 4 ? { t: 4, r: [] } : null));
    const { port } = await startGate(up.port);
    const c = await client(port);
    c.send(1, [1, insert('n1'), { noreply: true }]);
    c.send(2, [4]);
    expect(await c.next()).toEqual({ token: 2, body: { t: 4, r: [] } });
    expect(up.seen.map((s) => s.query[0])).toEqual([1, 4]);
  });

  test('when the upstream connection breaks mid-query, then the client\'s connection is closed (what was applied is unknown)', async () => {
    const up = await scriptedUpstream(() => 'close');
    const { port } = await startGate(up.port);
    const c = await client(port);
    c.send(1, [1, insert('k1'), {}]);
    expect(await c.next()).toBeNull();
  });

  test('when a client sends a wrong magic number, then it gets an error message and is closed, and another client is served', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, metrics } = await startGate(up.port);
    const bad = connect(port, '127.0.0.1');
    bad.write(Buffer.from([0x20, 0x2d, 0x0c, 0x40]));
    let text = '';
    bad.on('data', (c) => { text += c; });
    await once(bad, 'close');
    expect(text).toMatch(/^ERROR: Received an unsupported protocol version/);
    expect(await value(metrics, 'rethinkdb_gate_protocol_errors_total', { kind: 'version' })).toBe(1);
    const good = await client(port);
    good.send(1, [1, [16, [table, 'k']], {}]);
    expect(await good.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
  });

  test('when a client sends a frame longer than the limit, then only its connection is closed; garbage where a query starts is answered by the gate, never relayed', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, metrics } = await startGate(up.port, { maxFrameBytes: 1024 });
    const big = await client(port);
    const header = Buffer.alloc(12);
    header.writeUInt32LE(10 * 1024 * 1024, 8);
    big.socket.write(header);
    expect(await big.next()).toBeNull();
    const garbage = await client(port);
    garbage.socket.write(Buffer.concat([Buffer.alloc(8), Buffer.from([5, 0, 0, 0]), Buffer.from('[1,{x')]));
    expect(await garbage.next()).toEqual({ token: 0, body: { t: 16, r: ['Client is buggy (failed to deserialize query).'], b: [] } });
    garbage.send(9, [1, [16, [table, 'k']], {}]);
    expect(await garbage.next()).toEqual({ token: 9, body: { t: 1, r: ['fine'] } });
    expect(up.seen.filter((x) => x.corrupt)).toEqual([]);
    expect(await value(metrics, 'rethinkdb_gate_protocol_errors_total', { kind: 'frame_too_large' })).toBe(1);
    const good = await client(port);
    good.send(1, [1, [16, [table, 'k']], {}]);
    expect(await good.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
  });

  test('when the client STOPs a query the gate holds for a retry, then it is never sent again and the client gets the error it met', async () => {
    const up = await scriptedUpstream((q, attempt) => (q[0] === 3 ? { t: 16, r: ['Token 1 not in stream cache.'] } : attempt === 1 ? OP_FAILED : { t: 1, r: [{ inserted: 1 }] }));
    const { port } = await startGate(up.port, { retry: { budgetMs: 3000, minMs: 200, maxMs: 200 } });
    const c = await client(port);
    c.send(1, [1, insert('stopped'), {}]);
    await until(() => up.seen.length === 1);
    c.send(1, [3]);
    expect(await c.next()).toEqual({ token: 1, body: OP_FAILED });
    await new Promise((resolve) => { setTimeout(resolve, 300); });
    expect(up.seen.map((s) => s.query[0])).toEqual([1]);
  });

  test('when the gate stops with a NOREPLY_WAIT in flight, then it is answered first; an open changefeed does not hold the drain', async () => {
    const up = await scriptedUpstream((q) => {
      if (q[0] === 4) return { response: { t: 4, r: [] }, delayMs: 200 };
      if (q[0] === 1 && q[1][0] === 152) return { t: 3, r: [] };
      return null;
    });
    const { port, gate } = await startGate(up.port);
    const feed = await client(port);
    feed.send(1, [1, [152, [table]], {}]);
    expect(await feed.next()).toMatchObject({ token: 1, body: { t: 3 } });
    const c = await client(port);
    c.send(2, [1, insert('nr'), { noreply: true }]);
    await until(() => up.seen.some((x) => x.token === 2));
    const startedAt = Date.now();
    const stopped = gate.stop(5000);
    // The drain waits for the noreply write's noreplyWait, sent after it began (as a driver's close sends it): stop()
    // has marked every session draining before its first await.
    expect(gate.ready()).toBe(false);
    c.send(3, [4]);
    expect(await c.next()).toEqual({ token: 3, body: { t: 4, r: [] } });
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
    expect(Date.now() - startedAt).toBeLessThan(2000);
  });

  test('when a client half-closes and never closes, then stop() still returns by its deadline', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, gate } = await startGate(up.port);
    const c = await client(port);
    c.socket.end();
    const startedAt = Date.now();
    await gate.stop(300);
    expect(Date.now() - startedAt).toBeLessThan(2500);
  });

  test('when a client sends more than 1 MiB before the server finished the handshake, then its connection is closed', async () => {
    // An upstream that accepts and never answers the handshake.
    const accepted = [];
    const server = createServer((s) => accepted.push(s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => { for (const s of accepted) s.destroy(); return new Promise((resolve) => { server.close(resolve); }); });
    const { port, metrics } = await startGate(server.address().port);
    const socket = connect(port, '127.0.0.1');
    closers.push(() => socket.destroy());
    await once(socket, 'connect');
    const magic = Buffer.alloc(4);
    magic.writeUInt32LE(V1_0, 0);
    const closed = new Promise((resolve) => { socket.on('close', resolve); });
    socket.on('error', () => {}); // the gate resets the connection while the client is still writing
    socket.write(Buffer.concat([magic, Buffer.from('{}\0{}\0'), Buffer.alloc(2 * 1024 * 1024, 0x20)]));
    await closed;
    expect(await value(metrics, 'rethinkdb_gate_protocol_errors_total', { kind: 'held_too_much' })).toBe(1);
  });

  test('when the gate stops, then a query in flight is answered before its connection closes, and new clients are refused', async () => {
    const up = await scriptedUpstream(() => ({ response: { t: 1, r: ['late'] }, delayMs: 150 }));
    const { port, gate } = await startGate(up.port);
    const c = await client(port);
    c.send(1, [1, [16, [table, 'k']], {}]);
    await until(() => up.seen.length === 1);
    const stopped = gate.stop(2000);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['late'] } });
    expect(await c.next()).toBeNull();
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
    const refused = connect(port, '127.0.0.1');
    const [err] = await once(refused, 'error');
    expect(err.code).toBe('ECONNREFUSED');
  });
});

// A clock that moves only when the test says: sleep(ms) resolves once advance() has passed its time.
function steppedClock() {
  let t = 0;
  let sleepers = [];
  return {
    now: () => t,
    sleep: (ms) => new Promise((resolve) => { sleepers.push({ at: t + ms, resolve }); }),
    advance(ms) {
      t += ms;
      const due = sleepers.filter((x) => x.at <= t);
      sleepers = sleepers.filter((x) => x.at > t);
      for (const x of due) x.resolve();
    },
  };
}

// The first half of a shutdown (GATE_SHUTDOWN_DELAY_SECONDS): the Service must drop this gate while it still accepts.
describe('leaving', () => {
  test('when the gate leaves, then /readyz is false at once, and for the delay old and new clients are still served', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const stepped = steppedClock();
    const { port, gate } = await startGate(up.port, { shutdownDelaySeconds: 5 }, { gateClock: stepped });
    const old = await client(port);
    expect(gate.ready()).toBe(true);
    let left = null;
    gate.leave().then((res) => { left = res; });
    expect(gate.ready()).toBe(false);
    old.send(1, [1, [16, [table, 'k']], {}]);
    expect(await old.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
    const late = await client(port);
    late.send(2, [1, [16, [table, 'k']], {}]);
    expect(await late.next()).toEqual({ token: 2, body: { t: 1, r: ['fine'] } });
    stepped.advance(4900);
    await new Promise((resolve) => { setImmediate(resolve); });
    expect(left).toBeNull();
    stepped.advance(100);
    await until(() => left !== null);
    expect(left).toEqual({ leftAfterMs: 5000 });
    expect(gate.ready()).toBe(false);
  });

  test('when stop() comes while the gate leaves, then the delay ends at once and new clients are refused', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const stepped = steppedClock();
    const { port, gate } = await startGate(up.port, { shutdownDelaySeconds: 60 }, { gateClock: stepped });
    const leaving = gate.leave();
    const stopped = gate.stop(0);
    stepped.advance(100);
    expect(await leaving).toEqual({ leftAfterMs: 100 });
    stepped.advance(1000);
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
    const refused = connect(port, '127.0.0.1');
    const [err] = await once(refused, 'error');
    expect(err.code).toBe('ECONNREFUSED');
  });

  test('when the delay is 0, then leave() returns at once', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { gate } = await startGate(up.port, { shutdownDelaySeconds: 0 }, { gateClock: steppedClock() });
    expect(await gate.leave()).toEqual({ leftAfterMs: 0 });
  });
});

// Stopping: each connection closes between queries, and a query that comes as it closes is answered, never cut off.
describe('draining', () => {
  const read = [1, [16, [table, 'k']], {}];
  const stoppingAnswer = { t: 18, e: 4100000, r: [GATE_STOPPING], b: [] };

  test('when a client sends its next query as soon as the last is answered during a drain, then the gate answers it OP_FAILED, not run, and then closes', async () => {
    const up = await scriptedUpstream(() => ({ response: { t: 1, r: ['late'] }, delayMs: 100 }));
    const { port, gate, metrics } = await startGate(up.port);
    const c = await client(port);
    c.send(1, read);
    await until(() => up.seen.length === 1);
    const stopped = gate.stop(2000);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['late'] } });
    c.send(2, read);
    expect(await c.next()).toEqual({ token: 2, body: stoppingAnswer });
    expect(await c.next()).toBeNull();
    expect(up.seen.map((x) => x.token)).toEqual([1]);
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
    expect(await value(metrics, 'rethinkdb_gate_stopping_answers_total')).toBe(1);
  });

  test('when a client keeps sending after it was told the gate is stopping, then the connection closes at once, not at the drain\'s end', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, gate } = await startGate(up.port, { drainIdleMs: 60000 });
    const c = await client(port);
    c.send(1, read);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
    const stopped = gate.stop(30000);
    c.send(2, read);
    expect(await c.next()).toEqual({ token: 2, body: stoppingAnswer });
    c.send(3, read);
    expect(await c.next()).toBeNull();
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
  });

  test('when a connection is quiet during a drain, then it closes once it has been quiet for GATE_DRAIN_IDLE_MS', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, gate } = await startGate(up.port, { drainIdleMs: 50 });
    const c = await client(port);
    c.send(1, read);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
    const stopped = gate.stop(2000);
    expect(await c.next()).toBeNull();
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
  });

  test('when a noreply write comes during a drain, then it goes up (its client expects no answer), and the drain waits for its noreplyWait', async () => {
    const up = await scriptedUpstream((query) => (query[0] === 4 ? { t: 4, r: [] } : null));
    const { port, gate } = await startGate(up.port);
    const c = await client(port);
    c.send(1, [4]);
    expect(await c.next()).toEqual({ token: 1, body: { t: 4, r: [] } });
    const stopped = gate.stop(2000);
    c.send(2, [1, insert('nr'), { noreply: true }]);
    await until(() => up.seen.some((x) => x.token === 2));
    c.send(3, [4]);
    expect(await c.next()).toEqual({ token: 3, body: { t: 4, r: [] } });
    expect(await c.next()).toBeNull();
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
  });
});

// Holds (gate/src/holds.js): the manager keeps a table's new queries back while it moves the table's primaries.
describe('holds', () => {
  const other = [15, [[14, ['ycsb']], 'accounts']];
  // An update of one document of a table: a write, which holds keep back.
  const update = (tbl, key) => [53, [[16, [tbl, key]], { f: 1 }]];
  const computedTable = [15, [[14, ['ycsb']], [24, ['user', 'table']]]];
  const tokens = (up) => up.seen.map((x) => x.token);
  async function setUp(answer, overrides = {}) {
    const up = await scriptedUpstream(answer);
    const started = await startGate(up.port, overrides);
    const c = await client(started.port);
    c.socket.setNoDelay(true);
    return { up, c, ...started };
  }
  const echo = (q, attempt, token) => ({ t: 1, r: [token] });

  test('when a table is held, then its writes wait and go up in order at the release, while its reads and other tables pass', async () => {
    const { up, c, gate, metrics } = await setUp(echo);
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    c.send(1, [1, update(table, 'a'), {}]);
    c.send(2, [1, update(other, 'b'), {}]);
    c.send(3, [1, insert('c'), {}]);
    c.send(4, [1, [16, [table, 'read']], {}]);
    expect([await c.next(), await c.next()].sort((a, b) => a.token - b.token)).toEqual([{ token: 2, body: { t: 1, r: [2] } }, { token: 4, body: { t: 1, r: [4] } }]);
    await until(() => gate.heldQueries() === 2);
    expect(tokens(up).sort()).toEqual([2, 4]);
    expect(gate.release(hold.id)).toMatchObject({ how: 'released', tables: ['ycsb.usertable'] });
    expect([await c.next(), await c.next()]).toEqual([{ token: 1, body: { t: 1, r: [1] } }, { token: 3, body: { t: 1, r: [3] } }]);
    expect(tokens(up).slice(2)).toEqual([1, 3]);
    expect(await value(metrics, 'rethinkdb_gate_held_queries_total')).toBe(2);
    expect(await value(metrics, 'rethinkdb_gate_holds_ended_total', { how: 'released' })).toBe(1);
  });

  test('when a hold is not released, then it expires at its ttl and what it held goes up', async () => {
    const { up, c, gate, metrics } = await setUp(echo);
    const heldAt = Date.now();
    await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 80, drainMs: 0 });
    c.send(1, [1, update(table, 'a'), {}]);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
    expect(Date.now() - heldAt).toBeGreaterThanOrEqual(79);
    expect(tokens(up)).toEqual([1]);
    expect(gate.holds()).toEqual([]);
    expect(await value(metrics, 'rethinkdb_gate_holds_ended_total', { how: 'expired' })).toBe(1);
  });

  test('when a hold is asked for, then it answers once the writes of its tables in flight are answered, or says how many were left', async () => {
    const { up, c, gate } = await setUp((q, attempt, token) => ({ response: { t: 1, r: [token] }, delayMs: token === 2 ? 0 : 150 }));
    const answered = [];
    c.send(1, [1, update(table, 'slow'), {}]);
    c.send(2, [1, update(other, 'elsewhere'), {}]);
    await until(() => tokens(up).length === 2);
    const answers = (async () => { for (let i = 0; i < 2; i += 1) answered.push((await c.next()).token); })();
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 2000 });
    expect(hold.inFlight).toBe(0);
    await answers;
    expect(answered).toContain(1);
    gate.release(hold.id);
    // A drain of 0 answers at once with what is still in flight.
    c.send(3, [1, update(table, 'slow too'), {}]);
    await until(() => tokens(up).includes(3));
    const short = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    expect(short.inFlight).toBe(1);
    gate.release(short.id);
  });

  test('when a retry comes due during a hold, then it waits for the release without spending its budget; a STOP meanwhile ends it with its error', async () => {
    let failing = true;
    const { up, c, gate } = await setUp(() => (failing ? OP_FAILED : { t: 1, r: ['ok'] }), { retry: { budgetMs: 400, minMs: 100, maxMs: 100 } });
    c.send(1, [1, insert('k1'), {}]);
    c.send(2, [1, insert('k2'), {}]);
    await until(() => tokens(up).length === 2);
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    // Both retries come due (100 ms) and are held, longer than the whole budget.
    await until(() => gate.heldQueries() === 2);
    await sleep(450);
    expect(tokens(up)).toEqual([1, 2]);
    failing = false;
    c.send(2, [3]);
    expect(await c.next()).toEqual({ token: 2, body: OP_FAILED });
    gate.release(hold.id);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['ok'] } });
    expect(tokens(up)).toEqual([1, 2, 1]);
  });

  test('when noreply writes are held, then a noreplyWait waits behind them; a table computed in the query is held by any hold', async () => {
    const { up, c, gate } = await setUp((q, attempt, token) => (q[0] === 4 ? { t: 4, r: [] } : q[2]?.noreply ? null : { t: 1, r: [token] }));
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    c.send(1, [1, insert('nr'), { noreply: true }]);
    c.send(2, [4]);
    c.send(3, [1, update(computedTable, 'k'), {}]);
    c.send(4, [1, [103, []], {}]);
    expect(await c.next()).toEqual({ token: 4, body: { t: 1, r: [4] } });
    await until(() => gate.heldQueries() === 3);
    expect(tokens(up)).toEqual([4]);
    gate.release(hold.id);
    const answers = [await c.next(), await c.next()].sort((a, b) => a.token - b.token);
    expect(answers).toEqual([{ token: 2, body: { t: 4, r: [] } }, { token: 3, body: { t: 1, r: [3] } }]);
    expect(tokens(up)).toEqual([4, 1, 2, 3]);
  });

  test('when two holds cover a table, then its queries wait until both have ended', async () => {
    const { up, c, gate } = await setUp(echo);
    const first = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    const second = await gate.hold({ tables: ['ycsb.usertable', 'ycsb.accounts'], ttlMs: 5000, drainMs: 0 });
    c.send(1, [1, update(table, 'a'), {}]);
    await until(() => gate.heldQueries() === 1);
    gate.release(first.id);
    await sleep(30);
    expect(up.seen).toEqual([]);
    gate.release(second.id);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
  });

  test('when holds follow each other without a gap, then a held query still goes up once it has waited GATE_HOLD_MAX_MS', async () => {
    const { up, c, gate } = await setUp(echo, { hold: { maxMs: 200 } });
    let stop = false;
    // A hold on some other table every 50 ms, each lasting 150 ms: a query that computes its table is always covered.
    const holding = (async () => { while (!stop) { await gate.hold({ tables: ['other.t'], ttlMs: 150, drainMs: 0 }); await sleep(50); } })();
    await until(() => gate.holds().length > 0);
    const sent = Date.now();
    c.send(1, [1, update(computedTable, 'k'), {}]);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
    const waited = Date.now() - sent;
    stop = true;
    await holding;
    expect(waited).toBeGreaterThanOrEqual(150);
    expect(waited).toBeLessThan(1000);
    expect(tokens(up)).toEqual([1]);
  });

  test('when a cursor opened before the hold asks for its next batch, or a changefeed its changes, then they pass (reads are not held)', async () => {
    const { up, c, gate } = await setUp((q, attempt, token) => (q[0] === 2 ? { t: 3, r: [`batch-${token}`] } : { t: 3, r: ['first'] }));
    c.send(1, [1, table, {}]);
    c.send(2, [1, [152, [table]], {}]);
    expect((await c.next()).body.t).toBe(3);
    expect((await c.next()).body.t).toBe(3);
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    c.send(1, [2]);
    c.send(2, [2]);
    const answers = [await c.next(), await c.next()].sort((a, b) => a.token - b.token);
    expect(answers).toEqual([{ token: 1, body: { t: 3, r: ['batch-1'] } }, { token: 2, body: { t: 3, r: ['batch-2'] } }]);
    expect(gate.heldQueries()).toBe(0);
    gate.release(hold.id);
    expect(up.seen.filter((x) => x.query[0] === 2).map((x) => x.token).sort()).toEqual([1, 2]);
  });

  test('when a client sends more than GATE_HOLD_MAX_QUEUED_BYTES during a hold, then the gate stops reading it; the release sends all of it', async () => {
    const { up, c, gate } = await setUp(echo, { hold: { maxMs: 5000, maxQueuedBytes: 64 * 1024 } });
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    const big = 'x'.repeat(32 * 1024);
    for (let i = 1; i <= 40; i += 1) c.send(i, [1, [56, [table, { id: `big-${i}`, pad: big }]], {}]);
    await sleep(200);
    // About 64 KiB held (three frames at most), the rest still in the client's socket or the gate's unread buffers.
    expect(gate.heldQueries()).toBeLessThanOrEqual(4);
    expect(up.seen).toEqual([]);
    gate.release(hold.id);
    const got = [];
    for (let i = 0; i < 40; i += 1) got.push((await c.next()).token);
    expect(got.sort((a, b) => a - b)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
  });

  test('when the gate stops, then what its holds keep back goes up before the drain, and no new hold is taken', async () => {
    const { up, c, gate } = await setUp((q, attempt, token) => ({ response: { t: 1, r: [token] }, delayMs: 20 }));
    await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 });
    c.send(1, [1, update(table, 'a'), {}]);
    await until(() => gate.heldQueries() === 1);
    const stopped = gate.stop(2000);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
    expect(await stopped).toEqual({ closedWithQueriesInFlight: 0 });
    expect(tokens(up)).toEqual([1]);
    expect(await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 0 })).toEqual({ refused: 'the gate is stopping' });
  });

  test('when the caller goes away while its hold drains, then the hold ends', async () => {
    const { up, c, gate } = await setUp((q, attempt, token) => ({ response: { t: 1, r: [token] }, delayMs: 300 }));
    c.send(1, [1, update(table, 'slow'), {}]);
    await until(() => tokens(up).length === 1);
    let gone = false;
    const holding = gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 2000 }, { abandoned: () => gone });
    await until(() => gate.holds().length === 1);
    gone = true;
    expect(await holding).toEqual({ refused: 'the caller went away before the hold answered' });
    expect(gate.holds()).toEqual([]);
  });
});

// The gate-wide bounds: what a client that does not play by the rules can make the gate hold, and for how long.
describe('bounds', () => {
  const read = (pad) => [1, [16, [table, pad]], {}];

  test('when a read meets a shard without a primary, then it is sent again; with no room for its copy, it is not', async () => {
    const up = await scriptedUpstream((q, attempt) => (attempt === 1 ? READ_NOT_AVAILABLE : { t: 1, r: ['read'] }));
    const { port } = await startGate(up.port);
    const c = await client(port);
    c.send(1, read('k'));
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: ['read'] } });
    expect(up.seen.map((x) => x.attempt)).toEqual([1, 2]);
    const full = await startGate(up.port, { maxRetainedBytes: 0 });
    const d = await client(full.port);
    d.send(2, read('k2'));
    expect(await d.next()).toEqual({ token: 2, body: READ_NOT_AVAILABLE });
    expect(await value(full.metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'retained_bytes' })).toBe(1);
  });

  test('when one connection has kept its share of the budget, then its next query gets no copy while another connection\'s does', async () => {
    const up = await scriptedUpstream((q, attempt) => (q[1][1][1].startsWith('slow') ? null : attempt === 1 ? READ_NOT_AVAILABLE : { t: 1, r: ['read'] }));
    const { port, metrics, gate } = await startGate(up.port, { maxRetainedBytesPerConnection: 2048, maxRetainedBytes: 1024 * 1024 });
    const greedy = await client(port);
    // Two reads of about 0.95 KiB never answered: of this connection's 2 KiB share, too little is left for the next.
    greedy.send(1, read(`slow-${'x'.repeat(900)}`));
    greedy.send(2, read(`slow-${'y'.repeat(900)}`));
    await until(() => up.seen.length === 2);
    greedy.send(3, read(`k-${'z'.repeat(200)}`));
    expect(await greedy.next()).toEqual({ token: 3, body: READ_NOT_AVAILABLE });
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'retained_bytes' })).toBe(1);
    const other = await client(port);
    other.send(1, read('k2'));
    expect(await other.next()).toEqual({ token: 1, body: { t: 1, r: ['read'] } });
    expect(gate.budgets.retained.used()).toBeGreaterThan(1000);
  });

  test('when a client sends queries and never reads, then the gate stops reading it, keeps no more than its budget, and serves a bystander', async () => {
    const answer = 'y'.repeat(256 * 1024);
    const up = await scriptedUpstream(() => ({ t: 1, r: [answer] }));
    const { port, gate } = await startGate(up.port, { maxRetainedBytes: 2 * 1024 * 1024 });
    const hostile = await client(port);
    hostile.socket.pause();
    const pad = 'x'.repeat(64 * 1024);
    for (let i = 1; i <= 300; i += 1) hostile.send(i, read(`${i}-${pad}`));
    await sleep(500);
    const seenWhileNotReading = up.seen.length;
    expect(seenWhileNotReading).toBeLessThan(300);
    expect(gate.budgets.retained.used()).toBeLessThanOrEqual(2 * 1024 * 1024);
    const bystander = await client(port);
    bystander.send(1, read('fine'));
    expect((await bystander.next()).body.t).toBe(1);
    hostile.socket.resume();
    const tokens = [];
    for (let i = 0; i < 300; i += 1) tokens.push((await hostile.next()).token);
    expect(tokens.sort((a, b) => a - b)).toEqual(Array.from({ length: 300 }, (_, i) => i + 1));
    expect(gate.budgets.retained.used()).toBe(0);
  });

  test('when a client does not finish its handshake, then it is closed at the time-out and counted', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, metrics } = await startGate(up.port, { handshakeTimeoutMs: 100 });
    const silent = connect(port, '127.0.0.1');
    const magicOnly = connect(port, '127.0.0.1');
    const magic = Buffer.alloc(4);
    magic.writeUInt32LE(V1_0, 0);
    magicOnly.write(magic);
    silent.resume();
    magicOnly.resume();
    await Promise.all([once(silent, 'close'), once(magicOnly, 'close')]);
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'handshake_timeout' })).toBe(2);
  });

  test('when a frame is begun and not finished within the time-out, then its connection is closed; one making progress is not', async () => {
    let offset = 0;
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, gate, metrics } = await startGate(up.port, {
      retry: { budgetMs: 3000, minMs: 5, maxMs: 20 }, maxFrameBytes: 1024 * 1024, frameTimeoutMs: 1000,
    }, { gateClock: { now: () => Date.now() + offset, sleep } });
    const stalled = await client(port);
    const busy = await client(port);
    const half = frame(1, read('k'));
    stalled.socket.write(half.subarray(0, 20));
    busy.socket.write(half.subarray(0, 20));
    await until(() => gate.budgets.partial.used() === 40);
    offset += 900;
    // The busy one completes a frame and begins another: its time starts again.
    busy.socket.write(Buffer.concat([half.subarray(20), half.subarray(0, 20)]));
    expect((await busy.next()).token).toBe(1);
    offset += 200;
    gate.sweep();
    expect(await stalled.next()).toBeNull();
    busy.socket.write(half.subarray(20));
    expect((await busy.next()).token).toBe(1);
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'frame_timeout' })).toBe(1);
  });

  test('when half-received frames would go over the gate-wide limit, then the connection that crosses it is closed and the others finish', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, gate, metrics } = await startGate(up.port, { maxFrameBytes: 64 * 1024, maxPartialFrameBytes: 100 * 1024 });
    const first = await client(port);
    const second = await client(port);
    const big = frame(1, read('z'.repeat(60 * 1024)));
    first.socket.write(big.subarray(0, 50 * 1024));
    await until(() => gate.budgets.partial.used() === 50 * 1024);
    second.socket.write(big.subarray(0, 55 * 1024));
    expect(await second.next()).toBeNull();
    first.socket.write(big.subarray(50 * 1024));
    expect(await first.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
    expect(gate.budgets.partial.used()).toBe(0);
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'partial_frame_bytes' })).toBe(1);
  });

  test('when the gate has its limit of connections, then the next one is told so and closed; one closing makes room', async () => {
    const up = await scriptedUpstream(() => ({ t: 1, r: ['fine'] }));
    const { port, metrics, gate } = await startGate(up.port, { maxConnections: 2 });
    const a = await client(port);
    await client(port);
    const refused = connect(port, '127.0.0.1');
    let text = '';
    refused.on('data', (chunk) => { text += chunk; });
    await once(refused, 'close');
    expect(text).toMatch(/^ERROR: rethinkdb-query-gate has 2 connections open, its limit \(GATE_MAX_CONNECTIONS\)/);
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'connections' })).toBe(1);
    a.socket.destroy();
    await until(() => gate.connections() < 2);
    const next = await client(port);
    next.send(1, read('k'));
    expect(await next.next()).toEqual({ token: 1, body: { t: 1, r: ['fine'] } });
  });

  test('when a query\'s type is not a plain integer, then the gate answers it and never relays it; whitespace and a NUL are read as the server reads them', async () => {
    const up = await scriptedUpstream((q, attempt, token) => ({ t: 1, r: [token] }));
    const { port } = await startGate(up.port);
    const c = await client(port);
    const raw = (token, text) => {
      const body = Buffer.from(text);
      const header = Buffer.alloc(12);
      header.writeBigUInt64LE(BigInt(token), 0);
      header.writeUInt32LE(body.length, 8);
      c.socket.write(Buffer.concat([header, body]));
    };
    raw(1, '[4294967297,[16,[[15,[[14,["ycsb"]],"usertable"]],"k"]],{}]');
    expect(await c.next()).toMatchObject({ token: 1, body: { t: 16, r: [expect.stringMatching(/plain integer/)] } });
    raw(2, '[1.0000000000000002,[16,[[15,[[14,["ycsb"]],"usertable"]],"k"]],{}]');
    expect(await c.next()).toMatchObject({ token: 2, body: { t: 16 } });
    raw(3, ' [ 1 ,[16,[[15,[[14,["ycsb"]],"usertable"]],"k"]],{}]');
    expect(await c.next()).toEqual({ token: 3, body: { t: 1, r: [3] } });
    expect(up.seen.map((x) => x.token)).toEqual([3]);
  });

  test('when a query repeats a key, then it is relayed untracked: a noreply the server takes first leaves nothing waiting', async () => {
    const up = await scriptedUpstream((q, attempt, token) => (token === 1 ? null : { t: 1, r: [token] }));
    const { port, gate } = await startGate(up.port);
    const c = await client(port);
    const body = Buffer.from('[1,[56,[[15,[[14,["ycsb"]],"usertable"]],{"id":"d"}]],{"noreply":true,"noreply":false}]');
    const header = Buffer.alloc(12);
    header.writeBigUInt64LE(1n, 0);
    header.writeUInt32LE(body.length, 8);
    c.socket.write(Buffer.concat([header, body]));
    await until(() => up.seen.length === 1);
    const hold = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 5000, drainMs: 2000 });
    expect(hold.inFlight).toBe(0);
    gate.release(hold.id);
    expect(await gate.stop(2000)).toEqual({ closedWithQueriesInFlight: 0 });
  });

  test('when a retried write meets holds again, then its time held in all is bounded by GATE_HOLD_MAX_MS', async () => {
    let offset = 0;
    const up = await scriptedUpstream((q, attempt, token) => (attempt === 1 ? OP_FAILED : { t: 1, r: [token] }));
    const { port, gate, metrics } = await startGate(up.port, {
      retry: { budgetMs: 3000, minMs: 300, maxMs: 300 }, maxFrameBytes: 1024 * 1024, hold: { maxMs: 60000 },
    }, { gateClock: { now: () => Date.now() + offset, sleep } });
    const c = await client(port);
    const first = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 60000, drainMs: 0 });
    c.send(1, [1, insert('held-twice'), {}]);
    await until(() => gate.heldQueries() === 1);
    offset += 40000;
    // Held 40 s; answered OP_FAILED; its retry (300 ms later) comes due under a second hold.
    gate.release(first.id);
    await until(() => up.seen.length === 1);
    const second = await gate.hold({ tables: ['ycsb.usertable'], ttlMs: 60000, drainMs: 0 });
    await until(() => gate.heldQueries() === 1);
    offset += 20001;
    // Any hold's end looks at the queue again: the retry has been held 60 s in all, so it goes up under the second hold.
    const other = await gate.hold({ tables: ['other.t'], ttlMs: 60000, drainMs: 0 });
    gate.release(other.id);
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
    expect(gate.holds().map((h) => h.id)).toEqual([second.id]);
  });

  test('when a START reuses the token of a query still in flight, then the gate refuses it and sends nothing', async () => {
    const up = await scriptedUpstream((q, attempt, token) => ({ response: { t: 1, r: [token] }, delayMs: 100 }));
    const { port } = await startGate(up.port);
    const c = await client(port);
    c.send(1, read('first'));
    c.send(1, read('second'));
    expect(await c.next()).toMatchObject({ token: 1, body: { t: 16, r: [expect.stringMatching(/still in flight/)] } });
    expect(await c.next()).toEqual({ token: 1, body: { t: 1, r: [1] } });
    expect(up.seen).toHaveLength(1);
  });

  test('when a client asks for a large answer and does not read it, then the answer half-received from the upstream closes it at the frame time-out', async () => {
    let offset = 0;
    const answer = 'z'.repeat(4 * 1024 * 1024);
    const up = await scriptedUpstream(() => ({ t: 1, r: [answer] }));
    const { port, gate, metrics } = await startGate(up.port, {
      retry: { budgetMs: 3000, minMs: 5, maxMs: 20 }, maxFrameBytes: 16 * 1024 * 1024, frameTimeoutMs: 1000,
    }, { gateClock: { now: () => Date.now() + offset, sleep } });
    const c = await client(port);
    c.socket.on('error', () => {});
    c.socket.pause();
    for (let i = 1; i <= 4; i += 1) c.send(i, read(`big-${i}`));
    await until(() => gate.budgets.partial.used() > 0);
    offset += 1001;
    gate.sweep();
    c.socket.resume();
    for (;;) { if ((await c.next()) === null) break; }
    expect(await value(metrics, 'rethinkdb_gate_limit_hits_total', { limit: 'frame_timeout' })).toBe(1);
    expect(gate.budgets.partial.used()).toBe(0);
  });
});
