// End-to-end on a real Kubernetes cluster (lab/kube/lab.sh: kubelets, containerd, kube-proxy, CoreDNS,
// metrics-server), with the shipped chart installed by helm from images built locally. Kubernetes itself runs the
// hooks, probes, evictions and drains here; every assertion about RethinkDB is made through the official driver,
// straight to the server pods, never through the manager.
// The lab is brought up once for the file (minutes the first time; lab.sh is idempotent) and taken down at the end,
// with a check that nothing of it is left on the machine.

import { jest } from '@jest/globals';
import {
  NAMESPACE, adminPassword, connectPod, createKubectl, labDown, labLeftovers, labUp, podReady, r,
} from '../helpers/kube-lab.js';

jest.setTimeout(15 * 60 * 1000);

const DB = 'lab';
let kubectl;
let password;

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

async function until(what, fn, { timeoutMs = 180000, intervalMs = 500 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) { last = err; }
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms${last ? ` (last error: ${last.message})` : ''}`);
    await sleep(intervalMs);
  }
}

const pods = async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items;
const pod = async (name) => kubectl.nsJson('get', 'pod', name);

// A connection to a RethinkDB pod other than `avoid`, reopened when it breaks.
async function observer(avoid) {
  const list = await pods();
  const via = list.find((p) => p.metadata.name !== avoid && podReady(p));
  return connectPod(kubectl, via.metadata.name, password);
}

async function primariesByServer(conn, table) {
  const config = await r.db(DB).table(table).config().run(conn);
  return config.shards.map((s) => s.primary_replica);
}

const connectedServers = async (conn) => (await r.db('rethinkdb').table('server_status').pluck('name').coerceTo('array').run(conn))
  .map((s) => s.name);

async function ensureTable(conn, table) {
  const dbs = await r.dbList().run(conn);
  if (!dbs.includes(DB)) await r.dbCreate(DB).run(conn);
  const tables = await r.db(DB).tableList().run(conn);
  if (!tables.includes(table)) await r.db(DB).tableCreate(table, { shards: 3, replicas: 3 }).run(conn);
  await r.db(DB).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
  await r.db(DB).table(table).rebalance().run(conn).catch(() => {});
  await r.db(DB).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(conn);
}

beforeAll(() => {
  const kubeconfig = labUp({ log: (line) => process.stderr.write(`${line}\n`) });
  kubectl = createKubectl(kubeconfig);
}, 40 * 60 * 1000);

afterAll(() => {
  if (process.env.LAB_KEEP === '1') return;
  labDown();
  expect(labLeftovers()).toBe('');
}, 5 * 60 * 1000);

test('the chart is installed by helm and everything it made is Ready on real kubelets', async () => {
  password = await adminPassword(kubectl);
  const nodes = (await kubectl.json('get', 'nodes')).items;
  expect(nodes.length).toBeGreaterThanOrEqual(4);
  const all = (await kubectl.nsJson('get', 'pods')).items;
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

test('a pod deleted: the kubelet runs its preStop, the manager moves its primaries before SIGTERM, postStart brings them back, the probes gate Ready', async () => {
  const victim = 'rethinkdb-2';
  const server = 'rethinkdb_2';
  let conn = await observer(victim);
  await ensureTable(conn, 'prestop');
  expect(await primariesByServer(conn, 'prestop')).toContain(server);

  // Watch from another server: when the victim's primaries left it, and when it left the cluster.
  const seen = { primariesMovedAt: null, disconnectedAt: null, readyWithoutServer: [] };
  let watching = true;
  const watch = (async () => {
    while (watching) {
      try {
        const [primaries, connected] = await Promise.all([primariesByServer(conn, 'prestop'), connectedServers(conn)]);
        const t = Date.now();
        if (seen.primariesMovedAt === null && !primaries.includes(server)) seen.primariesMovedAt = t;
        if (seen.disconnectedAt === null && !connected.includes(server)) seen.disconnectedAt = t;
      } catch {
        conn = await observer(victim).catch(() => conn);
      }
      await sleep(100);
    }
  })();
  const uidBefore = (await pod(victim)).metadata.uid;
  await kubectl.ns('delete', 'pod', victim, '--wait=false');
  await until('the victim server leaves the cluster', () => seen.disconnectedAt !== null);
  expect(seen.primariesMovedAt).not.toBeNull();
  expect(seen.primariesMovedAt).toBeLessThanOrEqual(seen.disconnectedAt);

  // The StatefulSet makes the pod again. While it is not serving, it must not be Ready (the startup and readiness
  // probes on the driver port).
  await until('the new pod', async () => (await pod(victim).catch(() => null))?.metadata.uid !== uidBefore);
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
  await until('the returned server holds a primary again', async () => (await primariesByServer(conn, 'prestop')).includes(server),
    { timeoutMs: 180000 });
  watching = false;
  await watch;
  const events = (await kubectl.nsJson('get', 'events', '--field-selector', `involvedObject.name=${victim}`)).items;
  expect(events.filter((e) => e.reason === 'FailedPreStopHook').map((e) => e.message)).toEqual([]);
  await conn.close();
});

test('kubectl drain: the webhook demotes before the eviction, the PDB holds the next one, drain retries, uncordon levels back', async () => {
  const conn = await observer('rethinkdb-1');
  await ensureTable(conn, 'drain');
  const nodeOf = async (name) => (await pod(name)).spec.nodeName;
  const first = await nodeOf('rethinkdb-1');
  const second = await nodeOf('rethinkdb-0');
  const servers = { 'rethinkdb-0': 'rethinkdb_0', 'rethinkdb-1': 'rethinkdb_1' };

  const drainArgs = (node) => ['drain', node, '--ignore-daemonsets', '--delete-emptydir-data', '--timeout=600s'];
  // Primaries on rethinkdb_1 when the eviction reached the API server: read from another server right after drain.
  await kubectl(...drainArgs(first));
  const afterFirst = await primariesByServer(conn, 'drain');
  expect(afterFirst).not.toContain('rethinkdb_1');
  // The evicted pod cannot run elsewhere: its volume is local to the cordoned node, so it stays Pending.
  await until('rethinkdb-1 is gone from the cluster', async () => !(await connectedServers(conn)).includes('rethinkdb_1'));

  // The second drain must wait: the PDB allows one RethinkDB pod down at a time.
  const conn0 = await observer('rethinkdb-0');
  let secondDone = false;
  const secondDrain = kubectl(...drainArgs(second)).then((out) => { secondDone = true; return out; });
  await sleep(20000);
  expect(secondDone).toBe(false);
  const stillThere = await pod('rethinkdb-0');
  expect(stillThere.metadata.deletionTimestamp).toBeUndefined();

  // Uncordon the first node: rethinkdb-1 comes back, the PDB allows the next eviction, the second drain completes.
  await kubectl('uncordon', first);
  await until('rethinkdb-1 is back', async () => (await connectedServers(conn0)).includes('rethinkdb_1'), { timeoutMs: 300000 });
  await secondDrain;
  expect(secondDone).toBe(true);
  await until('rethinkdb_0 has left', async () => !(await connectedServers(conn0)).includes(servers['rethinkdb-0']));
  await kubectl('uncordon', second);
  await until('rethinkdb_0 is back and holds a primary again', async () => {
    const c = await observer('none');
    try {
      return (await primariesByServer(c, 'drain')).includes('rethinkdb_0');
    } finally { await c.close(); }
  }, { timeoutMs: 300000 });
  await conn.close().catch(() => {});
  await conn0.close().catch(() => {});
});
