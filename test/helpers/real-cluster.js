// Real RethinkDB servers for the tests: the paper's tables on a lab cluster, a manager wired to it through the real
// driver path (src/rethinkdb/connect.js), and reads of table_config/table_status straight through the driver.

import r from 'rethinkdb';
import request from 'supertest';
import { createLabManager } from '../lab/lab-manager.js';
import { createRethinkDbCluster, resolveBinary } from '../lab/rethinkdb-cluster.js';
import { createLogSink, eventually, postJson } from './harness.js';

// The paper's data: ycsb.usertable 4 shards x 3 replicas, and a second table.
export const PAPER_TABLES = [
  { db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 },
  { db: 'ycsb', table: 'accounts', shards: 2, replicas: 3, docs: 200 },
];

// Starts `size` servers and creates the tables. Fails (never skips) without a binary, saying how to provide one.
// labIndex: a netns lab's own bridge and subnet (the evaluation uses 0).
// coresPerNode: each server in its own CPU node (cgroup), where a noisy neighbour can run (test/lab/cpu-nodes.js).
export async function startRealCluster({
  size = 4, tables = PAPER_TABLES, network = 'loopback', labIndex = 0, coresPerNode = null,
} = {}) {
  const cluster = createRethinkDbCluster({ binary: resolveBinary(), size, network, labIndex, coresPerNode });
  try {
    await cluster.start();
    await cluster.createTables(tables);
  } catch (err) {
    await cluster.destroy();
    throw err;
  }
  return cluster;
}

// A manager on the real cluster, connected through server `via`, its log lines kept for the test.
// kube: a Kubernetes port (test/lab/lab-kube.js) or none.
export function createRealManager(cluster, { via = 0, env = {}, kube = null } = {}) {
  const sink = createLogSink();
  return { ...createLabManager(cluster, { via, env, kube, destination: sink.stream }), logs: sink.lines };
}

// A test file's cluster and manager, closed after each test (afterEach registered here): set lab.cluster and
// lab.manager in the test.
export function realLab() {
  const lab = { cluster: null, manager: null };
  afterEach(async () => {
    await lab.manager?.close();
    lab.manager = null;
    await lab.cluster?.destroy();
    lab.cluster = null;
  });
  return lab;
}

// Until the manager's connection is up (it connects in the background) and, as src/server.js does at start-up,
// it has reconciled its persisted state (it takes no work before).
export const waitConnected = (m, timeoutMs = 10000) => m.ready(timeoutMs);

// table_config and table_status by names, read through the driver, not through the manager.
export async function readTables(cluster, index = null) {
  return cluster.withConnection(async (c) => {
    const configs = await r.db('rethinkdb').table('table_config').coerceTo('array').run(c);
    const statuses = await r.db('rethinkdb').table('table_status').coerceTo('array').run(c);
    const byName = (list) => Object.fromEntries(list.map((t) => [`${t.db}.${t.name}`, t]));
    return { config: byName(configs), status: byName(statuses) };
  }, index);
}

export const primariesOf = (tables, name = 'ycsb.usertable') => tables.config[name].shards.map((s) => s.primary_replica);
export const actingOf = (tables, name = 'ycsb.usertable') => tables.status[name].shards.map((s) => s.primary_replicas);
// Both tables' configured primaries (names).
export const allPrimaries = (tables) => [...primariesOf(tables), ...primariesOf(tables, 'ycsb.accounts')];

// The tables when every shard's acting primary is its configured one and every replica is ready; else false.
export async function settled(cluster) {
  const t = await readTables(cluster);
  const ok = Object.keys(t.config).every((name) => {
    const acting = actingOf(t, name);
    return primariesOf(t, name).every((p, i) => acting[i].length === 1 && acting[i][0] === p) && t.status[name].status.all_replicas_ready;
  });
  return ok && t;
}

export const replicasOf = (tables, name = 'ycsb.usertable') => tables.config[name].shards.map((s) => [...s.replicas].sort());

// Every draining mark released through the manager (release-server without rebalancing), as an operator releases
// one; fails if a release is refused or the manager does not answer. What a real test that starts from no mark runs first.
export async function releaseDraining(m) {
  // The manager may be reconnecting (the server it was connected through just stopped): its 503 lasts ~0.1 s.
  const cluster = await eventually(async () => {
    const res = await request(m.app).get('/v1/cluster');
    return res.status === 200 && res;
  }, { what: 'GET /v1/cluster to answer 200' });
  for (const s of cluster.body.servers.filter((x) => x.draining)) {
    const res = await postJson(m.app, '/v1/actions/release-server', { server: s.name, rebalance: false });
    if (res.status !== 200) throw new Error(`release-server ${s.name} answered ${res.status}: ${JSON.stringify(res.body)}`);
  }
}

// A layout: each table's shards as { primary, replicas } (server names, replicas sorted), no nonvoting replica.
export async function readLayout(cluster) {
  const t = await readTables(cluster);
  return Object.fromEntries(Object.entries(t.config).map(([name, conf]) => [
    name, conf.shards.map((s) => ({ primary: s.primary_replica, replicas: [...s.replicas].sort(), nonvoting: [...(s.nonvoting_replicas ?? [])].sort() })),
  ]));
}

// Sets a layout by hand, through the driver (no manager involved), and waits until it acts: every acting primary the
// configured one, every replica ready. What a real test starts from, so that it can run alone and does not depend on
// what the tests before it left.
export async function setLayout(cluster, layout) {
  await cluster.withConnection(async (c) => {
    for (const [name, shards] of Object.entries(layout)) {
      const [db, table] = name.split('.');
      await r.db(db).table(table).config().update({
        shards: shards.map((s) => ({ primary_replica: s.primary, replicas: s.replicas, nonvoting_replicas: s.nonvoting ?? [] })),
      }).run(c);
    }
    for (const name of Object.keys(layout)) {
      const [db, table] = name.split('.');
      await r.db(db).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
    }
  });
  return eventually(() => settled(cluster), { what: 'the layout the test starts from to act' });
}

export { eventually } from './harness.js';
