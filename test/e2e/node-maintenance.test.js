// Node maintenance on the sandbox, through the routes: a cordon (the sandbox's admin endpoint, as kubectl cordon)
// drains the node's server through the node watch and its uncordon gives the primaries back; the eviction
// webhook's AdmissionReview handling (allowed after the demotion, refused with 429 and the reason, dry runs,
// other pods and namespaces, malformed reviews, a manager that takes no work).

import request from 'supertest';
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
      ['cannot reach the leader', async () => { throw new Error('connect ECONNREFUSED 10.0.0.5:8443'); }, 'connect ECONNREFUSED 10.0.0.5:8443'],
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
