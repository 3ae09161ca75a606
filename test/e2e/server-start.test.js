// The servers as started for real: the entry point (node src/server.js) when it cannot listen (which port and why,
// and a non-zero exit), and both ports (the API, started by src/server.js, and the eviction webhook,
// startWebhookServer) when a client sends less of a request than it announced: the connection is closed after
// HTTP_REQUEST_TIMEOUT_SECONDS, not Node's default 300 s, while answers that take longer are not cut short.

import { spawn } from 'node:child_process';
import { request as httpsRequest } from 'node:https';
import { connect, createServer } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { listenFailureMessage } from '../../src/lib/listen-errors.js';
import { createWorkTracker } from '../../src/lib/work-tracker.js';
import { createLogger } from '../../src/logger.js';
import { createWebhookApp } from '../../src/routes/webhook-routes.js';
import { startWebhookServer } from '../../src/webhook-server.js';
import { evictionReview } from '../helpers/harness.js';
import { makeWebhookCertificate } from '../helpers/webhook-tls.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

function runServer(env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['src/server.js'], { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { out += c; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('exit', (code, signal) => { clearTimeout(killer); resolve({ code, signal, out }); });
  });
}

// node src/server.js on the sandbox, on 127.0.0.1 and a free port (PORT=0): resolves once its log says it listens.
function startSandboxManager(env) {
  const child = spawn(process.execPath, ['src/server.js'], {
    cwd: root, env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stop = () => new Promise((done) => {
    if (child.exitCode !== null || child.signalCode !== null) { done(); return; }
    child.once('exit', done);
    child.kill('SIGKILL');
  });
  let out = '';
  const listening = new Promise((resolve, reject) => {
    const parse = (line) => { try { return JSON.parse(line); } catch { return null; } };
    child.stdout.on('data', (chunk) => {
      out += chunk;
      const entry = out.split('\n').slice(0, -1).map(parse).find((l) => l?.msg === 'manager listening');
      if (entry) resolve(entry.port);
    });
    child.stderr.on('data', (chunk) => { out += chunk; });
    child.on('exit', (code) => reject(new Error(`the manager exited (${code}) before listening: ${out}`)));
  });
  return { stop, listening, output: () => out };
}

// Sends a request's head announcing a 100-byte body and only 10 bytes of it, then waits: resolves with all the server
// wrote once it closes the connection.
function sendTruncatedRequest(socket, path) {
  return new Promise((resolve) => {
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => { answer += chunk; });
    socket.on('error', () => {});
    socket.on('close', () => resolve(answer));
    socket.write(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"reason":`);
  });
}

// Generous next to the 1 s limit of these tests, and far below Node's default of 300 s.
const TRUNCATED_REQUEST_TEST_TIMEOUT_MS = 60000;

describe('node src/server.js', () => {
  test('when it runs in a pod without RETHINKDB_HOST, then it refuses the sandbox and exits 1, naming what to set', async () => {
    const { code, out } = await runServer({ KUBERNETES_SERVICE_HOST: '198.18.96.1', RETHINKDB_HOSTS: 'rethinkdb' });
    expect(code).toBe(1);
    expect(out).toContain('RETHINKDB_HOST is not set and this runs in a pod');
  });

  test('when a variable looks like a key but is none, then the start-up log warns, naming the nearest key', async () => {
    const manager = startSandboxManager({ PRESTOP_DEADLINE_SECOND: '20' });
    try {
      await manager.listening;
    } finally {
      await manager.stop();
    }
    expect(manager.output()).toContain('PRESTOP_DEADLINE_SECOND is not a configuration key (did you mean PRESTOP_DEADLINE_SECONDS?); it is ignored');
  });

  test('when its HTTP port is in use, then it says which port and exits 1 (no TypeError)', async () => {
    const holder = createServer();
    await new Promise((resolve) => { holder.listen(0, '127.0.0.1', resolve); });
    const { port } = holder.address();
    try {
      const { code, out } = await runServer({ PORT: String(port), HOST: '127.0.0.1' });
      expect(code).toBe(1);
      const fatal = out.split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.level === 60);
      expect(fatal).toMatchObject({ msg: 'cannot listen', code: 'EADDRINUSE', err: `the HTTP port 127.0.0.1:${port} is already in use (another process listens there; set PORT to a free port)` });
      expect(out).not.toMatch(/TypeError/);
    } finally {
      holder.close();
    }
  });

  test.each([
    ['EADDRINUSE', /port 0\.0\.0\.0:80 is already in use/],
    ['EACCES', /port 0\.0\.0\.0:80 needs privileges/],
    ['EADDRNOTAVAIL', /address 0\.0\.0\.0:80 is not an address of this host/],
    ['EOTHER', /the HTTP server cannot listen on 0\.0\.0\.0:80: boom/],
  ])('when listening fails with %s, then the message says so', (code, expected) => {
    expect(listenFailureMessage(Object.assign(new Error('boom'), { code }), { what: 'HTTP', host: '0.0.0.0', port: 80 })).toMatch(expected);
  });

  describe('with a request limit of 1 s', () => {
    let manager;
    // Also after a test that timed out: no manager outlives the test.
    afterEach(() => manager?.stop());

    test('when a client sends less body than its Content-Length and waits, then the API port answers 408 and closes the connection after HTTP_REQUEST_TIMEOUT_SECONDS', async () => {
      manager = startSandboxManager({ HTTP_REQUEST_TIMEOUT_SECONDS: '1' });
      const port = await manager.listening;
      const answer = await sendTruncatedRequest(connect(port, '127.0.0.1'), '/v1/actions/rebalance-primaries');
      expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    }, TRUNCATED_REQUEST_TEST_TIMEOUT_MS);
  });
});

describe('startWebhookServer', () => {
  let tls;
  let webhook;
  let releaseReview;
  let reviewReached;
  const reviewHeld = new Promise((resolve) => { releaseReview = resolve; });
  const reviewStarted = new Promise((resolve) => { reviewReached = resolve; });

  // The layout: a CA and serving certificate for 127.0.0.1, and the webhook app on a free loopback port, its
  // request limit from HTTP_REQUEST_TIMEOUT_SECONDS=1; a review is answered only once the test releases it.
  beforeAll(async () => {
    tls = makeWebhookCertificate();
    const config = loadConfig({ HTTP_REQUEST_TIMEOUT_SECONDS: '1' });
    const app = createWebhookApp({
      maintenance: { reviewEviction: async () => { reviewReached(); await reviewHeld; return { allowed: true }; } },
      work: createWorkTracker({ started: true }), logger: createLogger({ level: 'silent' }),
    });
    webhook = await startWebhookServer({
      app, certFile: tls.certFile, keyFile: tls.keyFile, port: 0, host: '127.0.0.1', logger: createLogger({ level: 'silent' }),
      requestTimeoutMs: config.http.requestTimeoutMs,
    });
  });

  afterAll(async () => {
    releaseReview();
    await webhook?.close();
    tls?.remove();
  });

  const connectTls = () => tlsConnect({ host: '127.0.0.1', port: webhook.port, ca: tls.ca, servername: 'localhost' });

  test('when a client sends less body than its Content-Length and waits, then the webhook answers 408 and closes the connection after the request limit', async () => {
    const answer = await sendTruncatedRequest(connectTls(), '/v1/admission/eviction');
    expect(answer).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
  }, TRUNCATED_REQUEST_TEST_TIMEOUT_MS);

  test('when a review takes longer to answer than the request limit, then it is answered all the same (the limit is on receiving)', async () => {
    const body = JSON.stringify(evictionReview({ pod: 'rethinkdb-0' }));
    const answered = new Promise((resolve, reject) => {
      const req = httpsRequest({
        host: '127.0.0.1', port: webhook.port, path: '/v1/admission/eviction', method: 'POST', ca: tls.ca, servername: 'localhost',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      }, (res) => {
        let text = '';
        res.on('data', (chunk) => { text += chunk; });
        res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.end(body);
    });
    answered.catch(() => {}); // awaited below; a failure before that must not end the test run
    // Once the review is being decided, a truncated request sent after it is cut off: the server has checked its
    // connections past the limit, and the review, older and still unanswered, was not cut off with it.
    await reviewStarted;
    expect(await sendTruncatedRequest(connectTls(), '/v1/admission/eviction')).toMatch(/^HTTP\/1\.1 408 /);
    releaseReview();
    expect(await answered).toEqual({ status: 200, body: expect.objectContaining({ response: { uid: 'uid-rethinkdb-0', allowed: true } }) });
  }, TRUNCATED_REQUEST_TEST_TIMEOUT_MS);
});
