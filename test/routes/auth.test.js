// Who may call: no token is a 401, a valid token for the wrong thing is a 403, and neither changes anything.
// Static-token mode runs on the sandbox; TokenReview mode runs the real Kubernetes client against an API server
// that answers with recorded TokenReview verdicts (the real kube-apiserver is in test/kube-real/).

import request from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { ACTION_ROUTES } from '../../src/routes/action-routes.js';
import { DOCUMENTED_ROUTES } from '../../src/routes/openapi.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { recordedKubeRoutes, recordedValidToken, startFakeKubeApi } from '../helpers/fake-kube-api.js';
import { createLogSink, createSandboxHarness, createVirtualClock, primaryMap } from '../helpers/harness.js';

const STATIC_TOKEN = 'static-token-for-tests-0123456789abcdef';
const INITIAL_PRIMARIES = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'];

// Every route that changes something, with a body it would accept.
const MUTATIONS = [
  ['POST', '/v1/hooks/prestop?pod=rethinkdb-1', undefined],
  ['POST', '/v1/hooks/poststart?pod=rethinkdb-1', undefined],
  ['POST', '/v1/hooks/perfwarning', { pod: 'rethinkdb-1', durationSeconds: 60 }],
  ['DELETE', '/v1/hooks/perfwarning?pod=rethinkdb-1', undefined],
  ...ACTION_ROUTES.map((r) => ['POST', `/v1/actions/${r.path}`, { server: 'rethinkdb_1' }]),
  ['POST', '/v1/sandbox/servers/rethinkdb_1/crash', {}],
  ['POST', '/v1/sandbox/servers/rethinkdb_1/restore', undefined],
  ['POST', '/v1/sandbox/nodes/node-1/crash', undefined],
  ['POST', '/v1/sandbox/nodes/node-1/cordon', {}],
  ['POST', '/v1/sandbox/pods', {}],
  ['POST', '/v1/sandbox/pods/rethinkdb-1/cpu', { cores: 1 }],
  ['POST', '/v1/sandbox/pods/rethinkdb-1/interference', { cores: 1 }],
  ['DELETE', '/v1/sandbox/pods/rethinkdb-1/interference', undefined],
  ['POST', '/v1/sandbox/scale', { replicas: 6 }],
];

test('when the app documents a route that is not a GET, then it is in the list of mutations checked here', () => {
  const paths = MUTATIONS.map(([method, path]) => `${method} ${path.split('?')[0]}`);
  for (const route of DOCUMENTED_ROUTES.filter((r) => r.method !== 'get')) {
    const pattern = new RegExp(`^${route.method.toUpperCase()} ${route.path.replace(/:[^/]+/g, '[^/]+')}$`);
    expect([route.path, paths.some((p) => pattern.test(p))]).toEqual([route.path, true]);
  }
});

function send(app, [method, path, body], headers = {}) {
  const req = request(app)[method.toLowerCase()](path).set(headers);
  return body === undefined ? req : req.send(body);
}

// A sandbox manager in static-token mode that counts every write to the data store.
function staticHarness(env = {}) {
  const counter = { writes: 0 };
  const h = createSandboxHarness({
    env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/run/secrets/token', ...env },
    staticToken: STATIC_TOKEN,
    wrapSource: (source) => ({ ...source, updateTableShards: async (...args) => { counter.writes += 1; return source.updateTableShards(...args); } }),
  });
  return { ...h, counter };
}

async function expectNothingChanged(h) {
  expect(h.counter.writes).toBe(0);
  expect(await primaryMap(h.store)).toEqual(INITIAL_PRIMARIES);
  expect(h.audit.list()).toEqual([]);
  expect(h.kube.events()).toEqual([]);
  expect(h.operations.list()).toEqual([]);
  expect((await h.kube.listRethinkDbPods()).length).toBe(4);
  expect((await h.kube.listRethinkDbPods()).every((p) => Object.keys(p.annotations ?? {}).length === 0)).toBe(true);
}

describe('static bearer token', () => {
  test.each(MUTATIONS)('when %s %s comes without a token, then 401 with WWW-Authenticate, and nothing changes', async (...route) => {
    const h = staticHarness();
    const res = await send(h.app, route);
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toBe('Bearer realm="rethinkdb-manager"');
    expect(res.body).toEqual({ error: 'UNAUTHENTICATED', message: 'a bearer token is required (Authorization: Bearer <token>)' });
    await expectNothingChanged(h);
  });

  test.each(MUTATIONS)('when %s %s comes with a wrong token, then 401 invalid_token, and nothing changes', async (...route) => {
    const h = staticHarness();
    const res = await send(h.app, route, { authorization: `Bearer ${STATIC_TOKEN.slice(0, -1)}x` });
    expect(res.status).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/error="invalid_token"/);
    expect(res.body.message).toBe('the bearer token does not match the static token');
    await expectNothingChanged(h);
  });

  test.each([
    ['Basic dXNlcjpwYXNz'],
    [`Token ${STATIC_TOKEN}`],
    [`Bearer ${STATIC_TOKEN} extra`],
    ['Bearer '],
  ])('when the Authorization header is %j, then 401 saying the form it must take', async (header) => {
    const h = staticHarness();
    const res = await send(h.app, MUTATIONS[0], { authorization: header });
    expect(res.status).toBe(401);
    expect(res.body.message).toBe('the Authorization header must be "Bearer <token>"');
    await expectNothingChanged(h);
  });

  test('when the scheme is written in lower case (RFC 7235: case-insensitive), then the token is accepted', async () => {
    const h = staticHarness();
    const res = await send(h.app, ['POST', '/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true', undefined], { authorization: `bearer ${STATIC_TOKEN}` });
    expect(res.status).toBe(200);
  });

  test.each([
    ['not JSON', 'text/plain', 'drain it'],
    ['invalid JSON', 'application/json', '{"server":'],
    ['too large', 'application/json', JSON.stringify({ reason: 'x'.repeat(20000) })],
  ])('when a body is %s and there is no token, then the answer is still 401: who asks comes first', async (name, type, body) => {
    const h = staticHarness();
    const res = await request(h.app).post('/v1/actions/rebalance-primaries').set('content-type', type).send(body);
    expect(res.status).toBe(401);
    await expectNothingChanged(h);
  });

  test('when the static token has characters a bearer token cannot carry, then the manager refuses to start', () => {
    expect(() => createSandboxHarness({ env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/t' }, staticToken: `${'x'.repeat(40)}!` }))
      .toThrow(/letters, digits and/);
  });

  test('when the token is right, then the action runs and the audit names the static token as the actor', async () => {
    const h = staticHarness();
    const res = await send(h.app, ['POST', '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' }], { authorization: `Bearer ${STATIC_TOKEN}` });
    expect(res.status).toBe(200);
    expect(await primaryMap(h.store)).not.toContain('rethinkdb_1');
    expect(h.audit.list()[0]).toMatchObject({ actor: 'static-token', action: 'move-primaries-from-server', outcome: 'completed' });
  });

  test('when the sandbox scales out, then its new pod calls POSTSTART with the token and is accepted', async () => {
    const h = staticHarness();
    const res = await send(h.app, ['POST', '/v1/sandbox/scale', { replicas: 5 }], { authorization: `Bearer ${STATIC_TOKEN}` });
    expect(res.status).toBe(200);
    // The new pod's hook call is an HTTP request of its own; give it a moment of real time.
    for (let i = 0; i < 100 && h.operations.list().length === 0; i += 1) await new Promise((resolve) => { setTimeout(resolve, 10); });
    expect(h.operations.list().map((op) => op.kind)).toContain('poststart');
  });

  test('when reads are open (the default), then /v1/cluster, /v1/events and /v1/operations answer without a token', async () => {
    const h = staticHarness();
    for (const path of ['/v1/cluster', '/v1/events', '/v1/operations', '/v1/monitor']) {
      expect((await request(h.app).get(path)).status).toBe(200);
    }
  });

  test('when AUTH_PROTECT_READS is on, then reads need the token, and the probes stay open', async () => {
    const h = staticHarness({ AUTH_PROTECT_READS: 'true' });
    expect((await request(h.app).get('/v1/cluster')).status).toBe(401);
    expect((await request(h.app).get('/v1/events')).status).toBe(401);
    expect((await request(h.app).get('/v1/cluster').set('authorization', `Bearer ${STATIC_TOKEN}`)).status).toBe(200);
    expect((await request(h.app).get('/livez')).status).toBe(200);
    expect((await request(h.app).get('/readyz')).status).toBe(200);
  });

  test('when the static token is shorter than 32 characters, then the manager refuses to start', () => {
    expect(() => createSandboxHarness({ env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/t' }, staticToken: 'short' }))
      .toThrow(/at least 32 characters/);
  });
});

describe('Kubernetes service-account tokens (TokenReview)', () => {
  let api;
  afterEach(async () => { await api?.close(); api = null; });

  // The recorded valid token belongs to system:serviceaccount:rethinkdb:default, bound to pod rethinkdb-2.
  async function tokenReviewManager(env = {}, routes = recordedKubeRoutes()) {
    api = await startFakeKubeApi(routes);
    const clock = createVirtualClock();
    const config = loadConfig({ RETHINKDB_HOST: 'db', KUBECONFIG: '/unused', AUTH_HOOK_SUBJECTS: 'system:serviceaccount:rethinkdb:default', ...env });
    const kube = createKubeAdapter({ kubeConfig: api.kubeConfig, namespace: 'rethinkdb', clock, requestTimeoutMs: 1000 });
    const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock })), managedTables: [] });
    const m = createManager({ config, store, kube, clock, logger: createLogger({ level: 'info', destination: createLogSink().stream }) });
    // As src/server.js does: the persisted state is loaded before the manager takes work.
    await m.reconcile();
    return { ...m, clock };
  }
  const reviews = () => api.requests.filter((r) => r.path === '/apis/authentication.k8s.io/v1/tokenreviews');
  const writesToApi = () => api.requests.filter((r) => r.method !== 'GET' && !r.path.endsWith('/tokenreviews'));
  const bearer = (token = recordedValidToken()) => ({ authorization: `Bearer ${token}` });

  test('when pod rethinkdb-2 calls PRESTOP for itself, then the token is reviewed for our audience and the hook runs as that pod', async () => {
    const m = await tokenReviewManager();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer());
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ server: 'rethinkdb_2', primariesOff: true });
    expect(reviews()).toHaveLength(1);
    expect(reviews()[0].body.spec).toEqual({ token: recordedValidToken(), audiences: ['rethinkdb-manager'] });
    expect(m.audit.list()[0].actor).toBe('hook:prestop:rethinkdb-2 (system:serviceaccount:rethinkdb:default (pod rethinkdb-2))');
  });

  test.each([
    ['PRESTOP for another pod', ['POST', '/v1/hooks/prestop?pod=rethinkdb-1', undefined], /pod rethinkdb-2 may only act on itself, not on "rethinkdb-1"/],
    ['POSTSTART for another pod', ['POST', '/v1/hooks/poststart?pod=rethinkdb-1', undefined], /may only act on itself/],
    ['a PERFWARNING for its node', ['POST', '/v1/hooks/perfwarning', { node: 'node-1' }], /may not act on a node/],
    ['a PERFWARNING naming itself in the query and another pod in the body', ['POST', '/v1/hooks/perfwarning?pod=rethinkdb-2', { pod: 'rethinkdb-1' }], /may only act on itself/],
    ['an operator action', ['POST', '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' }], /is not an operator/],
  ])('when pod rethinkdb-2 sends %s, then 403 and nothing changes', async (name, route, message) => {
    const m = await tokenReviewManager();
    const res = await send(m.app, route, bearer());
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: 'FORBIDDEN', message: expect.stringMatching(message) });
    expect(await primaryMap(m.store)).toEqual(INITIAL_PRIMARIES);
    expect(writesToApi()).toEqual([]);
    expect(m.audit.list()).toEqual([]);
  });

  test('when the service account is not a hook subject, then its pod-bound token gets 403 even for its own pod', async () => {
    const m = await tokenReviewManager({ AUTH_HOOK_SUBJECTS: 'system:serviceaccount:rethinkdb:rethinkdb' });
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer());
    expect(res.status).toBe(403);
    expect(res.body.message).toMatch(/may not call hooks/);
    expect(await primaryMap(m.store)).toEqual(INITIAL_PRIMARIES);
  });

  test('when the identity is an operator (by group), then it may call actions and hooks for any pod', async () => {
    const m = await tokenReviewManager({ AUTH_OPERATOR_SUBJECTS: 'group:system:serviceaccounts:rethinkdb' });
    const action = await request(m.app).post('/v1/actions/move-primaries-from-server').set(bearer()).send({ server: 'rethinkdb_1' });
    expect(action.status).toBe(200);
    expect(m.audit.list()[0].actor).toBe('system:serviceaccount:rethinkdb:default (pod rethinkdb-2)');
  });

  test('when the token is not even a JWT, then 401 at once, without asking the API server', async () => {
    const m = await tokenReviewManager();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer('not-a-token'));
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/not a service-account token/);
    expect(reviews()).toEqual([]);
  });

  test('when the token is a JWT the API server does not accept, then 401 with its reason, and nothing changes', async () => {
    const m = await tokenReviewManager();
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer('eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl'));
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/the token was not accepted: invalid bearer token/);
    expect(await primaryMap(m.store)).toEqual(INITIAL_PRIMARIES);
    expect(writesToApi()).toEqual([]);
  });

  test('when the same new token arrives several times at once, then it is reviewed once', async () => {
    const m = await tokenReviewManager({ AUTH_PROTECT_READS: 'true' });
    const answers = await Promise.all(Array.from({ length: 5 }, () => request(m.app).get('/v1/cluster').set(bearer())));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(reviews()).toHaveLength(1);
  });

  test('when an operator drained the pod\'s server, then the pod\'s own POSTSTART does not undo it (release-server does)', async () => {
    const m = await tokenReviewManager();
    await m.commands.movePrimariesFromServer({ server: 'rethinkdb_2', reason: 'disk replacement' }, { actor: 'alice' });
    const res = await request(m.app).post('/v1/hooks/poststart?pod=rethinkdb-2').set(bearer());
    expect(res.status).toBe(202);
    for (let i = 0; i < 100 && m.operations.list().some((op) => op.status === 'running'); i += 1) await new Promise((resolve) => { setTimeout(resolve, 10); });
    expect(m.operations.get(res.body.operation.id)).toMatchObject({ status: 'succeeded' });
    expect((await m.marks.list()).map((d) => d.serverName)).toEqual(['rethinkdb_2']);
    expect(await primaryMap(m.store)).not.toContain('rethinkdb_2');
  });

  test('when an operator raised a perf warning on the pod, then the pod cannot withdraw it; one it raised itself it can', async () => {
    const m = await tokenReviewManager();
    await m.events.perfwarning({ pod: 'rethinkdb-2', durationSeconds: 3600 }, { actor: 'alice' });
    const refused = await request(m.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2').set(bearer());
    expect(refused.status).toBe(404);
    expect(refused.body.message).toMatch(/no active perf warning from hook/);
    expect((await m.marks.perfWarnings()).map((w) => w.source)).toEqual(['operator']);
    await m.events.endPerfWarning({ pod: 'rethinkdb-2' }, { actor: 'alice' });
    const raised = await request(m.app).post('/v1/hooks/perfwarning').set(bearer()).send({ pod: 'rethinkdb-2', durationSeconds: 60 });
    expect(raised.status).toBe(200);
    expect(raised.body.source).toBe('hook');
    const withdrawn = await request(m.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2').set(bearer());
    expect(withdrawn.status).toBe(200);
  });

  test('when the manager expects another audience, then the valid token is refused with 401 naming it', async () => {
    const m = await tokenReviewManager({ AUTH_AUDIENCE: 'something-else' });
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer());
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/token audiences \["rethinkdb-manager"\] is invalid for the target audiences \["something-else"\]/);
    expect(reviews()[0].body.spec.audiences).toEqual(['something-else']);
  });

  test('when the same token comes again within AUTH_CACHE_SECONDS, then it is not reviewed again; after, it is', async () => {
    const m = await tokenReviewManager({ AUTH_PROTECT_READS: 'true' });
    await request(m.app).get('/v1/cluster').set(bearer()).expect(200);
    await request(m.app).get('/v1/cluster').set(bearer()).expect(200);
    expect(reviews()).toHaveLength(1);
    await m.clock.advance(10_001);
    await request(m.app).get('/v1/cluster').set(bearer()).expect(200);
    expect(reviews()).toHaveLength(2);
  });

  test('when the TokenReview API fails, then 503 KUBERNETES_UNAVAILABLE and nothing changes', async () => {
    const routes = [{ method: 'POST', path: '/apis/authentication.k8s.io/v1/tokenreviews', answer: { status: 500, body: { kind: 'Status', apiVersion: 'v1', status: 'Failure', message: 'etcd is down', code: 500 } } }, ...recordedKubeRoutes()];
    const m = await tokenReviewManager({}, routes);
    const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-2').set(bearer());
    expect(res.status).toBe(503);
    expect(res.body).toMatchObject({ error: 'KUBERNETES_UNAVAILABLE', message: expect.stringMatching(/cannot verify the bearer token/) });
    expect(await primaryMap(m.store)).toEqual(INITIAL_PRIMARIES);
    expect(writesToApi()).toEqual([]);
  });
});
