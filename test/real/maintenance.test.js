// Node maintenance on real RethinkDB 2.4 servers (the lab's Kubernetes port: pod rethinkdb-i on node-i): a cordon
// drains the node's server and its uncordon gives primaries back, read through the driver; an eviction review is
// answered allowed only once the new primaries act (table_status), the tables stay writable when the server then
// stops, and the next eviction of a server sharing shards is refused while that one is away.
// The time each answer took is printed, not asserted. The tests share one cluster, but each starts from the same
// state (every server running, no node cordoned, no server marked, the tables as created), so any can run alone.

import { jest } from '@jest/globals';
import { createLabKube } from '../lab/lab-kube.js';
import request from 'supertest';
import {
  actingOf, allPrimaries, createRealManager, eventually, primariesOf, readLayout, readTables, releaseDraining, setLayout, settled, startRealCluster,
  waitConnected,
} from '../helpers/real-cluster.js';
import { evictionReview, postReview } from '../helpers/harness.js';

jest.setTimeout(120000);

let cluster;
let kube;
let m;
let watch;
// The layout the tables were created with.
let created;

beforeAll(async () => {
  cluster = await startRealCluster();
  kube = createLabKube(cluster);
  // Connected through rethinkdb_0, which these tests never stop.
  m = createRealManager(cluster, { via: 0, kube });
  await waitConnected(m);
  watch = m.watchNodes();
  created = await readLayout(cluster);
}, 120000);

// Every server running, no node cordoned, no server marked, the tables as created.
beforeEach(async () => {
  for (const node of ['node-0', 'node-1', 'node-2', 'node-3']) kube.setNodeUnschedulable(node, false);
  for (const s of cluster.servers) if (!cluster.running(s.index)) await cluster.restartServer(s.index);
  await cluster.waitForServers(cluster.servers.length);
  const connected = async () => (await request(m.app).get('/v1/cluster')).body.servers?.filter((x) => x.connected).length === cluster.servers.length;
  await eventually(connected, { what: 'every server connected, as the manager sees it' });
  // What an eviction review marked is released here (a cordon's drain ends with its test's uncordon).
  await releaseDraining(m);
  await setLayout(cluster, created);
  expect(await readLayout(cluster)).toEqual(created);
  expect(await m.marks.list()).toEqual([]);
}, 120000);

// rethinkdb-2's eviction reviewed (allowed once its primaries act elsewhere), and the server then stopped.
async function evictRethinkdb2() {
  const startedAt = Date.now();
  const res = await review('rethinkdb-2');
  const answeredMs = Date.now() - startedAt;
  expect(res.body.response).toEqual({ uid: 'uid-rethinkdb-2', allowed: true });
  // Read right after the answer: the new primaries act already.
  const t = await readTables(cluster);
  expect(allPrimaries(t)).not.toContain('rethinkdb_2');
  expect(actingAll(t)).not.toContain('rethinkdb_2');
  await cluster.stopServer(2, 'SIGTERM');
  return answeredMs;
}

afterAll(async () => {
  await watch?.stop();
  await m?.close();
  await cluster?.destroy();
});

const review = (pod) => postReview(m.webhookApp, evictionReview({ pod }));
const actingAll = (t) => [...actingOf(t), ...actingOf(t, 'ycsb.accounts')].flat();

describe('node maintenance on a real RethinkDB cluster', () => {
  test('when node-1 is cordoned, then rethinkdb_1 holds and acts for no primary; uncordoned, it gets primaries back', async () => {
    expect(allPrimaries(await readTables(cluster))).toContain('rethinkdb_1');
    const startedAt = Date.now();
    kube.setNodeUnschedulable('node-1', true);
    await eventually(() => m.audit.list().find((r) => r.action === 'drain-node'), { what: 'the drain-node record' });
    const drained = Date.now() - startedAt;
    const t = await readTables(cluster);
    expect(allPrimaries(t)).not.toContain('rethinkdb_1');
    expect(actingAll(t)).not.toContain('rethinkdb_1');
    expect(m.audit.list().find((r) => r.action === 'drain-node')).toMatchObject({ outcome: 'completed', target: { node: 'node-1', server: 'rethinkdb_1' } });

    kube.setNodeUnschedulable('node-1', false);
    await eventually(() => m.audit.list()[0].action === 'end-node-drain', { what: 'the end-node-drain record' });
    const back = await eventually(() => settled(cluster), { what: 'primaries acting where configured' });
    expect(allPrimaries(back)).toContain('rethinkdb_1');
    process.stdout.write(`real cordon: node-1's primaries off and acting elsewhere ${drained} ms after the cordon was seen\n`);
  });

  test('when rethinkdb-2\'s eviction is reviewed, then it is allowed only once its primaries act elsewhere, and the tables stay writable as it stops', async () => {
    const answeredMs = await evictRethinkdb2();
    for (let i = 0; i < 15; i += 1) {
      const now = await readTables(cluster);
      for (const [name, s] of Object.entries(now.status)) expect({ name, writable: s.status.ready_for_writes }).toEqual({ name, writable: true });
      await new Promise((resolve) => { setTimeout(resolve, 200); });
    }
    process.stdout.write(`real eviction review: allowed after ${answeredMs} ms (primaries moved and acting)\n`);
  });

  test('when rethinkdb-3\'s eviction is reviewed while rethinkdb_2 is away, then it is refused (429) and nothing changes', async () => {
    await evictRethinkdb2();
    const before = primariesOf(await readTables(cluster));
    const res = await review('rethinkdb-3');
    expect(res.body.response).toMatchObject({ allowed: false, status: { code: 429 } });
    expect(res.body.response.status.message).toMatch(/^rethinkdb-k8s-manager: evicting pod rethinkdb-3 now is not safe, retry later: ycsb\.\w+\[\d\] would lose its majority: besides rethinkdb_3, rethinkdb_2 \((disconnected|leaving: its pod is stopping or being evicted)\)/);
    expect(primariesOf(await readTables(cluster))).toEqual(before);
    expect((await m.marks.list()).map((d) => d.serverName)).toEqual(['rethinkdb_2']);
  });
});
