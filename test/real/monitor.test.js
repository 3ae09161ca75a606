// The monitor on real RethinkDB servers: each server in its own CPU node (a cgroup with a CPU quota), the metrics
// read from the cgroups through the lab's Kubernetes port, as the metrics API reads cAdvisor. A noisy neighbour
// on one node makes the monitor raise PERFWARNING for that pod, whose primaries move off; once the neighbour is
// gone and the cooldown has passed, the warning ends and primaries come back.

import { jest } from '@jest/globals';
import { createLabKube } from '../../bench/lab/lab-kube.js';
import {
  allPrimaries, createRealManager, eventually, readTables, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(120000);

let cluster;
let m;
beforeAll(async () => {
  cluster = await startRealCluster({ size: 3, coresPerNode: 0.5 });
  m = createRealManager(cluster, {
    via: 0,
    kube: createLabKube(cluster),
    // The two-poll rule, not the immediate raise of a fully busy node (npm run evaluate runs that on real servers).
    env: {
      MONITOR_ENABLED: 'true', MONITOR_SCALE_OUT: 'false', MONITOR_CONSECUTIVE_POLLS: '2', MONITOR_IMMEDIATE_UTILIZATION: '0', MONITOR_CLEAR_COOLDOWN_SECONDS: '1',
    },
  });
  await waitConnected(m);
}, 120000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });

// One poll after a second of measurement (the metrics are CPU used since the previous poll).
async function poll() {
  await sleep(1000);
  return m.monitor.pollOnce();
}

describe('the monitor on a real cluster with CPU nodes', () => {
  test('when a noisy neighbour saturates rethinkdb-1\'s node, then the monitor raises PERFWARNING for that pod after two polls and its primaries move off', async () => {
    expect(allPrimaries(await readTables(cluster))).toContain('rethinkdb_1');
    await m.monitor.pollOnce();
    cluster.cpu.startNoise(1, { processes: 2 });
    const first = await poll();
    const hot = first.evaluation.samples.find((s) => s.pod === 'rethinkdb-1');
    expect(hot.interference).toBeGreaterThan(0.8);
    expect(first.evaluation.hot.map((h) => h.pod)).toEqual(['rethinkdb-1']);
    expect(first.decisions).toEqual([]);
    const second = await poll();
    expect(second.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-1', signal: 'interference' })]);
    const t = await readTables(cluster);
    expect(allPrimaries(t)).not.toContain('rethinkdb_1');
    expect(await m.marks.perfWarnings()).toEqual([expect.objectContaining({ pod: 'rethinkdb-1', source: 'monitor' })]);
  });

  test('when the neighbour is gone and the cooldown has passed, then the monitor ends the warning and rethinkdb-1 gets primaries back', async () => {
    cluster.cpu.stopNoise(1);
    // The first poll's window may still hold some of the noise (the raise, with its Raft leadership move, can take
    // seconds on a loaded machine), so the clear is looked for over a few polls, not at an exact one.
    let cleared = null;
    for (let i = 0; i < 6 && !cleared?.decisions.length; i += 1) cleared = await poll();
    expect(cleared.decisions).toEqual([expect.objectContaining({ type: 'clear', pod: 'rethinkdb-1' })]);
    expect(await m.marks.perfWarnings()).toEqual([]);
    await eventually(async () => allPrimaries(await readTables(cluster)).includes('rethinkdb_1'), { what: 'a primary back on rethinkdb_1' });
  });
});
