// The monitor on real RethinkDB servers: each server in its own CPU node (a cgroup with a CPU quota), the metrics
// read from the cgroups through the lab's Kubernetes port, as the metrics API reads cAdvisor. A noisy neighbour
// on one node makes the monitor raise PERFWARNING for that pod, whose primaries move off; once the neighbour is
// gone and the cooldown has passed, the warning ends and primaries come back. On 4 servers (so that every shard has
// a server to move a replica to), a neighbour still there PERFWARNING_LONG_SECONDS (here 3 s) after the warning
// makes the monitor escalate it: the pod's replicas migrate off with real backfills, and come back after it.
// Each test starts from the same state (no neighbour, no warning, the monitor's streaks reset, the tables as created),
// so that any can run alone.

import { jest } from '@jest/globals';
import request from 'supertest';
import { createLabKube } from '../lab/lab-kube.js';
import {
  allPrimaries, createRealManager, eventually, readLayout, readTables, setLayout, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

// The two-poll rule, not the immediate raise of a fully busy node (npm run evaluate runs that on real servers).
const MONITOR_ENV = {
  MONITOR_ENABLED: 'true', MONITOR_SCALE_OUT: 'false', MONITOR_CONSECUTIVE_POLLS: '2', MONITOR_IMMEDIATE_UTILIZATION: '0', MONITOR_CLEAR_COOLDOWN_SECONDS: '1',
};

let cluster;
let m;
// A cluster of `size` servers in CPU nodes and a manager with the monitor on, for one describe block.
function realMonitor({ size, env = {} }) {
  let created;
  beforeAll(async () => {
    cluster = await startRealCluster({ size, coresPerNode: 0.5 });
    m = createRealManager(cluster, { via: 0, kube: createLabKube(cluster), env: { ...MONITOR_ENV, ...env } });
    await waitConnected(m);
    created = await readLayout(cluster);
  }, 120000);
  // No neighbour, no warning (ended as an operator ends one), the monitor's streaks reset, the tables as created.
  beforeEach(async () => {
    await Promise.all(cluster.servers.map((s) => cluster.cpu.stopNoise(s.index)));
    for (const w of await m.marks.perfWarnings()) {
      expect((await request(m.app).delete(`/v1/hooks/perfwarning?pod=${w.pod}`)).status).toBe(200);
    }
    m.monitor.reset();
    await setLayout(cluster, created);
    expect(await readLayout(cluster)).toEqual(created);
    expect(await m.marks.perfWarnings()).toEqual([]);
  }, 120000);
  afterAll(async () => {
    await m?.close();
    await cluster?.destroy();
  });
}

const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });

// One poll after a second of measurement (the metrics are CPU used since the previous poll).
async function poll() {
  await sleep(1000);
  return m.monitor.pollOnce();
}

// A noisy neighbour saturates rethinkdb-1's node from a first poll on; the two polls after it.
async function saturateRethinkdb1() {
  await m.monitor.pollOnce();
  cluster.cpu.startNoise(1, { processes: 2 });
  const first = await poll();
  const second = await poll();
  return { first, second };
}

describe('the monitor on a real cluster with CPU nodes', () => {
  realMonitor({ size: 3 });

  test('when a noisy neighbour saturates rethinkdb-1\'s node, then the monitor raises PERFWARNING for that pod after two polls and its primaries move off', async () => {
    expect(allPrimaries(await readTables(cluster))).toContain('rethinkdb_1');
    const { first, second } = await saturateRethinkdb1();
    const hot = first.evaluation.samples.find((s) => s.pod === 'rethinkdb-1');
    expect(hot.interference).toBeGreaterThan(0.8);
    expect(first.evaluation.hot.map((h) => h.pod)).toEqual(['rethinkdb-1']);
    expect(first.decisions).toEqual([]);
    expect(second.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-1', signal: 'interference' })]);
    const t = await readTables(cluster);
    expect(allPrimaries(t)).not.toContain('rethinkdb_1');
    expect(await m.marks.perfWarnings()).toEqual([expect.objectContaining({ pod: 'rethinkdb-1', source: 'monitor' })]);
  });

  test('when the neighbour is gone and the cooldown has passed, then the monitor ends the warning and rethinkdb-1 gets primaries back', async () => {
    // The warning raised, as the test above checks in detail.
    await saturateRethinkdb1();
    expect(await m.marks.perfWarnings()).toEqual([expect.objectContaining({ pod: 'rethinkdb-1', source: 'monitor' })]);
    await cluster.cpu.stopNoise(1);
    // The first poll's window may still hold some of the noise (the raise, with its Raft leadership move, can take
    // seconds on a loaded machine), so the clear is looked for over a few polls, not at an exact one.
    let cleared = null;
    for (let i = 0; i < 6 && !cleared?.decisions.length; i += 1) cleared = await poll();
    expect(cleared.decisions).toEqual([expect.objectContaining({ type: 'clear', pod: 'rethinkdb-1' })]);
    expect(await m.marks.perfWarnings()).toEqual([]);
    await eventually(async () => allPrimaries(await readTables(cluster)).includes('rethinkdb_1'), { what: 'a primary back on rethinkdb_1' });
  });
});

// The shards (table[index]) that list `server` as a replica, voting or not.
const holdingShards = (t, server) => Object.keys(t.config).flatMap((name) => t.config[name].shards
  .map((s, i) => ((s.replicas.includes(server) || (s.nonvoting_replicas ?? []).includes(server)) ? `${name}[${i}]` : null)).filter(Boolean));

describe('the monitor escalates a long hot-spot on real servers', () => {
  realMonitor({ size: 4, env: { PERFWARNING_LONG_SECONDS: '3' } });

  test('when rethinkdb-1 stays hot PERFWARNING_LONG_SECONDS after the warning, then the monitor escalates it once and its replicas migrate off; when the neighbour is gone, replicas come back', async () => {
    expect(holdingShards(await readTables(cluster), 'rethinkdb_1').length).toBeGreaterThan(0);
    await m.monitor.pollOnce();
    cluster.cpu.startNoise(1, { processes: 2 });
    const decisions = [];
    for (let i = 0; i < 12 && !decisions.some((d) => d.type === 'escalate'); i += 1) decisions.push(...(await poll()).decisions ?? []);
    expect(decisions.map((d) => `${d.type} ${d.pod}`)).toEqual(['raise rethinkdb-1', 'escalate rethinkdb-1']);
    const escalation = decisions.at(-1);
    expect(escalation.result).toMatchObject({ event: 'PERFWARNING_ESCALATION', escalated: true, migration: { id: expect.any(String) } });
    expect(escalation.heldSeconds).toBeGreaterThanOrEqual(3);
    const op = await eventually(() => { const o = m.operations.get(escalation.result.migration.id); return o?.status !== 'running' && o; }, { timeoutMs: 60000, what: 'the migration to end' });
    expect({ status: op.status, notDone: op.report?.notDone }).toEqual({ status: 'succeeded', notDone: [] });
    const t = await readTables(cluster);
    expect(holdingShards(t, 'rethinkdb_1')).toEqual([]);
    // The starved server drops its copies after the change: every table ready again once it has.
    await eventually(async () => { const now = await readTables(cluster); return Object.values(now.status).every((st) => st.status.all_replicas_ready); }, { timeoutMs: 30000, what: 'every replica ready' });
    expect(await m.marks.perfWarnings()).toEqual([expect.objectContaining({ pod: 'rethinkdb-1', source: 'monitor', long: true })]);
    // Still hot: no second escalation.
    expect((await poll()).decisions ?? []).toEqual([]);

    cluster.cpu.stopNoise(1);
    let cleared = null;
    for (let i = 0; i < 8 && !cleared?.decisions?.length; i += 1) cleared = await poll();
    expect(cleared.decisions).toEqual([expect.objectContaining({ type: 'clear', pod: 'rethinkdb-1' })]);
    expect(cleared.decisions[0].result.restore).toMatchObject({ action: 'add-server' });
    await eventually(async () => holdingShards(await readTables(cluster), 'rethinkdb_1').length > 0, { timeoutMs: 60000, what: 'replicas back on rethinkdb_1' });
    process.stdout.write(`monitor escalation on real servers: escalated ${escalation.heldSeconds} s after the warning; migration ${op.report?.changes?.length} replicas moved\n`);
  });
});
