// A corpus of malformed requests fired at every operation in /openapi.json (property-based, fast-check):
// wrong types, unknown fields and query parameters, missing fields, bad path parameters, oversized bodies,
// bodies that are not JSON, not application/json or falsely compressed, deep nesting, huge strings, prototype keys;
// and, as raw bytes, bodies with malformed transfer encodings at every mutating route.
// Every answer must be the documented 4xx with the error body, the server must stay up, and nothing may change:
// no write reaches RethinkDB, no Kubernetes call changes anything, no operation or audit record appears.

import { once } from 'node:events';
import http from 'node:http';
import net from 'node:net';
import Ajv from 'ajv';
import fc from 'fast-check';
import { ERROR_CODES } from '../../src/errors.js';
import { buildOpenApiDocument, toOpenApiPath } from '../../src/routes/openapi.js';
import { listRoutes } from '../helpers/express-routes.js';
import { createSandboxHarness } from '../helpers/harness.js';
import { malformedRequests, toHttpRequest } from '../helpers/malformed-requests.js';

// Reproducible by default; FC_SEED=<n> explores other corners. fast-check prints the seed and path of a failure.
const SEED = Number(process.env.FC_SEED ?? 20260311);
// Each defect that applies to an operation gets this many requests (about 40-60 per operation).
const RUNS_PER_DEFECT = 5;

// The one place requests get credentials: the operations with a `security` requirement (hooks, actions, sandbox controls)
// carry the static token the sandbox manager is configured with, so the corpus checks validation, not the 401
// (test/routes/auth.test.js covers refused callers).
const BEARER_TOKEN = 'corpus-static-token-0123456789abcdefghij';
function credentialsFor(operation) {
  return operation.security?.length > 0 && BEARER_TOKEN ? { authorization: `Bearer ${BEARER_TOKEN}` } : {};
}

// Every call that changes the sandbox: on the RethinkDB source, the cluster model and the Kubernetes side.
const WRITES = {
  source: ['updateTableShards'],
  model: ['updateTableShards', 'addServer', 'addTable', 'crashServer', 'restoreServer'],
  kube: ['annotatePod', 'createPodEvent', 'patchStatefulSetScale', 'setPodCpu', 'setInterference', 'crashNode', 'setNodeUnschedulable', 'startReplacementPod', 'stopPod'],
};

function countCalls(target, methods, label, calls) {
  for (const method of methods) {
    const original = target[method];
    // eslint-disable-next-line no-param-reassign
    target[method] = function counted(...args) { calls.push(`${label}.${method}`); return original.apply(this, args); };
  }
  return target;
}

// What a request could change, read back from the sandbox.
async function sandboxState(h) {
  return {
    systemTables: h.model.readSystemTables(),
    pods: await h.kube.listRethinkDbPods(),
    scale: await h.kube.getStatefulSetScale(),
    events: h.kube.events(),
    podMetrics: await h.kube.listPodMetrics(),
    nodeMetrics: await h.kube.listNodeMetrics(),
    operations: h.operations.list(),
    audit: h.audit.list({ limit: 500 }),
    marks: await h.marks.list(),
  };
}

// A raw HTTP request, so that the path, headers and body go out exactly as built (no client normalizes them).
function send(port, agent, { method, path, headers, body }) {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: '127.0.0.1', port, method, path, agent,
      headers: { ...headers, ...(body === undefined ? {} : { 'content-length': Buffer.byteLength(body) }) },
    }, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// The error codes an operation documents for a status.
function documentedCodes(operation, status) {
  return operation.responses[String(status)]?.content['application/json'].schema.allOf[1].properties.error.enum ?? [];
}

// A sandbox of its own for each operation (a failure cannot leak into the next), served on a port, with every
// write counted and the state it starts from.
async function startSandbox() {
  const calls = [];
  const h = createSandboxHarness({
    env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/run/secrets/token' },
    staticToken: BEARER_TOKEN,
    wrapSource: (source) => countCalls({ ...source }, WRITES.source, 'source', calls),
  });
  countCalls(h.model, WRITES.model, 'model', calls);
  countCalls(h.kube, WRITES.kube, 'kube', calls);
  const server = h.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const { port } = server.address();
  return {
    calls,
    port,
    // Resolves once no request handler, operation or annotation write is still running.
    idle: async () => { await h.work.drain(); await h.operations.drain(); await h.marks.flush(); },
    before: await sandboxState(h),
    // After a test's own setup: the state to compare with is the one it left, and no call counts yet.
    async rebase() { await this.idle(); this.before = await sandboxState(h); calls.length = 0; },
    state: () => sandboxState(h),
    send: (req) => send(port, agent, req),
    async close() {
      agent.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => { server.close(resolve); });
    },
  };
}

// Driven by the document (openapi.test.js checks it is the one served), for the operations the sandbox app
// serves; documented routes served on other branches are left to the route-coverage test.
const document = buildOpenApiDocument();
const served = new Set(listRoutes(createSandboxHarness().app).map((route) => {
  const [method, path] = route.split(' ');
  return `${method.toLowerCase()} ${toOpenApiPath(path)}`;
}));
const OPERATIONS = Object.entries(document.paths)
  .flatMap(([path, item]) => Object.entries(item).map(([method, operation]) => [`${method.toUpperCase()} ${path}`, { method, path, operation }]))
  .filter(([, { method, path }]) => served.has(`${method} ${path}`));
const errorBody = new Ajv({ strict: false }).compile(document.components.schemas.Error);

describe('malformed requests at every documented operation', () => {
  test('when the document is read, then every route the app serves has an operation to fire at', () => {
    expect(OPERATIONS.length).toBe(served.size);
  });

  test.each(OPERATIONS)('when malformed requests hit %s, then each gets its documented 4xx, the server stays up and nothing changes', async (_, { method, path, operation }) => {
    const prototypeKeys = Object.getOwnPropertyNames(Object.prototype).sort();
    const sandbox = await startSandbox();
    try {
      for (const [defect, requests] of Object.entries(malformedRequests(operation))) {
        await fc.assert(fc.asyncProperty(requests, async (parts) => {
          sandbox.calls.length = 0;
          const res = await sandbox.send(toHttpRequest(method, path, parts, credentialsFor(operation)));
          const body = JSON.parse(res.text);
          expect({ defect, status: res.status }).toEqual({ defect, status: parts.expect.status });
          expect(errorBody(body)).toBe(true);
          expect(ERROR_CODES[body.error].statusCode).toBe(res.status);
          expect(documentedCodes(operation, res.status)).toContain(body.error);
          if (parts.expect.text) expect(body.message).toContain(parts.expect.text);
          expect((await sandbox.send({ method: 'GET', path: '/livez', headers: {} })).status).toBe(200);
          expect(sandbox.calls).toEqual([]);
          const now = await sandbox.state();
          // Comparing the text first is much faster; the deep comparison is there for its diff.
          if (JSON.stringify(now) !== JSON.stringify(sandbox.before)) expect(now).toEqual(sandbox.before);
        }), { numRuns: RUNS_PER_DEFECT, seed: SEED });
      }
    } finally {
      await sandbox.close();
    }
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeKeys);
  });
});

// Bytes as they go on the wire: a request line, headers and a body framed by hand, on a socket of its own.
// Resolves with the status line's code (null when the server closed without answering) once the server closes.
function sendRaw(port, { head, framed, endAfter = false }) {
  return new Promise((resolve) => {
    let text = '';
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`${head}\r\n${framed}`);
      if (endAfter) socket.end();
    });
    const timer = setTimeout(() => socket.destroy(), 3000);
    socket.on('data', (chunk) => { text += chunk; });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      resolve(match ? Number(match[1]) : null);
    });
  });
}

// Transfer encodings that do not frame a body correctly. Node's HTTP parser answers most with its own 400 and
// closes the connection, possibly after the route's middleware has started: the route must then not run.
const MALFORMED_FRAMINGS = [
  ['an invalid chunk size', { te: 'chunked', framed: (body) => `ZZZ\r\n${body}\r\n0\r\n\r\n` }],
  ['a negative chunk size', { te: 'chunked', framed: (body) => `-2\r\n${body}\r\n0\r\n\r\n` }],
  ['a chunk size that overflows', { te: 'chunked', framed: (body) => `FFFFFFFFFFFFFFFFFFFF\r\n${body}\r\n0\r\n\r\n` }],
  ['a chunk longer than its size', { te: 'chunked', framed: (body) => `1\r\n${body}\r\n0\r\n\r\n` }],
  ['no CRLF after the chunk data', { te: 'chunked', framed: (body) => `${hex(body)}\r\n${body}XX0\r\n\r\n` }],
  ['a chunk extension with a control character', { te: 'chunked', framed: (body) => `${hex(body)};\u0001\r\n${body}\r\n0\r\n\r\n` }],
  ['bare LF line ends', { te: 'chunked', framed: (body) => `${hex(body)}\n${body}\n0\n\n` }],
  ['a malformed trailer', { te: 'chunked', framed: (body) => `${hex(body)}\r\n${body}\r\n0\r\nnot a header\r\n\r\n` }],
  ['a body cut short, then the connection closed', { te: 'chunked', framed: (body) => `${hex(body) + 1}\r\n${body}`, endAfter: true }],
  ['no last chunk, then the connection closed', { te: 'chunked', framed: (body) => `${hex(body)}\r\n${body}\r\n`, endAfter: true }],
  ['both Content-Length and chunked', { te: 'chunked', extra: 'Content-Length: 2', framed: (body) => `${hex(body)}\r\n${body}\r\n0\r\n\r\n` }],
  ['chunked not the last transfer coding', { te: 'chunked, gzip', framed: (body) => `${hex(body)}\r\n${body}\r\n0\r\n\r\n` }],
  ['a transfer coding nobody decodes', { te: 'gzip, chunked', framed: (body) => `${hex(body)}\r\n${body}\r\n0\r\n\r\n` }],
  ['an unknown transfer coding', { te: 'x-custom', framed: (body) => body, endAfter: true }],
];

function hex(text) {
  return Buffer.byteLength(text).toString(16);
}

// For each mutating operation, a request that changes something when it is framed correctly (checked below),
// and what must be done first for it to have something to change.
const EFFECTIVE = {
  'POST /v1/actions/move-primaries-from-server': { body: { server: 'rethinkdb_0' } },
  'POST /v1/actions/move-primaries-from-node': { body: { node: 'node-0' } },
  'POST /v1/actions/rebalance-primaries': { body: {} },
  'POST /v1/actions/release-server': { body: { server: 'rethinkdb_0' } },
  'POST /v1/actions/add-server': { body: { server: 'rethinkdb_0' } },
  'POST /v1/actions/create-replica': { body: { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' } },
  'POST /v1/actions/migrate-replicas-off': { body: { server: 'rethinkdb_0' } },
  'POST /v1/hooks/prestop': { target: '?pod=rethinkdb-0' },
  'POST /v1/hooks/poststart': { target: '?pod=rethinkdb-0' },
  'POST /v1/hooks/perfwarning': { body: { pod: 'rethinkdb-0' } },
  'DELETE /v1/hooks/perfwarning': { target: '?pod=rethinkdb-0', setup: ['POST', '/v1/hooks/perfwarning', { pod: 'rethinkdb-0' }] },
  'POST /v1/sandbox/servers/{name}/crash': { path: { name: 'rethinkdb_0' } },
  'POST /v1/sandbox/servers/{name}/restore': { path: { name: 'rethinkdb_0' }, setup: ['POST', '/v1/sandbox/servers/rethinkdb_0/crash', {}] },
  'POST /v1/sandbox/nodes/{node}/crash': { path: { node: 'node-0' } },
  'POST /v1/sandbox/nodes/{node}/cordon': { path: { node: 'node-0' }, body: { cordoned: true } },
  'POST /v1/sandbox/pods': {},
  'POST /v1/sandbox/pods/{pod}/cpu': { path: { pod: 'rethinkdb-0' }, body: { cores: 2 } },
  'POST /v1/sandbox/pods/{pod}/interference': { path: { pod: 'rethinkdb-0' }, body: { cores: 2 } },
  'DELETE /v1/sandbox/pods/{pod}/interference': { path: { pod: 'rethinkdb-0' }, setup: ['POST', '/v1/sandbox/pods/rethinkdb-0/interference', { cores: 2 }] },
  'POST /v1/sandbox/scale': { body: { replicas: 5 } },
};

// The effective request's target and body, after its setup has run (and the state to compare with is taken).
async function prepareEffective(sandbox, key, path) {
  const entry = EFFECTIVE[key];
  if (entry.setup) {
    const [method, setupPath, body] = entry.setup;
    const res = await sandbox.send({ method, path: setupPath, headers: { ...credentialsFor({ security: [{ bearerAuth: [] }] }), 'content-type': 'application/json' }, body: JSON.stringify(body) });
    expect(res.status).toBeLessThan(300);
    await sandbox.rebase();
  }
  const target = path.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name) => entry.path[name]) + (entry.target ?? '');
  return { target, body: JSON.stringify(entry.body ?? {}) };
}

function rawHead(method, target, { te, extra }) {
  const lines = [
    `${method.toUpperCase()} ${target} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', 'Content-Type: application/json', `Transfer-Encoding: ${te}`,
    `Authorization: ${credentialsFor({ security: [{ bearerAuth: [] }] }).authorization}`,
  ];
  if (extra) lines.push(extra);
  return `${lines.join('\r\n')}\r\n`;
}

const MUTATING = OPERATIONS.filter(([, { method }]) => method !== 'get');

describe('malformed transfer encodings at every mutating route', () => {
  test('when the document is read, then every mutating operation has a request known to change something', () => {
    expect(MUTATING.map(([key]) => key).sort()).toEqual(Object.keys(EFFECTIVE).sort());
  });

  test.each(MUTATING)('when %s gets its request with a well-formed chunked body, then it changes something (so the check below can see a change)', async (key, { method, path }) => {
    const sandbox = await startSandbox();
    try {
      const { target, body } = await prepareEffective(sandbox, key, path);
      const status = await sendRaw(sandbox.port, { head: rawHead(method, target, { te: 'chunked' }), framed: `${hex(body)}\r\n${body}\r\n0\r\n\r\n` });
      await sandbox.idle();
      expect(status).toBeLessThan(300);
      const changed = sandbox.calls.length > 0 || JSON.stringify(await sandbox.state()) !== JSON.stringify(sandbox.before);
      expect(changed).toBe(true);
    } finally {
      await sandbox.close();
    }
  });

  test.each(MUTATING)('when %s gets bodies with malformed transfer encodings, then each is refused with a 4xx (or not answered) and nothing changes', async (key, { method, path }) => {
    const sandbox = await startSandbox();
    try {
      const { target, body } = await prepareEffective(sandbox, key, path);
      for (const [defect, framing] of MALFORMED_FRAMINGS) {
        const status = await sendRaw(sandbox.port, { head: rawHead(method, target, framing), framed: framing.framed(body), endAfter: framing.endAfter });
        await sandbox.idle();
        expect({ defect, refused: status === null || (status >= 400 && status < 500) }).toEqual({ defect, refused: true });
        expect({ defect, calls: sandbox.calls }).toEqual({ defect, calls: [] });
        const now = await sandbox.state();
        if (JSON.stringify(now) !== JSON.stringify(sandbox.before)) expect({ defect, now }).toEqual({ defect, now: sandbox.before });
      }
    } finally {
      await sandbox.close();
    }
  });
});
