// Two manager replicas (node src/server.js, as the Deployment runs them) on one real kube-apiserver and one real
// RethinkDB cluster: the Lease elects one; a leader killed with SIGKILL mid-migration is replaced and the migration
// resumed from the pods' annotations; a preStop that arrives while nobody leads is answered within its deadline by
// the replica that takes over; a leader cut off from the API server stops acting before the other one starts.
// Each replica reaches the API server through its own TCP relay, which the test can cut.

import { jest } from '@jest/globals';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CoordinationV1Api, CoreV1Api } from '@kubernetes/client-node';
import r from 'rethinkdb';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import { NAMESPACE, seedRethinkDbCluster, writeRelayToken } from '../helpers/kube-objects.js';
import { startTcpRelay } from '../lab/tcp-relay.js';
import { startManagerProcess, writeKubeconfig } from '../helpers/manager-process.js';
import { freeLoopbackPorts } from '../helpers/processes.js';
import { evictionReview } from '../helpers/harness.js';
import { makeWebhookCertificate } from '../helpers/webhook-tls.js';
import {
  actingOf, eventually, primariesOf, readTables, settled, startRealCluster,
} from '../helpers/real-cluster.js';

jest.setTimeout(240000);

const PLAN = [0, 1, 2, 3].map((i) => ({ pod: `rethinkdb-${i}`, node: `node-${i}`, podIp: `198.18.0.${10 + i}`, hostIp: `198.18.1.${10 + i}` }));
const FAST = { LEADER_ELECTION_LEASE_DURATION_SECONDS: '4', LEADER_ELECTION_RENEW_DEADLINE_SECONDS: '3', LEADER_ELECTION_RETRY_PERIOD_SECONDS: '1' };

let api;
let cluster;
let core;
let dir;
let tls;
let relayEnv;
const replicas = [];
const relays = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'leader-election-'));
  // Both replicas serve the eviction webhook with one certificate, its CA beside it as ca.crt (as in the Secret).
  tls = makeWebhookCertificate();
  [api, cluster] = await Promise.all([startKubeApiServer(), startRealCluster()]);
  core = api.kubeConfig.makeApiClient(CoreV1Api);
  await seedRethinkDbCluster(api.kubeConfig, { plan: PLAN });
  // Both replicas prove themselves to each other with the manager's ServiceAccount token for the relay's audience.
  relayEnv = await writeRelayToken(api.kubeConfig, join(dir, 'relay-token'));
}, 180000);

afterEach(async () => {
  for (const replica of replicas.splice(0)) await replica.kill('SIGKILL');
  for (const relay of relays.splice(0)) await relay.close();
  // The next test starts from a cluster in its first shape and without a Lease.
  await api.kubeConfig.makeApiClient(CoordinationV1Api).deleteNamespacedLease({ name: 'rethinkdb-manager', namespace: NAMESPACE }).catch(() => {});
});

afterAll(async () => {
  await cluster?.destroy();
  await api?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
  tls?.remove();
});

// An AdmissionReview sent to a replica's webhook as the API server sends it (TLS, checked with the CA).
function review(replica, body) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = httpsRequest(`https://127.0.0.1:${replica.webhookPort}/v1/admission/eviction`, {
      method: 'POST', ca: tls.ca, servername: 'localhost', headers: { 'content-type': 'application/json' },
    }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end(payload);
  });
}

// A replica named `name` with its own relay to the API server.
async function startReplica(name, env = {}) {
  const relay = await startTcpRelay({ port: Number(new URL(api.server).port) });
  relays.push(relay);
  const kubeconfig = writeKubeconfig(dir, name, { server: `https://127.0.0.1:${relay.port}`, ca: api.ca, token: api.adminToken });
  const [webhookPort] = await freeLoopbackPorts(1);
  const replica = await startManagerProcess({
    name,
    env: {
      WEBHOOK_TLS_CERT_FILE: tls.certFile, WEBHOOK_TLS_KEY_FILE: tls.keyFile, WEBHOOK_PORT: String(webhookPort), WEBHOOK_TLS_SERVER_NAME: 'localhost',
      RETHINKDB_HOST: cluster.servers.map((s) => `${s.host}:${s.driverPort}`).join(','),
      KUBERNETES_MODE: 'kubeconfig', KUBECONFIG: kubeconfig, KUBERNETES_NAMESPACE: NAMESPACE, AUTH_MODE: 'none',
      MONITOR_ENABLED: 'false', NODE_WATCH_ENABLED: 'false', ACTION_DEADLINE_SECONDS: '30', ...relayEnv, ...env,
    },
  });
  replicas.push(replica);
  return { ...replica, relay, webhookPort };
}

const leaderView = async (replica) => (await replica.json('/v1/leader')).body;

// Makes `server` the primary of a usertable shard it holds a replica of, through the driver, unless it is one already.
async function givePrimary(server) {
  const table = r.db('ycsb').table('usertable');
  const changed = await cluster.withConnection(async (c) => {
    const config = await table.config().run(c);
    if (config.shards.some((s) => s.primary_replica === server)) return false;
    const i = config.shards.findIndex((s) => s.replicas.includes(server));
    if (i < 0) throw new Error(`${server} holds no replica of ycsb.usertable`);
    await table.config().update({ shards: config.shards.map((s, j) => (j === i ? { ...s, primary_replica: server } : s)) }).run(c);
    return true;
  });
  if (changed) await eventually(() => settled(cluster), { timeoutMs: 30000, what: `${server} to act as a primary` });
}
async function electedPair(env = FAST) {
  const a = await startReplica('manager-a', env);
  const b = await startReplica('manager-b', env);
  await eventually(async () => {
    const [va, vb] = await Promise.all([leaderView(a), leaderView(b)]);
    const ready = await Promise.all([a, b].map((replica) => replica.json('/readyz')));
    return va.leader && va.leader === vb.leader && ready.every((x) => x.status === 200);
  }, { timeoutMs: 30000, what: 'one leader both replicas agree on, both ready' });
  const leading = (await leaderView(a)).leading;
  return leading ? { leader: a, follower: b } : { leader: b, follower: a };
}

const annotationsOf = async (pod) => (await core.readNamespacedPod({ name: pod, namespace: NAMESPACE })).metadata.annotations ?? {};
const epochMs = (time) => (typeof time === 'number' ? time : Date.parse(time));
const logTime = (replica, msg) => { const line = replica.logs().find((l) => l.msg === msg); return line ? epochMs(line.time) : null; };
const auditTimes = (replica) => replica.logs().filter((l) => l.audit === true).map((l) => epochMs(l.time));

describe('two manager replicas on one Lease', () => {
  test('when two replicas start, then exactly one leads, both are ready, the follower serves reads itself and relays an action to the leader', async () => {
    const { leader, follower } = await electedPair();
    const [lv, fv] = await Promise.all([leaderView(leader), leaderView(follower)]);
    expect(lv).toMatchObject({ enabled: true, leading: true, leader: lv.identity });
    expect(fv).toMatchObject({ enabled: true, leading: false, leader: lv.identity, leaderAddress: leader.url });
    expect((await follower.json('/readyz')).body).toMatchObject({ status: 'ready', role: 'follower', leader: lv.identity });
    const read = await follower.json('/v1/cluster');
    expect(read.status).toBe(200);
    expect(read.servedBy).toBeNull();
    expect(read.body.leadership).toMatchObject({ leading: false, leader: lv.identity });
    const action = await follower.json('/v1/actions/rebalance-primaries?dryRun=true', { method: 'POST', body: {} });
    expect(action.status).toBe(200);
    expect(action.servedBy).toBe(lv.identity);
    // An eviction review that reaches the follower is passed on to the leader's webhook, which answers it.
    const viaFollower = await review(follower, evictionReview({ pod: 'rethinkdb-2', dryRun: true }));
    expect(viaFollower.status).toBe(200);
    expect(viaFollower.body.response).toMatchObject({ uid: 'uid-rethinkdb-2', allowed: true });
    expect(JSON.stringify(viaFollower.body.response.warnings ?? [])).not.toMatch(/did not act/);
    expect(leader.logs().filter((l) => l.msg === 'eviction review passed on by a follower').map((l) => l.pod)).toEqual(['rethinkdb-2']);
    const lease = await api.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'rethinkdb-manager', namespace: NAMESPACE });
    expect(lease.spec.holderIdentity).toBe(lv.identity);
    expect(lease.metadata.annotations['rethinkdb-manager.io/leader-http']).toBe(leader.url);
  });

  test('when a caller sends the follower an absolute-form or //host request, or forges relay headers at either replica, then nothing leaves for another address and no replica believes them', async () => {
    // An internal service on loopback that must never be reached through a replica.
    const reached = [];
    const internal = createServer((req, res) => { reached.push(req.url); res.end('internal secret'); });
    await new Promise((resolve) => internal.listen(0, '127.0.0.1', resolve));
    const internalHost = `127.0.0.1:${internal.address().port}`;
    try {
      const { leader, follower } = await electedPair();
      const raw = (replica, text) => new Promise((resolve) => {
        const socket = connect(Number(new URL(replica.url).port), '127.0.0.1', () => socket.write(text));
        let answer = '';
        socket.on('data', (c) => { answer += c; });
        socket.on('error', () => resolve(answer));
        socket.on('close', () => resolve(answer));
      });
      const body = '{"pod":"rethinkdb-1"}';
      for (const target of [`http://${internalHost}/latest/meta-data/`, `//${internalHost}/latest/meta-data/`, internalHost]) {
        const answer = await raw(follower, `POST ${target} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
        expect(answer).toMatch(/^HTTP\/1\.1 400 /);
        expect(answer).not.toContain('internal secret');
      }
      expect(reached).toEqual([]);
      // Forged relay headers straight to the leader: its PRESTOP keeps its own deadline (it answered 504 in ~100 ms before).
      const forged = { 'x-rethinkdb-manager-relayed-by': 'forged', 'x-rethinkdb-manager-deadline-ms': '1', 'x-rethinkdb-manager-relay-token': 'not.a.replica' };
      const prestop = await fetch(`${leader.url}/v1/hooks/prestop?pod=rethinkdb-1`, { method: 'POST', headers: forged });
      expect(prestop.status).toBe(200);
      expect(await prestop.json()).toMatchObject({ event: 'PRESTOP', server: 'rethinkdb_1' });
      expect(leader.logs().filter((l) => l.msg === 'relay headers from a caller that is not a manager replica ignored').length).toBeGreaterThan(0);
      // The same at the follower: relayed to the leader as any request (a follower does not answer NOT_LEADER for it).
      const viaFollower = await fetch(`${follower.url}/v1/actions/release-server`, {
        method: 'POST', headers: { ...forged, 'content-type': 'application/json' }, body: JSON.stringify({ server: 'rethinkdb_1' }),
      });
      expect(viaFollower.status).toBe(200);
      expect(viaFollower.headers.get('x-rethinkdb-manager-served-by')).toBe((await leaderView(leader)).identity);
      // The next test finds rethinkdb-1 released on its pod too.
      await eventually(async () => !(await annotationsOf('rethinkdb-1'))['rethinkdb-manager.io/draining'], { timeoutMs: 10000, what: 'the release persisted' });
    } finally {
      internal.close();
    }
  });

  test('when the leader is killed (SIGKILL) mid-migration, then the other replica leads within the lease duration plus one retry period, resumes the migration from the annotations, and the shard map ends as a migration without a crash ends', async () => {
    const { leader, follower } = await electedPair();
    const started = await leader.json('/v1/actions/migrate-replicas-off', { method: 'POST', body: { server: 'rethinkdb_3' } });
    expect(started.status).toBe(202);
    const opPath = `/v1/operations/${started.body.operation.id}`;
    // Mid-migration: the migration record is on the pod and the operation has moved at least one replica, not all.
    const midway = await eventually(async () => {
      const op = (await leader.json(opPath)).body;
      const annotated = Boolean((await annotationsOf('rethinkdb-3'))['rethinkdb-manager.io/migration']);
      return annotated && op.status === 'running' && op.steps.length >= 1 && op;
    }, { timeoutMs: 20000, intervalMs: 20, what: 'the migration under way and persisted' });
    const killedAt = Date.now();
    await leader.kill('SIGKILL');
    const tookOverAt = await eventually(async () => (await leaderView(follower)).leading && Date.now(), { timeoutMs: 30000, intervalMs: 50, what: 'the follower to lead' });
    // Lease 4 s + retry 1 s, and 500 ms for this test's polling and the process's scheduling.
    expect(tookOverAt - killedAt).toBeLessThanOrEqual(4000 + 1000 + 500);
    process.stdout.write(`SIGKILL of the leader (lease 4 s, renew 3 s, retry 1 s): the other led ${tookOverAt - killedAt} ms later\n`);
    const reconciled = await eventually(async () => {
      const c = (await follower.json('/v1/cluster')).body;
      return c.reconciliation?.resumed?.length === 1 && c.reconciliation;
    }, { timeoutMs: 20000, what: 'the new leader to reconcile' });
    expect(reconciled.resumed[0]).toMatchObject({ server: 'rethinkdb_3', action: 'migrate-replicas-off', previousOperation: started.body.operation.id, outcome: 'resumed' });
    const resumed = await eventually(async () => {
      const op = (await follower.json(`/v1/operations/${reconciled.resumed[0].operation}`)).body;
      return op.status !== 'running' && op;
    }, { timeoutMs: 60000, what: 'the resumed migration to finish' });
    // The whole operation on failure: which move did not finish, and why.
    expect({ status: resumed.status, steps: resumed.status === 'succeeded' ? 'ok' : resumed }).toEqual({ status: 'succeeded', steps: 'ok' });
    const t = await eventually(() => settled(cluster), { timeoutMs: 30000, what: 'every shard settled' });
    for (const name of Object.keys(t.config)) {
      for (const shard of t.config[name].shards) {
        expect(shard.replicas).toHaveLength(3);
        expect(shard.replicas).not.toContain('rethinkdb_3');
        expect(shard.nonvoting_replicas).toEqual([]);
      }
      expect(t.status[name].status.all_replicas_ready).toBe(true);
    }
    // The record is cleared by a queued annotation write, which lands a moment after the operation ends.
    const cleared = await eventually(async () => (await annotationsOf('rethinkdb-3'))['rethinkdb-manager.io/migration'] === undefined,
      { timeoutMs: 10000, what: 'the migration record cleared from rethinkdb-3' }).catch(() => false);
    const unsaved = follower.logs().filter((l) => l.msg === 'state not persisted on the pod; kept in memory');
    expect({ cleared, unsaved }).toEqual({ cleared: true, unsaved: [] });
    expect(midway.steps.length).toBeGreaterThanOrEqual(1);
  });

  test('when a preStop arrives at the follower right after the leader is killed (default timings), then it is answered within PRESTOP_DEADLINE_SECONDS with the pod\'s primaries off', async () => {
    // The previous test moved every replica off rethinkdb_3: its pod has nothing to hand over, rethinkdb-1 has.
    const { leader, follower } = await electedPair({});
    const before = await readTables(cluster);
    expect(Object.keys(before.config).flatMap((name) => primariesOf(before, name))).toContain('rethinkdb_1');
    await leader.kill('SIGKILL');
    const sentAt = Date.now();
    const answer = await follower.json('/v1/hooks/prestop?pod=rethinkdb-1', { method: 'POST' });
    const tookMs = Date.now() - sentAt;
    expect(answer.status).toBe(200);
    expect(answer.body).toMatchObject({ server: 'rethinkdb_1', primariesOff: true });
    expect(tookMs).toBeLessThan(20000);
    const t = await readTables(cluster);
    for (const name of Object.keys(t.config)) {
      expect(primariesOf(t, name)).not.toContain('rethinkdb_1');
      expect(actingOf(t, name).flat()).not.toContain('rethinkdb_1');
    }
    // Served by the follower once it led (it relayed to itself after reading the hook's empty body).
    expect((await leaderView(follower)).leading).toBe(true);
    process.stdout.write(`preStop during a leader change (lease 15 s, renew 10 s, retry 2 s): answered in ${tookMs} ms\n`);
  });

  test('when the leader\'s connection to the API server is cut, then it stops acting before the other replica starts: no audit record of one falls inside the other\'s leadership', async () => {
    // Short budgets: a replica cut off from the API server cannot learn who leads next, so what it is sent waits out
    // its budget and is answered 503 NO_LEADER. The node watch is on: it runs only on the replica that leads.
    const { leader, follower } = await electedPair({ ...FAST, ACTION_DEADLINE_SECONDS: '3', PRESTOP_DEADLINE_SECONDS: '3', NODE_WATCH_ENABLED: 'true' });
    const watching = async (replica) => (await leaderView(replica)).parts.includes('node-watch');
    expect({ leader: await watching(leader), follower: await watching(follower) }).toEqual({ leader: true, follower: false });
    // Operator actions sent to each replica every 200 ms: each is served by whoever leads (or refused).
    let sending = true;
    const answers = [];
    const send = async () => {
      while (sending) {
        for (const replica of [leader, follower]) {
          const res = await replica.json('/v1/actions/rebalance-primaries', { method: 'POST', body: {} }).catch((err) => ({ status: 0, err }));
          answers.push({ to: replica.name, at: Date.now(), status: res.status, servedBy: res.servedBy });
        }
        await new Promise((resolve) => { setTimeout(resolve, 200); });
      }
    };
    const sender = send();
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
    const cutAt = Date.now();
    leader.relay.cut();
    await eventually(async () => (await leaderView(follower)).leading, { timeoutMs: 30000, intervalMs: 100, what: 'the other replica to lead' });
    await new Promise((resolve) => { setTimeout(resolve, 2000); });
    sending = false;
    await sender;
    // Cut off, the old leader cannot know where to relay: its readiness takes it out of the Service.
    const ready = await leader.json('/readyz');
    expect({ status: ready.status, error: ready.body.error }).toEqual({ status: 503, error: 'NO_LEADER' });
    // The runner took turns: the node watch stopped with the old leadership and started with the new one.
    expect({ leader: await watching(leader), follower: await watching(follower) }).toEqual({ leader: false, follower: true });
    const stoppedAt = logTime(leader, 'stopped leading: no more writes from this replica');
    const startedAt = logTime(follower, 'became the leader');
    expect(stoppedAt).not.toBeNull();
    expect(startedAt).not.toBeNull();
    // The old leader stopped within its renew deadline (3 s) of the cut plus a retry period; the new one started
    // at least (lease duration - renew deadline) after the old one's last renewal, so after the old one stopped.
    expect(stoppedAt - cutAt).toBeLessThanOrEqual(3000 + 1000);
    expect(startedAt).toBeGreaterThan(stoppedAt);
    const leaderAudits = auditTimes(leader);
    const followerAudits = auditTimes(follower);
    expect(leaderAudits.length).toBeGreaterThan(0);
    expect(followerAudits.length).toBeGreaterThan(0);
    expect(Math.max(...leaderAudits)).toBeLessThan(startedAt);
    expect(Math.min(...followerAudits)).toBeGreaterThan(stoppedAt);
    // Every action answered 200 was served by one of the two; while nobody led, the answer was a 503 at worst.
    expect(answers.filter((a) => ![200, 503].includes(a.status))).toEqual([]);
    process.stdout.write(`API cut: old leader stopped ${stoppedAt - cutAt} ms after the cut, the new one started ${startedAt - stoppedAt} ms after that\n`);
  });

  // Sent around the SIGTERM, a preStop reaches the leader as it begins to shut down: it must be answered by the old
  // leader (it took it) or by the new one (the old one refused it), never lost with a closing connection. Each case
  // stops another pod (the one before left rethinkdb_2 without primaries), first given a primary if the tests before
  // moved them all away.
  test.each([
    ['one preStop just after the SIGTERM', 'after', 2],
    ['eight preStops, one a millisecond from 3 ms before the SIGTERM', 'around', 1],
  ])('when the leader gets SIGTERM (a rolling update), then it gives the Lease up, the other replica leads within a retry period, and %s, sent to the other replica, are answered with the pod\'s primaries off', async (_, order, n) => {
    await givePrimary(`rethinkdb_${n}`);
    const { leader, follower } = await electedPair();
    const before = await readTables(cluster);
    expect(Object.keys(before.config).flatMap((name) => primariesOf(before, name))).toContain(`rethinkdb_${n}`);
    const sendPrestop = () => follower.json(`/v1/hooks/prestop?pod=rethinkdb-${n}`, { method: 'POST' });
    const after = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
    const termAt = Date.now();
    let stopping;
    let answers;
    if (order === 'after') {
      stopping = leader.kill('SIGTERM');
      answers = [await sendPrestop()];
    } else {
      const sending = [0, 1, 2, 3, 4, 5, 6, 7].map((ms) => after(ms).then(sendPrestop));
      await after(3);
      stopping = leader.kill('SIGTERM');
      answers = await Promise.all(sending);
    }
    const answeredMs = Date.now() - termAt;
    // The whole answers on failure: which replica served each, and the error if any.
    expect(answers.map((answer) => ({ status: answer.status, servedBy: answer.servedBy, body: answer.body })))
      .toMatchObject(answers.map(() => ({ status: 200, body: { server: `rethinkdb_${n}`, primariesOff: true } })));
    expect(await stopping).toEqual({ code: 0, signal: null });
    expect(leader.logs().find((l) => l.msg === 'lease given up')).toMatchObject({ released: true });
    // It kept its port open a retry period (1 s) and a second after giving the Lease up.
    expect(leader.logs().find((l) => l.msg.startsWith('still refusing work'))).toMatchObject({ lingerMs: 2000 });
    const released = epochMs(leader.logs().find((l) => l.msg === 'lease given up').time);
    const startedAt = logTime(follower, 'became the leader');
    // Retry period 1 s, and 500 ms for scheduling.
    expect(startedAt - released).toBeLessThanOrEqual(1000 + 500);
    const t = await readTables(cluster);
    for (const name of Object.keys(t.config)) expect(primariesOf(t, name)).not.toContain(`rethinkdb_${n}`);
    process.stdout.write(`SIGTERM of the leader (retry 1 s), preStops ${order} it: Lease given up ${released - termAt} ms after SIGTERM, the other led ${startedAt - released} ms after that; the preStops answered within ${answeredMs} ms, by ${[...new Set(answers.map((answer) => answer.servedBy))].join(', ')}\n`);
  });
});
