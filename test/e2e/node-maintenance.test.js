// Node maintenance on the sandbox, through the routes: a cordon (the sandbox's admin endpoint, as kubectl cordon)
// drains the node's server through the node watch and its uncordon gives the primaries back; the eviction
// webhook's AdmissionReview handling (allowed after the demotion, refused with 429 and the reason, dry runs,
// other pods and namespaces, malformed reviews and bodies, a manager that takes no work).

import request from 'supertest';
import { fromBodyParserError } from '../../src/errors.js';
import { createWorkTracker } from '../../src/lib/work-tracker.js';
import { createLogger } from '../../src/logger.js';
import { createWebhookApp } from '../../src/routes/webhook-routes.js';
import {
  createSandboxHarness, evictionReview, eventually, postJson, postReview, primaryShardsOf,
} from '../helpers/harness.js';

const json = (req, body) => req.set('content-type', 'application/json').send(JSON.stringify(body));
const post = (h, body) => postReview(h.webhookApp, body);
const primariesOn = async (h, name) => (await primaryShardsOf(h.store, name)).length;
const until = (check, what) => eventually(check, { timeoutMs: 2000, intervalMs: 5, what });
// An eviction review of rethinkdb-0 with some request fields changed (undefined: left out, as JSON.stringify does).
const reviewWith = (changes) => {
  const review = evictionReview({ pod: 'rethinkdb-0' });
  return { ...review, request: { ...review.request, ...changes } };
};

describe('node signals on the sandbox', () => {
  test('when node-1 is cordoned through the sandbox, then rethinkdb_1 is drained for the node; uncordoned, it gets primaries back', async () => {
    const h = createSandboxHarness();
    const watch = h.watchNodes();
    expect(await primariesOn(h, 'rethinkdb_1')).toBeGreaterThan(0);
    expect((await json(request(h.app).post('/v1/sandbox/nodes/node-1/cordon'), {})).status).toBe(200);
    await until(() => h.audit.list().some((r) => r.action === 'drain-node'), 'the drain-node record');
    expect(await primariesOn(h, 'rethinkdb_1')).toBe(0);
    expect(h.maintenance.view()).toEqual([{ node: 'node-1', signal: expect.objectContaining({ kind: 'cordon' }) }]);
    expect((await request(h.app).get('/v1/cluster')).body.nodeMaintenance).toEqual(h.maintenance.view());
    expect(h.kube.events().map((e) => `${e.pod} ${e.reason}`)).toContain('rethinkdb-1 DrainNode');

    await json(request(h.app).post('/v1/sandbox/nodes/node-1/cordon'), { cordoned: false });
    await until(() => h.audit.list().some((r) => r.action === 'end-node-drain'), 'the end-node-drain record');
    expect(await primariesOn(h, 'rethinkdb_1')).toBeGreaterThan(0);
    expect(await h.marks.list()).toEqual([]);
    expect(h.maintenance.view()).toEqual([]);
    await watch.stop();
  });

  test('when a node drain fails (RethinkDB unreachable), then it is audited and retried by the tick until it succeeds', async () => {
    let down = true;
    const h = createSandboxHarness({
      wrapSource: (source) => ({ ...source, readSystemTables: (...args) => (down ? Promise.reject(new Error('connection refused')) : source.readSystemTables(...args)) }),
    });
    const watch = h.watchNodes();
    h.kube.setNodeUnschedulable('node-2', true);
    await until(() => h.audit.list().some((r) => r.action === 'node-signal' && r.outcome === 'failed'), 'the failure record');
    down = false;
    h.clock.advance(60000);
    const { nodes } = await h.tick({ poll: false });
    expect(nodes).toEqual([expect.objectContaining({ node: 'node-2', action: 'drain-node', outcome: 'completed' })]);
    expect(await primariesOn(h, 'rethinkdb_2')).toBe(0);
    await watch.stop();
  });
});

describe('the eviction webhook on the sandbox', () => {
  test('when rethinkdb-2 is evicted, then allowed once its primaries are off; rethinkdb-3 next is refused (429) and keeps its primaries', async () => {
    const h = createSandboxHarness();
    const allowed = await post(h, evictionReview({ pod: 'rethinkdb-2', user: 'system:serviceaccount:kube-system:cluster-autoscaler' }));
    expect(allowed.status).toBe(200);
    expect(allowed.body).toEqual({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid: 'uid-rethinkdb-2', allowed: true } });
    expect(await primariesOn(h, 'rethinkdb_2')).toBe(0);
    expect(h.audit.list()[0]).toMatchObject({ action: 'eviction-review', outcome: 'allowed', actor: 'hook:eviction:rethinkdb-2 (system:serviceaccount:kube-system:cluster-autoscaler)' });

    const before = await primariesOn(h, 'rethinkdb_3');
    const refused = await post(h, evictionReview({ pod: 'rethinkdb-3' }));
    expect(refused.body.response).toEqual({
      uid: 'uid-rethinkdb-3', allowed: false,
      status: { code: 429, reason: 'TooManyRequests', message: expect.stringMatching(/^rethinkdb-k8s-manager: evicting pod rethinkdb-3 now is not safe, retry later: ycsb\.usertable\[1\] would lose its majority/) },
    });
    expect(await primariesOn(h, 'rethinkdb_3')).toBe(before);
    expect((await h.marks.list()).map((d) => d.serverName)).toEqual(['rethinkdb_2']);
  });

  test('when an admitted eviction\'s server is released again (its pod back), then it no longer counts as leaving', async () => {
    const h = createSandboxHarness();
    expect((await post(h, evictionReview({ pod: 'rethinkdb-2' }))).body.response.allowed).toBe(true);
    expect((await post(h, evictionReview({ pod: 'rethinkdb-3' }))).body.response.allowed).toBe(false);
    expect((await postJson(h.app, '/v1/actions/release-server', { server: 'rethinkdb_2' })).status).toBe(200);
    expect((await post(h, evictionReview({ pod: 'rethinkdb-3' }))).body.response.allowed).toBe(true);
  });

  test('when the manager has not loaded its persisted state yet, then the eviction goes ahead with a warning that says why', async () => {
    const first = createSandboxHarness();
    const h = createSandboxHarness({ existing: { model: first.model, kube: first.kube } });
    expect(h.work.started()).toBe(false);
    const res = await post(h, evictionReview({ pod: 'rethinkdb-0' }));
    expect(res.body.response).toMatchObject({ allowed: true, warnings: [expect.stringMatching(/^rethinkdb-k8s-manager did not act: .*; the eviction goes ahead without demoting primaries first$/)] });
  });

  test('when the eviction is a dry run, then it is answered and nothing changes', async () => {
    const h = createSandboxHarness();
    const res = await post(h, evictionReview({ pod: 'rethinkdb-0', dryRun: true }));
    expect(res.body.response).toMatchObject({ allowed: true });
    expect(await primariesOn(h, 'rethinkdb_0')).toBeGreaterThan(0);
    expect(await h.marks.list()).toEqual([]);
  });

  test.each([
    ['a pod that is not a RethinkDB pod', evictionReview({ pod: 'client-7' })],
    ['a pod of another namespace', evictionReview({ pod: 'rethinkdb-0', namespace: 'default' })],
    ['another subresource', evictionReview({ pod: 'rethinkdb-0', subResource: 'status' })],
  ])('when the review is for %s, then it is allowed and nothing changes', async (_, body) => {
    const h = createSandboxHarness();
    const res = await post(h, body);
    expect(res.body.response).toMatchObject({ uid: body.request.uid, allowed: true });
    expect(await h.marks.list()).toEqual([]);
  });

  test.each([
    ['no request', { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }],
    ['not an AdmissionReview', { kind: 'Pod', request: { uid: 'x' } }],
  ])('when the body has %s, then 400', async (_, body) => {
    const res = await post(createSandboxHarness(), body);
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('BAD_REQUEST');
  });

  // The API server sends dryRun as a boolean or not at all: a string "true" read as "not a dry run" would drain the
  // server for an eviction that was only a question.
  test.each([
    ['dryRun is the string "true"', { dryRun: 'true' }, 'request.dryRun must be true or false (a JSON boolean) or absent, got the string "true"'],
    ['dryRun is a number', { dryRun: 1 }, 'request.dryRun must be true or false (a JSON boolean) or absent, got the number 1'],
    ['dryRun is null', { dryRun: null }, 'request.dryRun must be true or false (a JSON boolean) or absent, got null'],
    ['uid is a number', { uid: 7 }, 'request.uid must be a non-empty string, got the number 7'],
    ['uid is empty', { uid: '' }, 'request.uid must be a non-empty string, got the string ""'],
    ['operation is not one the API server sends', { operation: 'create' }, 'request.operation must be one of CREATE, UPDATE, DELETE, CONNECT, got the string "create"'],
    ['resource is missing', { resource: undefined }, 'request.resource must be an object with a string resource, got none'],
    ['subResource is not a string', { subResource: ['eviction'] }, 'request.subResource must be a string or absent, got an array'],
    ['name is a number', { name: 0 }, 'request.name must be a string or absent, got the number 0'],
    ['namespace is an object', { namespace: { name: 'rethinkdb' } }, 'request.namespace must be a string or absent, got an object'],
    ['the user name is not a string', { userInfo: { username: ['admin'] } }, 'request.userInfo.username must be a string or absent, got an array'],
    ['no pod name anywhere', { name: undefined, object: { metadata: { namespace: 'rethinkdb' } } }, 'an eviction review must name the pod (request.name or request.object.metadata.name)'],
    ['the Eviction\'s name is not a string', { name: undefined, object: { metadata: { name: 1, namespace: 'rethinkdb' } } }, 'request.object.metadata.name must be a string or absent, got the number 1'],
  ])('when %s, then 400 BAD_REQUEST says which field and what it accepts, and nothing is done', async (_, changes, problem) => {
    const h = createSandboxHarness();
    const before = await primariesOn(h, 'rethinkdb_0');
    const res = await post(h, reviewWith(changes));
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'BAD_REQUEST', message: expect.stringContaining(problem) });
    expect(res.body.message).toMatch(/^malformed AdmissionReview, nothing was done: /);
    expect(await primariesOn(h, 'rethinkdb_0')).toBe(before);
    expect(await h.marks.list()).toEqual([]);
    expect(h.audit.list()).toEqual([]);
  });

  test('when several fields are malformed, then the answer names each', async () => {
    const res = await post(createSandboxHarness(), reviewWith({ dryRun: 'false', name: 3 }));
    expect(res.status).toBe(400);
    expect(res.body.message).toContain('request.dryRun must be true or false (a JSON boolean) or absent, got the string "false"; request.name must be a string or absent, got the number 3');
  });

  test('when a follower gets a malformed review, then it refuses it itself and passes nothing on to the leader', async () => {
    const relayed = [];
    const follower = createWebhookApp({
      maintenance: { reviewEviction: () => { throw new Error('a follower must not review an eviction itself'); } },
      work: createWorkTracker({ started: true }), logger: createLogger({ level: 'silent' }),
      relayReview: async (review) => { relayed.push(review); return { response: { allowed: true } }; },
    });
    const res = await postReview(follower, reviewWith({ dryRun: 'true' }));
    expect(res.status).toBe(400);
    expect(res.body.error).toBe('BAD_REQUEST');
    expect(relayed).toEqual([]);
  });

  test.each([
    ['without a relay token', {}, 'relayed'],
    ['with a token that is not a replica\'s', { 'x-rethinkdb-manager-relay-token': 'someone.elses.token' }, 'relayed'],
    ['with a peer replica\'s relay token', { 'x-rethinkdb-manager-relay-token': 'peer.relay.token' }, 'reviewed here'],
  ])('when a review claiming to be passed on by a follower arrives %s, then it is %s', async (_, headers, expected) => {
    const seen = [];
    const webhook = createWebhookApp({
      maintenance: { reviewEviction: async () => { seen.push('reviewed here'); return { allowed: true }; } },
      work: createWorkTracker({ started: true }), logger: createLogger({ level: 'silent' }),
      relayReview: async () => { seen.push('relayed'); return { response: { allowed: true } }; },
      credentials: { verify: async (token) => (token === 'peer.relay.token' ? { ok: true, username: 'manager' } : { ok: false, reason: 'not a replica' }) },
    });
    const res = await request(webhook).post('/v1/admission/eviction').set('content-type', 'application/json')
      .set({ 'x-rethinkdb-manager-relayed-by': 'forged', ...headers }).send(JSON.stringify(evictionReview({ pod: 'rethinkdb-0' })));
    expect(res.status).toBe(200);
    expect(seen).toEqual([expected]);
  });

  // What express's body parser refuses is the caller's mistake, with the code of src/errors.js that says which.
  test.each([
    ['a body over 1 MiB', 413, 'PAYLOAD_TOO_LARGE', 'request body exceeds 1048576 bytes (1024 KiB)',
      (r) => r.set('content-type', 'application/json').send(JSON.stringify({ ...evictionReview({ pod: 'rethinkdb-0' }), pad: 'x'.repeat(1100 * 1024) }))],
    ['a body that is not JSON', 400, 'BAD_REQUEST', 'request body is not valid JSON', (r) => r.set('content-type', 'application/json').send('{"kind": "AdmissionReview", ')],
    ['a charset other than UTF-8', 415, 'UNSUPPORTED_MEDIA_TYPE', 'send the JSON body in UTF-8', (r) => r.set('content-type', 'application/json; charset=latin1').send('{}')],
    ['a content coding it cannot undo', 415, 'UNSUPPORTED_MEDIA_TYPE', 'send the body without Content-Encoding, or with gzip, deflate or br',
      (r) => r.set('content-type', 'application/json').set('content-encoding', 'compress').send('{}')],
  ])('when the webhook gets %s, then %i %s says so, and nothing is done', async (_, status, code, message, send) => {
    const h = createSandboxHarness();
    const res = await send(request(h.webhookApp).post('/v1/admission/eviction'));
    expect(res.status).toBe(status);
    expect(res.body).toEqual({ error: code, message: expect.stringContaining(message) });
    expect(await h.marks.list()).toEqual([]);
  });

  test('when the webhook is asked for another path, then 404 NOT_FOUND names the one it serves', async () => {
    const res = await request(createSandboxHarness().webhookApp).post('/v1/admission/pods').send({});
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'NOT_FOUND', message: 'no webhook at POST /v1/admission/pods; the eviction webhook is POST /v1/admission/eviction' });
  });

  test('when the webhook itself fails, then 500 INTERNAL with a generic message; the error\'s own message goes to the log only, with the request\'s id', async () => {
    const logged = [];
    const logWith = (bindings) => ({
      info: () => {}, debug: () => {}, error: (entry, msg) => logged.push({ ...bindings, ...entry, msg }),
      warn: () => { throw new Error('log sink /var/run/manager/log.sock is gone'); },
      child: (more) => logWith({ ...bindings, ...more }),
    });
    const app = createWebhookApp({
      maintenance: { reviewEviction: async () => { throw new Error('the manager is starting'); } },
      work: createWorkTracker({ started: true }), logger: logWith({}),
    });
    const res = await postReview(app, evictionReview({ pod: 'rethinkdb-0' }));
    expect(res.status).toBe(500);
    expect(res.body).toEqual({ error: 'INTERNAL', message: 'internal error' });
    expect(logged).toEqual([expect.objectContaining({ code: 'INTERNAL', status: 500, cause: 'log sink /var/run/manager/log.sock is gone', msg: 'webhook request failed' })]);
    expect(logged[0].reqId).toBe(1);
  });

  test.each([
    ['an error of its own (a 500 of body-parser)', Object.assign(new Error('stream encoding should not be set at /srv/app'), { status: 500, expose: false, type: 'stream.encoding.set' })],
    ['any other error', new TypeError("Cannot read properties of undefined (reading 'secret')")],
  ])('when the webhook fails with %s, then INTERNAL with a generic message, never the error\'s own', (_, err) => {
    const appErr = fromBodyParserError(err, { bodyLimitBytes: 1024 * 1024 });
    expect(appErr).toMatchObject({ code: 'INTERNAL', statusCode: 500, message: 'internal error', cause: err });
  });

  // A follower replica (src/manager.js decides with relayRoute): its review goes to the leader's webhook.
  describe('a follower passing the review on to the leader', () => {
    const follower = (relayReview) => createWebhookApp({
      maintenance: { reviewEviction: () => { throw new Error('a follower must not review an eviction itself'); } },
      work: createWorkTracker({ started: false }), logger: createLogger({ level: 'silent' }), relayReview,
    });

    test('when the leader answers, then that answer is given, under the API server\'s uid', async () => {
      const res = await postReview(follower(async () => ({ response: { uid: 'leader-side', allowed: false, status: { code: 429, reason: 'TooManyRequests', message: 'not safe' } } })), evictionReview({ pod: 'rethinkdb-0' }));
      expect(res.body.response).toEqual({ uid: 'uid-rethinkdb-0', allowed: false, status: { code: 429, reason: 'TooManyRequests', message: 'not safe' } });
    });

    test.each([
      ['cannot reach the leader', async () => { throw new Error('connect ECONNREFUSED 198.18.0.5:8443'); }, 'connect ECONNREFUSED 198.18.0.5:8443'],
      ['gets an answer without a response from it', async () => ({ apiVersion: 'admission.k8s.io/v1' }), "the leader's webhook answered without a response"],
    ])('when the follower %s, then the eviction goes ahead with a warning that says why, and the follower does not review it itself', async (_, relayReview, why) => {
      const res = await postReview(follower(relayReview), evictionReview({ pod: 'rethinkdb-0' }));
      expect(res.body.response).toEqual({
        uid: 'uid-rethinkdb-0', allowed: true, warnings: [`rethinkdb-k8s-manager did not act: ${why}; the eviction goes ahead without demoting primaries first`],
      });
    });
  });

  test('when the manager is shutting down, then the eviction goes ahead (as with the manager down) with a warning that says why', async () => {
    const h = createSandboxHarness();
    h.work.beginShutdown();
    const res = await post(h, evictionReview({ pod: 'rethinkdb-0' }));
    expect(res.body.response).toEqual({
      uid: 'uid-rethinkdb-0', allowed: true,
      warnings: ['rethinkdb-k8s-manager did not act: the manager is shutting down and takes no new work; the eviction goes ahead without demoting primaries first'],
    });
  });

  test('when a table has one replica on the evicted server, then the eviction is allowed once the other shards moved, with a warning naming it', async () => {
    const h = createSandboxHarness();
    h.model.addTable({ db: 'app', name: 'single', docCount: 10, shards: [{ primary: 'rethinkdb_1', replicas: ['rethinkdb_1'] }] });
    const res = await post(h, evictionReview({ pod: 'rethinkdb-1' }));
    expect(res.body.response).toMatchObject({ allowed: true, warnings: ['app.single[0] has 1 voting replica(s): it has no majority while rethinkdb_1 is away'] });
    const cluster = await h.store.readCluster();
    const id = cluster.servers.find((s) => s.name === 'rethinkdb_1').id;
    expect(cluster.tables.find((t) => t.name === 'usertable').shards.filter((s) => s.primary === id)).toEqual([]);
  });

  test('when an eviction was admitted but the pod was never evicted (a PDB refused it after the webhook), then the tick releases it after the hold', async () => {
    const h = createSandboxHarness({ env: { WEBHOOK_EVICTION_HOLD_SECONDS: '60' } });
    expect((await post(h, evictionReview({ pod: 'rethinkdb-2' }))).body.response.allowed).toBe(true);
    expect((await h.marks.list()).map((d) => d.origin.kind)).toEqual(['eviction']);
    expect((await h.tick({ poll: false })).holds).toEqual([]);
    h.clock.advance(61000);
    const { holds } = await h.tick({ poll: false });
    expect(holds).toEqual([{ pod: 'rethinkdb-2', server: 'rethinkdb_2', outcome: 'completed' }]);
    expect(await h.marks.list()).toEqual([]);
    expect(await primariesOn(h, 'rethinkdb_2')).toBeGreaterThan(0);
    expect(h.audit.list()[0]).toMatchObject({ action: 'eviction-hold-expired', pod: 'rethinkdb-2' });
  });

  test('when two evictions arrive together for servers that share shards, then one is admitted and the other refused', async () => {
    const h = createSandboxHarness();
    const [a, b] = await Promise.all([post(h, evictionReview({ pod: 'rethinkdb-2' })), post(h, evictionReview({ pod: 'rethinkdb-3' }))]);
    expect([a.body.response.allowed, b.body.response.allowed].sort()).toEqual([false, true]);
  });
});
