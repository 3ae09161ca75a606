// A corpus of malformed requests fired at every operation in /openapi.json (property-based, fast-check):
// wrong types, unknown fields and query parameters, missing fields, bad path parameters, oversized bodies,
// bodies that are not JSON, not application/json or falsely compressed, deep nesting, huge strings, prototype keys.
// Every answer must be the documented 4xx with the error body, the server must stay up, and nothing may change:
// no write reaches RethinkDB, no Kubernetes call changes anything, no operation or audit record appears.

import { once } from 'node:events';
import http from 'node:http';
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

// The one place requests get credentials: the operations with `security` (hooks, actions, sandbox controls)
// carry the static token the sandbox manager is configured with, so the corpus checks validation, not the 401
// (test/routes/auth.test.js covers refused callers).
const BEARER_TOKEN = 'corpus-static-token-0123456789abcdefghij';
function credentialsFor(operation) {
  return operation.security && BEARER_TOKEN ? { authorization: `Bearer ${BEARER_TOKEN}` } : {};
}

// Every call that changes the sandbox: on the RethinkDB source, the cluster model and the Kubernetes side.
const WRITES = {
  source: ['updateTableShards'],
  model: ['updateTableShards', 'addServer', 'addTable', 'crashServer', 'restoreServer'],
  kube: ['annotatePod', 'createPodEvent', 'patchStatefulSetScale', 'setPodCpu', 'setInterference', 'crashNode', 'startReplacementPod', 'stopPod'],
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
    before: await sandboxState(h),
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
