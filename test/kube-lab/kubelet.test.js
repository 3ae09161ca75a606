// End-to-end on a real Kubernetes cluster (lab/kube/lab.sh: kubelets, containerd, kube-proxy, CoreDNS,
// metrics-server), with the shipped chart installed by helm from images built locally. Kubernetes itself runs the
// hooks, probes, evictions and drains here; every assertion about RethinkDB is made through the official driver,
// straight to the server pods, never through the manager.
// The lab is brought up once for the file (minutes the first time; lab.sh is idempotent) and taken down at the end,
// with a check that nothing of it is left on the machine.

import { jest } from '@jest/globals';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  REPO, adminPassword, applyObject, clientLines, connectPod, connectReadyPod, createKubectl, labDown, labLeftovers, labNode, labUp, nodeOf,
  noisyPod, podReady,
  r, startClientPod, stopClientPod, until,
} from '../../lab/kube/kube-lab.js';
import { watchRollout } from '../../lab/kube/rollout-watch.js';
import {
  managerApi, monitorDecisions, scaleIn, squeezeCpu, unsqueezeCpu,
} from '../../lab/kube/scale-out.js';

// Longer than any test's own waits (a drain may take 10 minutes on a loaded 2-core machine), so that a slow run
// fails on its own message and still runs its clean-up.
jest.setTimeout(30 * 60 * 1000);

const DB = 'lab';
const run = promisify(execFile);
let kubectl;
let password;

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

const pods = async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items;

// The manager replicas' JSON log lines since an ISO time (both replicas: the leader may change).
async function managerLog(since) {
  const logs = await kubectl.ns('logs', '-l', 'app=rethinkdb-manager', '--tail=-1', '--prefix', `--since-time=${since}`);
  return logs.split('\n').filter((l) => l.includes('{"level"')).map((l) => JSON.parse(l.slice(l.indexOf('{"level"'))));
}
const pod = async (name) => kubectl.nsJson('get', 'pod', name);

// A connection to a Ready RethinkDB pod other than `avoid`. A pod's readiness gate is False while any replica it holds
// catches up, and a handover has the new primary's secondaries catch up for a moment: just after a levelling, every
// pod may be not Ready at once (seen in CI after the drain test), so this waits for one.
const observer = (avoid) => until(`a Ready RethinkDB pod other than ${avoid}`, () => connectReadyPod(kubectl, password, { avoid }), { timeoutMs: 120000, intervalMs: 1000 });

// Every test starts with every RethinkDB pod of the StatefulSet Ready, whatever the one before it left (a levelling
// still handing primaries over, or a test that failed half-way).
const allPodsReady = () => until('every RethinkDB pod Ready', async () => {
  const list = await pods();
  return list.length === 3 && list.every(podReady);
}, { timeoutMs: 300000, intervalMs: 1000 });

async function primariesByServer(conn, table) {
  const config = await r.db(DB).table(table).config().run(conn);
  return config.shards.map((s) => s.primary_replica);
}

// The layout a test starts from: the server is the primary of the table's first shard if it holds none of its
// primaries (an earlier test's levelling may have left it so; every table here has a replica on every server).
async function givePrimary(conn, table, server) {
  const config = await r.db(DB).table(table).config().run(conn);
  if (!config.shards.some((sh) => sh.primary_replica === server)) {
    const shards = config.shards.map((sh, i) => (i === 0 ? { ...sh, primary_replica: server } : sh));
    await r.db(DB).table(table).config().update({ shards }).run(conn);
    await r.db(DB).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
  }
  expect(await primariesByServer(conn, table)).toContain(server);
}

// The manager levels primaries over the cluster, not table by table (the fewest handovers): a server given its share
// back may get it in any table.
const primariesOfAnyTable = async (conn) => (await r.db('rethinkdb').table('table_config').coerceTo('array').run(conn))
  .flatMap((t) => t.shards.map((sh) => sh.primary_replica));

const connectedServers = async (conn) => (await r.db('rethinkdb').table('server_status').pluck('name').coerceTo('array').run(conn))
  .map((s) => s.name);

async function ensureTable(conn, table, { shards = 3 } = {}) {
  const dbs = await r.dbList().run(conn);
  if (!dbs.includes(DB)) await r.dbCreate(DB).run(conn);
  const tables = await r.db(DB).tableList().run(conn);
  if (!tables.includes(table)) await r.db(DB).tableCreate(table, { shards, replicas: 3 }).run(conn);
  await r.db(DB).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
  await r.db(DB).table(table).rebalance().run(conn).catch(() => {});
  await r.db(DB).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
}

beforeAll(() => {
  const kubeconfig = labUp({ log: (line) => process.stderr.write(`${line}\n`) });
  kubectl = createKubectl(kubeconfig);
}, 40 * 60 * 1000);

beforeAll(async () => { password = await adminPassword(kubectl); });

beforeEach(() => allPodsReady());

afterAll(() => {
  if (process.env.LAB_KEEP === '1') return;
  labDown();
  expect(labLeftovers()).toBe('');
}, 5 * 60 * 1000);

test('the chart is installed by helm and everything it made is Ready on real kubelets', async () => {
  const nodes = (await kubectl.json('get', 'nodes')).items;
  expect(nodes.length).toBeGreaterThanOrEqual(4);
  const chart = new Set(['rethinkdb', 'rethinkdb-manager', 'rethinkdb-proxy']);
  for (const d of ['rethinkdb-proxy', 'rethinkdb-manager']) await kubectl.ns('rollout', 'status', `deployment/${d}`, '--timeout=180s');
  // Pods being deleted are not counted: a lab left up with another release's values rolls the proxies at this
  // install, and the old ones take their drain to go.
  const all = (await kubectl.nsJson('get', 'pods')).items.filter((p) => chart.has(p.metadata.labels?.app) && !p.metadata.deletionTimestamp);
  const names = all.map((p) => p.metadata.name);
  expect(names.filter((n) => /^rethinkdb-\d$/.test(n))).toHaveLength(3);
  expect(names.filter((n) => n.startsWith('rethinkdb-manager-'))).toHaveLength(2);
  expect(names.filter((n) => n.startsWith('rethinkdb-proxy-'))).toHaveLength(2);
  for (const p of all) expect({ pod: p.metadata.name, ready: podReady(p) }).toEqual({ pod: p.metadata.name, ready: true });
  // One RethinkDB pod per node (the chart's required anti-affinity), each server joined into one cluster.
  const servers = (await pods()).map((p) => p.spec.nodeName);
  expect(new Set(servers).size).toBe(3);
  const conn = await connectPod(kubectl, 'rethinkdb-0', password);
  try {
    expect((await connectedServers(conn)).sort()).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2']);
  } finally { await conn.close(); }
  // The release was made by helm install (its ownership label), not applied.
  const sts = await kubectl.nsJson('get', 'statefulset', 'rethinkdb');
  expect(sts.metadata.labels['app.kubernetes.io/managed-by']).toBe('Helm');
});

// Deletes a RethinkDB pod and follows it through Kubernetes and the manager, checking through the driver: its
// primaries left it before it left the cluster (the kubelet's preStop, through the manager), the new pod was never
// Ready while its driver port refused connections (the probes), the returned server holds a primary again
// (postStart), and no preStop hook failed. `before` runs just before the deletion (a leader change, in one test;
// then the manager pod that served a hook may be gone with its log, so `hookLogs: false`).
async function podStopsAndReturns(victim, table, { before = async () => {}, hookLogs = true } = {}) {
  const server = victim.replace('-', '_');
  let conn = await observer(victim);
  await ensureTable(conn, table);
  await givePrimary(conn, table, server);

  // Watch from another server: when the victim's primaries left it, and when it left the cluster.
  // Rounds, not times: the primaries must be seen gone in a round before the one that sees the server gone.
  const seen = { primariesMovedRound: null, disconnectedRound: null, readyWithoutServer: [] };
  let watching = true;
  let round = 0;
  const watch = (async () => {
    while (watching) {
      round += 1;
      try {
        const primaries = await primariesByServer(conn, table);
        const connected = await connectedServers(conn);
        if (seen.primariesMovedRound === null && !primaries.includes(server)) seen.primariesMovedRound = round;
        if (seen.disconnectedRound === null && !connected.includes(server)) seen.disconnectedRound = round;
      } catch {
        const old = conn;
        conn = await observer(victim).catch(() => old);
        if (conn !== old) old.close().catch(() => {});
      }
      await sleep(100);
    }
  })();
  const since = new Date().toISOString();
  try {
    const uidBefore = (await pod(victim)).metadata.uid;
    await before();
    await kubectl.ns('delete', 'pod', victim, '--wait=false');
    await until('the victim server leaves the cluster', () => seen.disconnectedRound !== null);
    expect(seen.primariesMovedRound).not.toBeNull();
    expect(seen.primariesMovedRound).toBeLessThan(seen.disconnectedRound);
    await until('the new pod', async () => {
      const p = await pod(victim).catch(() => null);
      return p !== null && p.metadata.uid !== uidBefore;
    });
  } finally {
    if (seen.disconnectedRound === null) { watching = false; await watch; }
  }

  // The StatefulSet made the pod again. While it is not serving, it must not be Ready (the startup and readiness
  // probes on the driver port).
  await until('the new pod is Ready', async () => {
    const p = await pod(victim);
    if (!podReady(p)) return false;
    const c = await connectPod(kubectl, victim, password).catch(() => null);
    if (!c) { seen.readyWithoutServer.push(Date.now()); return false; }
    await c.close();
    return true;
  }, { timeoutMs: 300000, intervalMs: 200 });
  expect(seen.readyWithoutServer).toEqual([]);
  await until('the server is back in the cluster', async () => (await connectedServers(conn)).includes(server));
  // postStart: the manager levels the primaries back onto the returned server.
  try {
    await until('the returned server holds a primary again', async () => (await primariesOfAnyTable(conn)).includes(server),
      { timeoutMs: 180000 });
  } finally {
    watching = false;
    await watch;
  }
  // The hooks came from the pod (curl in the container, run by the kubelet), as the manager's request log shows.
  if (hookLogs) {
    const logs = await kubectl.ns('logs', '-l', 'app=rethinkdb-manager', '--tail=-1', '--prefix', `--since-time=${since}`);
    expect(logs).toContain(`"url":"/v1/hooks/prestop?pod=${victim}"`);
    expect(logs).toContain(`"url":"/v1/hooks/poststart?pod=${victim}"`);
  }
  const events = (await kubectl.nsJson('get', 'events', '--field-selector', `involvedObject.name=${victim}`)).items;
  const after = (e) => (e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp) >= since.slice(0, 19);
  expect(events.filter((e) => e.reason === 'FailedPreStopHook' && after(e)).map((e) => e.message)).toEqual([]);
  await conn.close();
}

test('a pod deleted: the kubelet runs its preStop, the manager moves its primaries before SIGTERM, postStart brings them back, the probes gate Ready', async () => {
  await podStopsAndReturns('rethinkdb-2', 'prestop');
});

test('kubectl drain: the webhook demotes before the eviction, the PDB holds the next one, drain retries, uncordon levels back', async () => {
  const conn = await observer('rethinkdb-1');
  await ensureTable(conn, 'drain');
  const first = await nodeOf(kubectl, 'rethinkdb-1');
  const second = await nodeOf(kubectl, 'rethinkdb-0');
  const servers = { 'rethinkdb-0': 'rethinkdb_0', 'rethinkdb-1': 'rethinkdb_1' };

  const drainArgs = (node) => ['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=600s'];
  // The primaries at the moment the eviction was admitted: sampled every 100 ms, the first sample that finds the pod
  // deleting (or gone). The webhook runs before the API server admits the eviction; the preStop hook only starts
  // after it, when the kubelet sees the deletion, and takes seconds (its curl, the manager's moves).
  const uid1 = (await pod('rethinkdb-1')).metadata.uid;
  let atEviction = null;
  let sampling = true;
  const sampler = (async () => {
    while (sampling && atEviction === null) {
      const p = await pod('rethinkdb-1').catch(() => null);
      if (p === null || p.metadata.uid !== uid1 || p.metadata.deletionTimestamp) atEviction = await primariesByServer(conn, 'drain');
      await sleep(100);
    }
  })();
  try {
    await kubectl(...drainArgs(first));
  } finally {
    sampling = false;
    await sampler;
  }
  expect(atEviction).not.toBeNull();
  expect(atEviction).not.toContain('rethinkdb_1');
  // The evicted pod cannot run elsewhere: its volume is local to the cordoned node, so it stays Pending.
  await until('rethinkdb-1 is gone from the cluster', async () => !(await connectedServers(conn)).includes('rethinkdb_1'));

  // The second drain must wait: the PDB allows one RethinkDB pod down at a time.
  const conn0 = await observer('rethinkdb-0');
  let secondDone = false;
  const secondDrain = kubectl(...drainArgs(second)).then((out) => { secondDone = true; return out; });
  secondDrain.catch(() => {});
  try {
    await sleep(20000);
    expect(secondDone).toBe(false);
    const stillThere = await pod('rethinkdb-0');
    expect(stillThere.metadata.deletionTimestamp).toBeUndefined();
    // The disruption controller's view: with rethinkdb-1 away, the PDB allows no other RethinkDB pod to go.
    const pdb = await kubectl.nsJson('get', 'pdb', 'rethinkdb');
    expect(pdb.status.disruptionsAllowed).toBe(0);

    // Uncordon the first node: rethinkdb-1 comes back, the PDB allows the next eviction, the second drain completes.
    await kubectl('uncordon', first);
    await until('rethinkdb-1 is back', async () => (await connectedServers(conn0)).includes('rethinkdb_1'), { timeoutMs: 300000 });
    await secondDrain;
    expect(secondDone).toBe(true);
    await until('rethinkdb_0 has left', async () => !(await connectedServers(conn0)).includes(servers['rethinkdb-0']));
  } finally {
    // Whatever failed, the nodes go back to schedulable so that the next tests have their servers.
    await kubectl('uncordon', first).catch(() => {});
    await kubectl('uncordon', second).catch(() => {});
    await secondDrain.catch(() => {});
  }
  await until('rethinkdb_0 is back and holds a primary again', async () => {
    const c = await observer('none');
    try {
      return (await primariesByServer(c, 'drain')).includes('rethinkdb_0');
    } finally { await c.close(); }
  }, { timeoutMs: 300000 });
  await conn.close().catch(() => {});
  await conn0.close().catch(() => {});
});

test('kubectl rollout restart under client load through rethinkdb-client: each pod Ready only once its replicas are, no hand-back until one levelling at the end, the client served', async () => {
  const conn = await observer('none');
  await ensureTable(conn, 'usertable');
  await startClientPod(kubectl, 'client-rollout', { table: 'usertable' });
  let summary;
  let rolloutSeconds;
  let before;
  let watched;
  let clientLog = '';
  const since = new Date().toISOString();
  try {
    await until('the client is loaded and running', async () => (await clientLines(kubectl, 'client-rollout')).some((l) => l.started), { timeoutMs: 300000 });
    before = Object.fromEntries((await pods()).map((p) => [p.metadata.name, p.metadata.uid]));
    await sleep(5000);
    const watch = watchRollout({ r, db: DB, table: 'usertable', connect: () => observer('none'), listPods: pods });
    const t0 = Date.now();
    try {
      await kubectl.ns('rollout', 'restart', 'statefulset/rethinkdb');
      await kubectl.ns('rollout', 'status', 'statefulset/rethinkdb', '--timeout=900s');
      rolloutSeconds = (Date.now() - t0) / 1000;
      await sleep(10000);
    } finally {
      watched = await watch.stop();
    }
    summary = await stopClientPod(kubectl, 'client-rollout');
  } finally {
    // On a failure the client's own words say why (a table it could not load, a crash): they go with the pod.
    if (!summary) clientLog = await kubectl.ns('logs', 'client-rollout', '--tail=20').catch((err) => err.message);
    await kubectl.ns('delete', 'pod', 'client-rollout', '--wait=false').catch(() => {});
  }
  expect({ clientLog }).toEqual({ clientLog: '' });
  const { samples, podEvents, ...figures } = watched;
  process.stderr.write(`rollout restart: ${rolloutSeconds.toFixed(0)} s; client: ${JSON.stringify(summary)}; watch: ${JSON.stringify(figures)}\n`);

  const after = await pods();
  for (const p of after) expect({ pod: p.metadata.name, restarted: p.metadata.uid !== before[p.metadata.name] }).toEqual({ pod: p.metadata.name, restarted: true });
  const c = await observer('none');
  try {
    expect((await connectedServers(c)).sort()).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2']);
  } finally { await c.close(); }
  // The readiness gate: no pod turned Ready while its server still backfilled (sampled every 250 ms), and every pod
  // carried the manager's condition.
  expect(figures.readyTooEarly).toEqual([]);
  expect(figures.unreadableSamples).toBeLessThan(samples.length / 2);
  for (const p of after) expect((p.status.conditions ?? []).find((cond) => cond.type === 'rethinkdb-manager.io/replicas-ready')?.status).toBe('True');
  // No POSTSTART of the rollout handed primaries back; one levelling ran once it had ended.
  const log = await managerLog(since);
  const poststarts = log.filter((l) => l.msg === 'postStart decision');
  expect(poststarts.map((l) => l.pod).sort()).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
  for (const l of poststarts) expect(l.reason).toMatch(/came back during a rollout/);
  expect(log.filter((l) => l.msg === 'rollout ended: levelling the primaries once')).toHaveLength(1);
  // Holds: around each handover it wrote, the manager held the table at the proxies' gates (found by their pods'
  // label, with the token of the Secret rethinkdb-gate-hold that lab.sh creates) and released them.
  const holds = log.filter((l) => l.msg === 'query gates released');
  process.stderr.write(`rollout restart: ${holds.length} holds (${JSON.stringify(holds.map((l) => `${l.how} ${l.heldMs} ms at ${l.tableGates} gates`))})\n`);
  expect(holds.length).toBeGreaterThan(0);
  for (const l of holds) expect({ gates: l.tableGates > 0, notReleased: l.notReleased }).toEqual({ gates: true, notReleased: [] });
  // The clients were served: ops succeeded through the shipped entry. How many failed is a measured figure, printed
  // above and reported by npm run evaluate -- --lab kube --scenarios rolling-restart, not a bound here.
  expect(summary.ok).toBeGreaterThan(0);
  expect(summary.attempted).toBeGreaterThan(0);
  // Every update an increment of its record's counter (lab/kube/client.js): read back, each acknowledged one is there
  // and nothing beyond the acknowledged and the unknown ones (the gate applied nothing twice).
  expect(summary.counters).toMatchObject({ missing: 0, beyond: 0 });
  expect(summary.counters.acked).toBeGreaterThan(0);
  await conn.close();
});

// The gate tier's own event (docs/query-gate.md, "Stopping a gate"): the proxy Deployment rolled under a client that
// reconnects and sends again as examples/clients/ do. Each old gate leaves (not ready, still serving), then drains:
// a busy connection's next query is answered "the query gate is stopping" and sent again through another gate.
test('kubectl rollout restart of the proxies (the gates) under a client that reconnects: no operation fails, no increment unknown', async () => {
  const conn = await observer('none');
  await ensureTable(conn, 'usertable');
  await conn.close();
  await startClientPod(kubectl, 'client-proxies', { table: 'usertable', client: 'resilient' });
  let summary;
  let clientLog = '';
  let rolloutSeconds;
  try {
    await until('the client is loaded and running', async () => (await clientLines(kubectl, 'client-proxies')).some((l) => l.started), { timeoutMs: 300000 });
    await sleep(5000);
    const t0 = Date.now();
    await kubectl.ns('rollout', 'restart', 'deployment/rethinkdb-proxy');
    await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-proxy', '--timeout=600s');
    rolloutSeconds = (Date.now() - t0) / 1000;
    // The old pods' gates drain after rollout status returns (their proxies outlast them): wait them out.
    await until('the old proxy pods gone', async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-proxy')).items.length === 2, { timeoutMs: 120000, intervalMs: 1000 });
    await sleep(5000);
    summary = await stopClientPod(kubectl, 'client-proxies');
  } finally {
    if (!summary) clientLog = await kubectl.ns('logs', 'client-proxies', '--tail=20').catch((err) => err.message);
    await kubectl.ns('delete', 'pod', 'client-proxies', '--wait=false').catch(() => {});
  }
  expect({ clientLog }).toEqual({ clientLog: '' });
  process.stderr.write(`proxy rollout, resilient client: ${rolloutSeconds.toFixed(0)} s; client: ${JSON.stringify(summary)}\n`);
  expect(summary.reconnects.client).toBeGreaterThanOrEqual(4);
  expect({ failed: summary.failed, failedByKind: summary.failedByKind }).toEqual({ failed: 0, failedByKind: {} });
  expect(summary.counters).toMatchObject({ missing: 0, beyond: 0, unknown: 0 });
});

test('a node dies (kubelet, containerd and containers killed, network cut): RethinkDB keeps the table writable, Kubernetes marks the node, and it comes back', async () => {
  const victim = 'rethinkdb-1';
  const node = (await pod(victim)).spec.nodeName;
  let conn = await observer(victim);
  await ensureTable(conn, 'nodeloss');
  const killedAt = Date.now();
  try {
    await labNode('kill', node);
    await until('rethinkdb_1 leaves the cluster', async () => !(await connectedServers(conn)).includes('rethinkdb_1'), { timeoutMs: 60000 });
    // Two of three replicas remain: after RethinkDB's own failover, a write to every shard succeeds.
    const writable = await until('the table takes writes again', async () => {
      const docs = Array.from({ length: 30 }, (_, k) => ({ id: `after-loss-${k}` }));
      const result = await r.db(DB).table('nodeloss').insert(docs, { conflict: 'replace' }).run(conn);
      return result.errors === 0 ? Date.now() : false;
    }, { timeoutMs: 90000, intervalMs: 1000 });
    // Kubernetes: no kubelet heartbeat, so the node turns not Ready (the controller-manager's grace period).
    const notReadyAt = await until('the node is marked not Ready', async () => {
      const n = await kubectl.json('get', 'node', node);
      return n.status.conditions.find((c) => c.type === 'Ready').status !== 'True' ? Date.now() : false;
    }, { timeoutMs: 120000, intervalMs: 1000 });
    process.stderr.write(`node loss: writes again after ${writable - killedAt} ms; node not Ready after ${notReadyAt - killedAt} ms\n`);
  } finally {
    await labNode('restore', node);
  }
  await until('the node is Ready again', async () => {
    const n = await kubectl.json('get', 'node', node);
    return n.status.conditions.find((c) => c.type === 'Ready').status === 'True';
  }, { timeoutMs: 180000, intervalMs: 1000 });
  await until('rethinkdb-1 is Ready again', async () => podReady(await pod(victim)), { timeoutMs: 300000, intervalMs: 1000 });
  await conn.close().catch(() => {});
  conn = await observer('none');
  await until('rethinkdb_1 is back in the cluster', async () => (await connectedServers(conn)).includes('rethinkdb_1'), { timeoutMs: 120000 });
  await r.db(DB).table('nodeloss').wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(conn);
  await conn.close();
});

test('the manager\'s leader pod deleted mid-migration: the other replica takes the lease and finishes the migration', async () => {
  const conn = await observer('none');
  const dbs = await r.dbList().run(conn);
  if (!dbs.includes(DB)) await r.dbCreate(DB).run(conn);
  // migrate-replicas-off moves every table's replicas: only this one (2 replicas on 3 servers) has somewhere to go.
  for (const t of await r.db(DB).tableList().run(conn)) if (t !== 'leader') await r.db(DB).tableDrop(t).run(conn);
  if (!(await r.db(DB).tableList().run(conn)).includes('leader')) await r.db(DB).tableCreate('leader', { shards: 3, replicas: 2 }).run(conn);
  await r.db(DB).table('leader').wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
  // About 60 MB, so that backfilling a replica takes seconds and the leader can be deleted while it runs.
  const filler = 'x'.repeat(1000);
  for (let b = 0; b < 60; b += 1) {
    const docs = Array.from({ length: 1000 }, (_, k) => ({ id: `doc-${b}-${k}`, filler }));
    await r.db(DB).table('leader').insert(docs, { conflict: 'replace', durability: 'soft' }).run(conn);
  }
  const replicasOn = async (server) => (await r.db(DB).table('leader').config().run(conn)).shards
    .filter((s) => s.replicas.includes(server)).length;
  const servers = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'];
  const counts = await Promise.all(servers.map(replicasOn));
  const source = servers[counts.indexOf(Math.max(...counts))];

  const lease = await kubectl.nsJson('get', 'lease', 'rethinkdb-manager');
  const leaderPod = lease.spec.holderIdentity.split('_')[0];
  // The operator's calls go to the lease holder: the leader now, whichever replica holds it for the release.
  const api = managerApi(kubectl);
  // The operator's drain ends with a release, whatever happens below: without it the source stays marked draining,
  // takes no primary, and the tests after this one would meet a server the manager keeps empty.
  let last = null;
  const release = () => until(`${source} released`, async () => {
    last = await api('POST', '/v1/actions/release-server', { server: source, rebalance: false, reason: 'lab test: the migration is over' });
    return last.status === 200;
  }, { timeoutMs: 60000, intervalMs: 2000 }).catch((err) => { throw new Error(`${err.message}; last answer ${JSON.stringify(last)}`); });
  let passed = false;
  try {
    const answer = await api('POST', '/v1/actions/migrate-replicas-off', { server: source, reason: 'lab test: the leader deleted mid-migration' });
    expect(answer.status).toBe(202);
    const { operation } = answer.body;
    // Mid-migration, as RethinkDB shows it: a move staged (its new replica nonvoting, backfilling), and the source still
    // holds replicas.
    await until('a replica move of the migration is staged', async () => (await r.db(DB).table('leader').config().run(conn)).shards
      .some((s) => s.nonvoting_replicas.length > 0), { timeoutMs: 30000, intervalMs: 100 });
    expect(await replicasOn(source)).toBeGreaterThan(0);
    const deletedAt = new Date().toISOString();
    await kubectl.ns('delete', 'pod', leaderPod, '--force', '--grace-period=0');

    await until('another manager replica holds the lease', async () => {
      const l = await kubectl.nsJson('get', 'lease', 'rethinkdb-manager');
      return l.spec.holderIdentity && !l.spec.holderIdentity.startsWith(`${leaderPod}_`);
    }, { timeoutMs: 120000, intervalMs: 1000 });
    // Through the driver: every replica of the table left the source, and each shard still has two.
    await until(`no replica of ${DB}.leader on ${source}`, async () => (await replicasOn(source)) === 0, { timeoutMs: 300000, intervalMs: 1000 });
    const config = await r.db(DB).table('leader').config().run(conn);
    expect(config.shards.map((s) => s.replicas.length)).toEqual([2, 2, 2]);
    await r.db(DB).table('leader').wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(conn);
    // The new leader picked the migration up from the state its predecessor left (src/state), and said so.
    const reconciled = (await managerLog(deletedAt)).filter((l) => l.msg === 'state reconciled');
    process.stderr.write(`leader deleted mid-migration (operation ${operation?.id}): ${JSON.stringify(reconciled.map((x) => ({ loaded: x.loaded, resumed: x.resumed })))}\n`);
    expect(reconciled.some((x) => x.resumed > 0)).toBe(true);
    passed = true;
  } finally {
    // A release that fails after the test failed is reported, not thrown over the test's own failure.
    await release().catch((err) => { if (passed) throw err; process.stderr.write(`release after a failed test: ${err.message}\n`); });
  }
  await conn.close();
});

test('a noisy pod on a RethinkDB pod\'s node: the monitor reads metrics-server\'s node figures, raises PERFWARNING and demotes; the pod gone, it restores', async () => {
  // Each lab node's kubelet runs in a cgroup namespace rooted at the node's cgroup (lab/kube/node-ns.sh), so what
  // metrics-server serves for a node is that node's CPU, over its allocatable single CPU.
  const victim = 'rethinkdb-1';
  const server = 'rethinkdb_1';
  const conn = await observer(victim);
  await ensureTable(conn, 'noisy');
  await givePrimary(conn, 'noisy', server);
  const { spec } = await pod(victim);
  const noisy = noisyPod({ name: 'noisy', nodeName: spec.nodeName, image: spec.containers[0].image });
  const since = new Date().toISOString();
  const t0 = Date.now();
  let raisedAfter;
  let nodeUsage;
  try {
    expect(await applyObject(kubectl, noisy)).toBe('');
    // Demoted, as RethinkDB shows it.
    await until(`${server} holds no primary of ${DB}.noisy`, async () => !(await primariesByServer(conn, 'noisy')).includes(server), { timeoutMs: 240000, intervalMs: 1000 });
    raisedAfter = (Date.now() - t0) / 1000;
    nodeUsage = JSON.parse(await kubectl('get', '--raw', `/apis/metrics.k8s.io/v1beta1/nodes/${spec.nodeName}`)).usage.cpu;
  } finally {
    await kubectl.ns('delete', 'pod', 'noisy', '--ignore-not-found', '--wait=false');
  }
  const raised = (await managerLog(since)).filter((l) => l.msg === 'monitor decision' && l.decision === 'raise');
  process.stderr.write(`noisy pod on ${spec.nodeName}: demoted after ${raisedAfter} s, node CPU then ${nodeUsage}; ${JSON.stringify(raised.map((l) => l.reason))}\n`);
  // The monitor's own decision, on the interference signal: the node's figure, not the pod's.
  expect(raised.map((l) => ({ pod: l.pod, signal: l.signal }))).toEqual([{ pod: victim, signal: 'interference' }]);
  // The neighbour gone, the warning clears after its cooldown and the primaries come back.
  const cleared = await until('the monitor clears the warning', async () => {
    const lines = (await managerLog(since)).filter((l) => l.msg === 'monitor decision' && l.decision === 'clear');
    return lines.length > 0 && lines;
  }, { timeoutMs: 300000, intervalMs: 5000 });
  expect(cleared.map((l) => l.pod)).toEqual([victim]);
  try {
    await until(`${server} holds a primary again`, async () => (await primariesOfAnyTable(conn)).includes(server), { timeoutMs: 120000, intervalMs: 1000 });
  } catch (err) {
    // What the manager decided and did after the warning, and where the primaries are: the failure explains itself.
    const lines = (await managerLog(since)).filter((l) => !l.req && l.level >= 30).map(({ time, msg, ...rest }) => `${time} ${msg} ${JSON.stringify(rest).slice(0, 600)}`);
    process.stderr.write(`noisy pod: no primary back on ${server}; manager log since the warning:\n${lines.join('\n')}\nprimaries now: ${JSON.stringify(await primariesOfAnyTable(conn))}\n`);
    throw err;
  }
  await conn.close();
});

test('the manager\'s own Deployment rolled: a RethinkDB pod stopped as the leader\'s pod terminates still has its primaries moved first', async () => {
  const managers = async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-manager')).items;
  const before = new Set((await managers()).map((p) => p.metadata.name));
  const leader0 = (await kubectl.nsJson('get', 'lease', 'rethinkdb-manager')).spec.holderIdentity.split('_')[0];
  let leaderTerminatingAt;
  await podStopsAndReturns('rethinkdb-0', 'rollover', {
    hookLogs: false,
    before: async () => {
      await kubectl.ns('rollout', 'restart', 'deployment/rethinkdb-manager');
      // The rollout replaces one replica at a time; the RethinkDB pod stops as soon as the leader's own pod is
      // terminating, so that its preStop meets the leader's shutdown and the Lease changing hands.
      await until(`the leader's pod ${leader0} terminating`, async () => {
        const p = await pod(leader0).catch(() => null);
        return p === null || Boolean(p.metadata.deletionTimestamp);
      }, { timeoutMs: 300000, intervalMs: 100 });
      leaderTerminatingAt = new Date().toISOString();
    },
  });
  await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-manager', '--timeout=300s');
  const after = await managers();
  const current = after.filter((p) => !p.metadata.deletionTimestamp);
  expect(current).toHaveLength(2);
  for (const p of current) expect({ pod: p.metadata.name, replaced: !before.has(p.metadata.name), ready: podReady(p) }).toEqual({ pod: p.metadata.name, replaced: true, ready: true });
  const holder = (await kubectl.nsJson('get', 'lease', 'rethinkdb-manager')).spec.holderIdentity.split('_')[0];
  expect(current.map((p) => p.metadata.name)).toContain(holder);
  const prestops = (await managerLog(leaderTerminatingAt)).filter((l) => String(l.req?.url).startsWith('/v1/hooks/prestop'));
  process.stderr.write(`manager rollout: the leader's pod terminating at ${leaderTerminatingAt}; preStop seen ${JSON.stringify(prestops.map((l) => [l.time, l.res?.statusCode ?? l.msg]))}\n`);
  // Who answered the preStop is not asserted: a leader whose pod is terminating still serves until its SIGTERM arrives,
  // and its log goes with it (one run saw no preStop line in the surviving replicas' logs). What matters is checked
  // above through the driver: the primaries left before the server did, and no preStop hook failed.
});

test('the kustomize base in place of the chart (helm uninstall, kubectl apply -k deploy/k8s, the webhook certificate): Ready, the servers on their data, the hooks through the manager', async () => {
  const helm = `${REPO}test/helm/bin/helm`;
  // A table written before, to find after: the servers must come back on their data.
  const before = await observer('none');
  try { await ensureTable(before, 'kustomize'); } finally { await before.close(); }
  await run(helm, ['uninstall', 'rethinkdb-manager', '-n', 'rethinkdb', '--wait', '--timeout', '10m'], { env: kubectl.env });
  await until('the chart\'s pods are gone', async () => (await kubectl.nsJson('get', 'pods', '-l', 'app in (rethinkdb,rethinkdb-manager,rethinkdb-proxy)')).items.length === 0, { timeoutMs: 300000, intervalMs: 1000 });
  // The install steps of docs/install.md, on the base as shipped: the Secrets are still there (created outside the
  // chart), so steps 3 and 4.
  await kubectl('apply', '-k', `${REPO}deploy/k8s`);
  await run('sh', [`${REPO}deploy/webhook-cert.sh`], { env: { ...kubectl.env, NAMESPACE: 'rethinkdb', PATH: `${REPO}lab/kube/bin:${process.env.PATH}` } });
  for (const what of ['statefulset/rethinkdb', 'deployment/rethinkdb-proxy', 'deployment/rethinkdb-manager']) {
    await kubectl.ns('rollout', 'status', what, '--timeout=600s');
  }
  const sts = await kubectl.nsJson('get', 'statefulset', 'rethinkdb');
  expect(sts.metadata.labels?.['app.kubernetes.io/managed-by']).toBeUndefined();
  const all = (await kubectl.nsJson('get', 'pods')).items.filter((p) => ['rethinkdb', 'rethinkdb-manager', 'rethinkdb-proxy'].includes(p.metadata.labels?.app));
  for (const p of all) expect({ pod: p.metadata.name, ready: podReady(p) }).toEqual({ pod: p.metadata.name, ready: true });
  expect(new Set((await pods()).map((p) => p.spec.nodeName)).size).toBe(3);
  const conn = await observer('none');
  try {
    expect((await connectedServers(conn)).sort()).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2']);
    // The servers came back on the volumes the chart's StatefulSet had claimed: the tables are still there.
    expect(await r.db(DB).tableList().run(conn)).toContain('kustomize');
  } finally { await conn.close(); }
  await podStopsAndReturns('rethinkdb-1', 'kustomize');
  // Step 4's check: the manager serves the webhook once it has read the certificate.
  await until('the manager serves the eviction webhook', async () => (await kubectl.ns('logs', '-l', 'app=rethinkdb-manager', '--tail=-1')).includes('eviction webhook listening (TLS)'),
    { timeoutMs: 240000, intervalMs: 5000 });
});

// Issue 45 part 3 (seed 003): uniform overload on real kubelets. Every server is held to 200m of CPU under a load this
// machine can make (lab/kube/scale-out.js says why), so all three are over the monitor's 80 %: the manager scales the
// StatefulSet out by one, the scheduler puts the new pod on the one node without a server, its postStart's POSTSTART
// gives its server replicas and a primary (add-server), and a second overload within the cooldown adds nothing. Then
// the lab is scaled back in the way docs/monitor.md says an operator does.
test('uniform overload: the monitor scales the StatefulSet out by one, the new server gets replicas and a primary, a second overload in the cooldown adds nothing, and the documented scale-in puts it back', async () => {
  const api = managerApi(kubectl);
  const conn = await observer('none');
  try {
    await overloadScaleOutAndIn(api, conn);
  } finally {
    await conn.close().catch(() => {});
  }
});

async function overloadScaleOutAndIn(api, conn) {
  await ensureTable(conn, 'scaleout', { shards: 4 });
  const clientPod = 'scale-client';
  await startClientPod(kubectl, clientPod, { db: DB, table: 'scaleout', rate: 300, keys: 2000 });
  await until('the client is loaded and running', async () => (await clientLines(kubectl, clientPod)).some((l) => l.started), { timeoutMs: 300000, intervalMs: 1000 });
  const since = new Date().toISOString();
  let summary = null;
  try {
    await squeezeCpu(kubectl, ['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
    const squeezedAt = Date.now();
    const [decision] = await until('the monitor decides a scale-out', async () => {
      const found = await monitorDecisions(api, 'scale-out', since);
      return found.length > 0 && found;
    }, { timeoutMs: 240000, intervalMs: 2000 });
    expect(decision).toMatchObject({ to: 4, result: { replicas: 4 }, reason: expect.stringMatching(/^uniform overload/) });
    const decidedAt = Date.parse(decision.time);
    // The fourth pod, squeezed like the others as soon as it runs.
    await until('rethinkdb-3 runs', async () => (await pod('rethinkdb-3')).status?.containerStatuses, { timeoutMs: 300000, intervalMs: 500 });
    await squeezeCpu(kubectl, ['rethinkdb-3']);
    // On the one node without a server (the chart's required anti-affinity).
    const others = await Promise.all(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2'].map((p) => nodeOf(kubectl, p)));
    expect(others).not.toContain(await nodeOf(kubectl, 'rethinkdb-3'));
    // Its server: replicas, and a primary (of any table: the manager levels primaries over the cluster), all ready.
    await until('rethinkdb_3 holds a primary and every replica is ready', async () => {
      if (!(await primariesOfAnyTable(conn)).includes('rethinkdb_3')) return false;
      const statuses = await r.db('rethinkdb').table('table_status').coerceTo('array').run(conn);
      return statuses.every((t) => t.status.all_replicas_ready);
    }, { timeoutMs: 300000, intervalMs: 500 });
    const servingAt = Date.now();
    const replicasOnNew = (await r.db('rethinkdb').table('table_config').coerceTo('array').run(conn))
      .flatMap((t) => t.shards).filter((sh) => sh.replicas.includes('rethinkdb_3')).length;
    expect(replicasOnNew).toBeGreaterThan(0);
    await until('rethinkdb-3 Ready', async () => podReady(await pod('rethinkdb-3')), { timeoutMs: 120000, intervalMs: 500 });
    // A second overload within the cooldown: all four held tighter. The monitor sees it and scales nothing.
    const secondSince = new Date().toISOString();
    await squeezeCpu(kubectl, ['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2', 'rethinkdb-3'], '150m');
    const suppressed = await until('a second uniform overload, suppressed', async () => {
      const found = await monitorDecisions(api, 'scale-out-suppressed', secondSince);
      return found.length > 0 && found;
    }, { timeoutMs: 240000, intervalMs: 2000 });
    expect(suppressed[0].reason).toMatch(/cooldown/);
    expect(await monitorDecisions(api, 'scale-out', since)).toHaveLength(1);
    expect((await kubectl.nsJson('get', 'statefulset', 'rethinkdb')).spec.replicas).toBe(4);
    process.stderr.write(`scale-out on real kubelets: decided ${((decidedAt - squeezedAt) / 1000).toFixed(1)} s after the squeeze, `
      + `rethinkdb_3 serving ${((servingAt - decidedAt) / 1000).toFixed(1)} s after the decision with ${replicasOnNew} replicas; second overload: ${suppressed[0].reason}\n`);
  } finally {
    summary = await stopClientPod(kubectl, clientPod, { timeoutMs: 120000 }).catch((err) => { process.stderr.write(`scale-out client: ${err.message}\n`); return null; });
    await kubectl.ns('delete', 'pod', clientPod, '--ignore-not-found', '--wait=false').catch(() => {});
    await unsqueezeCpu(kubectl);
    await scaleIn(kubectl, { to: 3, log: (o, m) => process.stderr.write(`${m} ${JSON.stringify(o)}\n`) });
  }
  process.stderr.write(`scale-out client: ${JSON.stringify({ attempted: summary?.attempted, failed: summary?.failed, failedByKind: summary?.failedByKind, latencyMs: summary?.latencyMs })}\n`);
  // Scaled back in: three servers, none of the fourth's replicas left anywhere, each pod with the chart's CPU again.
  const configs = await r.db('rethinkdb').table('table_config').coerceTo('array').run(conn);
  expect(configs.flatMap((t) => t.shards).filter((sh) => sh.replicas.includes('rethinkdb_3') || sh.nonvoting_replicas.includes('rethinkdb_3'))).toEqual([]);
  expect((await pods()).map((p) => [p.metadata.name, p.spec.containers.find((c) => c.name === 'rethinkdb').resources.limits.cpu]).sort())
    .toEqual([['rethinkdb-0', '1'], ['rethinkdb-1', '1'], ['rethinkdb-2', '1']]);
}

// docs/existing-statefulset.md as written: a StatefulSet made by hand as users run RethinkDB already (names and labels
// of its own, its own ServiceAccount and Secret, no hooks), the chart's manager attached to it (the kustomize base
// removed first: one release per cluster), what it says its pods lack, then deploy/existing/statefulset-patch.yaml
// applied, then a pod deleted and a rollout restart.
test('an existing StatefulSet of its own attached by the chart: the manager names what its pods lack; after the documented patch, a pod deleted and a rollout restart go through its hooks', async () => {
  try {
    await attachToExistingStatefulSet();
  } finally {
    // The release's cluster-scoped objects would stop lab.sh up from installing the chart again (LAB_KEEP=1, an
    // evaluation after the tests).
    await run(`${REPO}test/helm/bin/helm`, ['uninstall', 'rethinkdb-manager', '-n', 'db', '--wait', '--timeout', '5m'], { env: kubectl.env }).catch(() => {});
    await kubectl('delete', 'namespace', 'db', '--ignore-not-found', '--wait=true', '--timeout=300s').catch(() => {});
  }
}, 40 * 60 * 1000);

async function attachToExistingStatefulSet() {
  const helm = `${REPO}test/helm/bin/helm`;
  const NS = 'db';
  const k = Object.assign((...args) => kubectl('-n', NS, ...args), {
    json: kubectl.json, env: kubectl.env, ns: (...args) => kubectl('-n', NS, ...args), nsJson: (...args) => kubectl.json('-n', NS, ...args),
  });
  const labels = { 'app.kubernetes.io/name': 'rdb' };
  const rdbPods = async () => (await k.nsJson('get', 'pods', '-l', 'app.kubernetes.io/name=rdb')).items;
  // RethinkDB names a server after its hostname with a random suffix (rdb_1_x7k) unless told a name: by hostname, then.
  const serverOfPod = async (conn, podName) => (await r.db('rethinkdb').table('server_status').coerceTo('array').run(conn))
    .find((srv) => srv.network.hostname === podName)?.name;
  await kubectl('delete', '-k', `${REPO}deploy/k8s`, '--ignore-not-found', '--wait=true', '--timeout=600s');
  await kubectl('delete', 'namespace', NS, '--ignore-not-found', '--wait=true', '--timeout=300s');
  const password = `lab-${Date.now()}`;
  await kubectl('create', 'namespace', NS);
  await k('create', 'secret', 'generic', 'rdb-admin', `--from-literal=password=${password}`);
  await applyObject(kubectl, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'rdb', namespace: NS }, automountServiceAccountToken: false });
  await applyObject(kubectl, {
    apiVersion: 'v1', kind: 'Service', metadata: { name: 'rdb', namespace: NS },
    spec: { clusterIP: 'None', publishNotReadyAddresses: true, selector: labels, ports: [{ name: 'driver', port: 28015 }, { name: 'cluster', port: 29015 }] },
  });
  const start = [
    'set -eu',
    'set -- --bind all --directory /data/rethinkdb --cache-size 256 --canonical-address "$POD_IP" --canonical-address 127.0.0.1',
    'for i in 0 1 2; do peer="rdb-$i.rdb"; [ "rdb-$i" = "$(hostname)" ] && continue; getent hosts "$peer" >/dev/null && set -- "$@" --join "$peer:29015"; done',
    'exec rethinkdb "$@" --initial-password "$RETHINKDB_PASSWORD"',
  ].join('\n');
  await applyObject(kubectl, {
    apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'rdb', namespace: NS },
    spec: {
      replicas: 3, serviceName: 'rdb', selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: 'rdb', automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, fsGroup: 1000 },
          containers: [{
            name: 'server', image: 'rethinkdb-k8s-rethinkdb:2.4.4-bookworm-slim', imagePullPolicy: 'Never', command: ['/bin/sh', '-c', start],
            env: [
              { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
              { name: 'RETHINKDB_PASSWORD', valueFrom: { secretKeyRef: { name: 'rdb-admin', key: 'password' } } },
            ],
            ports: [{ containerPort: 28015 }, { containerPort: 29015 }],
            readinessProbe: { tcpSocket: { port: 28015 }, periodSeconds: 2 },
            resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { memory: '1Gi' } },
            volumeMounts: [{ name: 'data', mountPath: '/data' }],
          }],
        },
      },
      volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], storageClassName: 'lab-local', resources: { requests: { storage: '1Gi' } } } }],
    },
  });
  await k('rollout', 'status', 'statefulset/rdb', '--timeout=600s');
  // A driver connection to a Ready rdb pod other than `avoid`.
  const readyRdb = (avoid = null) => until(`a Ready rdb pod${avoid ? ` other than ${avoid}` : ''} answers`, async () => {
    for (const p of (await rdbPods()).filter((x) => podReady(x) && x.metadata.name !== avoid)) {
      try { return await connectPod(k, p.metadata.name, password); } catch { /* the next */ }
    }
    return null;
  }, { timeoutMs: 120000, intervalMs: 1000 });
  const conn = await readyRdb();
  try {
    await r.dbCreate('app').run(conn);
    await r.db('app').tableCreate('items', { shards: 3, replicas: 3 }).run(conn);
    await r.db('app').table('items').wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
    await r.db('app').table('items').insert(Array.from({ length: 300 }, (_, i) => ({ id: i }))).run(conn);
  } finally { await conn.close(); }

  // The manager alone, as the page says.
  await run(helm, ['install', 'rethinkdb-manager', `${REPO}deploy/helm/rethinkdb-k8s-manager`, '-n', NS,
    '--set', 'rethinkdb.existing.statefulSetName=rdb', '--set', 'rethinkdb.existing.podLabels.app\\.kubernetes\\.io/name=rdb',
    '--set', 'rethinkdb.existing.hosts={rdb-0.rdb,rdb-1.rdb,rdb-2.rdb}', '--set', 'rethinkdb.existing.serviceAccountName=rdb',
    '--set', 'rethinkdb.adminSecret.name=rdb-admin', '--set', 'manager.replicas=1', '--wait', '--timeout', '10m'], { env: kubectl.env });
  await run('sh', [`${REPO}deploy/webhook-cert.sh`], { env: { ...kubectl.env, NAMESPACE: NS, PATH: `${REPO}lab/kube/bin:${process.env.PATH}` } });
  const { stdout: manifest } = await run(helm, ['get', 'manifest', 'rethinkdb-manager', '-n', NS], { env: kubectl.env });
  expect(manifest).not.toMatch(/kind: StatefulSet/);
  const attachmentLines = async () => (await k('logs', '-l', 'app=rethinkdb-manager', '--tail=-1')).split('\n').filter((l) => l.includes('"module":"attachment"')).map((l) => JSON.parse(l));
  const said = await until('the manager says what the pods lack', async () => { const lines = await attachmentLines(); return lines.length >= 5 && lines; }, { timeoutMs: 180000, intervalMs: 2000 });
  process.stderr.write(`existing StatefulSet, the manager's findings: ${said.map((l) => l.msg).join(' | ')}\n`);
  expect(said.map((l) => l.check)).toEqual(['prestop-hook', 'poststart-hook', 'hook-token', 'readiness-gate', 'grace-period']);

  // The patch, its container name changed to this StatefulSet's, as the page says.
  const patchFile = join(mkdtempSync(join(tmpdir(), 'rdb-patch-')), 'patch.yaml');
  writeFileSync(patchFile, readFileSync(`${REPO}deploy/existing/statefulset-patch.yaml`, 'utf8').replace('- name: rethinkdb\n', '- name: server\n'));
  const patchedAt = new Date().toISOString();
  await k('patch', 'statefulset', 'rdb', '--patch-file', patchFile);
  await k('rollout', 'status', 'statefulset/rdb', '--timeout=900s');
  const managerLines = async (since) => (await k('logs', '-l', 'app=rethinkdb-manager', '--tail=-1', `--since-time=${since}`)).split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
  // Every pod made again with the manager's readiness condition set, and each one's preStop and postStart reached it.
  for (const p of await rdbPods()) {
    expect({ pod: p.metadata.name, gate: (p.status.conditions ?? []).find((c) => c.type === 'rethinkdb-manager.io/replicas-ready')?.status })
      .toEqual({ pod: p.metadata.name, gate: 'True' });
  }
  const afterPatch = await managerLines(patchedAt);
  const hooks = (name) => [...new Set(afterPatch.filter((l) => l.msg === name).map((l) => l.pod))].sort();
  expect(hooks('postStart decision')).toEqual(['rdb-0', 'rdb-1', 'rdb-2']);

  // A pod deleted: its preStop moves its primaries before it stops, and the others keep the table writable.
  const c2 = await readyRdb('rdb-1');
  try {
    const rdb1 = await serverOfPod(c2, 'rdb-1');
    const primaries = async () => (await r.db('app').table('items').config().run(c2)).shards.map((s) => s.primary_replica);
    await until(`${rdb1} holds a primary (the levelling after the rollout)`, async () => (await primaries()).includes(rdb1), { timeoutMs: 120000, intervalMs: 1000 });
    const deletedAt = new Date().toISOString();
    await k('delete', 'pod', 'rdb-1', '--wait=false');
    await until(`${rdb1} holds no primary`, async () => !(await primaries()).includes(rdb1), { timeoutMs: 60000, intervalMs: 200 });
    await k('rollout', 'status', 'statefulset/rdb', '--timeout=600s');
    await until('rdb-1 Ready again', async () => podReady((await rdbPods()).find((p) => p.metadata.name === 'rdb-1')), { timeoutMs: 300000, intervalMs: 1000 });
    const prestops = (await managerLines(deletedAt)).filter((l) => l.pod === 'rdb-1' && l.msg === 'preStop handled');
    expect(prestops).toEqual([expect.objectContaining({ server: rdb1, primariesOff: true })]);

    // A rollout restart: one event, every pod made again and Ready through the manager's condition, the table whole.
    await k('rollout', 'restart', 'statefulset/rdb');
    await k('rollout', 'status', 'statefulset/rdb', '--timeout=900s');
  } finally { await c2.close(); }
  const c3 = await readyRdb();
  try {
    expect(await r.db('app').table('items').count().run(c3)).toBe(300);
    expect((await r.db('rethinkdb').table('server_status').coerceTo('array').run(c3)).map((srv) => srv.network.hostname).sort()).toEqual(['rdb-0', 'rdb-1', 'rdb-2']);
  } finally { await c3.close(); }
  expect((await managerLines(patchedAt)).filter((l) => l.msg === 'rollout ended: levelling the primaries once').length).toBeGreaterThanOrEqual(1);
}
