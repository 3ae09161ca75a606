// The latency trigger on real RethinkDB 2.4.4 servers: the disk probes' tables made, placed on their servers alone,
// left out of everything the manager reads, and dropped once their server is gone; and a neighbour that saturates one
// server's disk (its write operations held to 50 a second, shared with a dd writing with O_DSYNC) found by the disk
// probe alone, the server's primaries moved off, and the warning ended once the neighbour stops.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import { createDiskNodes, diskNodesAvailable, processTree } from '../lab/disk-nodes.js';
import {
  createRealManager, eventually, primariesOf, readTables, realLab, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

const lab = realLab();
const probeTables = (cluster) => cluster.withConnection((c) => r.db('rethinkdb').table('table_config').filter({ db: 'rethinkdb_manager' })
  .pluck('name', 'shards').coerceTo('array').run(c));
const latencyView = (m) => m.latencyTrigger.view();

test('when the trigger runs with its disk probe, then each server gets its own table on it alone, no cluster read shows them, and a server gone for LOSS_RESTORE_AFTER_SECONDS loses its table', async () => {
  lab.cluster = await startRealCluster({ size: 3 });
  lab.manager = createRealManager(lab.cluster, {
    env: {
      LATENCY_TRIGGER_ENABLED: 'true', LATENCY_WINDOW_MS: '300', LATENCY_DISK_PROBE_INTERVAL_MS: '100', LOSS_RESTORE_AFTER_SECONDS: '5',
    },
  });
  await waitConnected(lab.manager);
  const placed = await eventually(async () => {
    const tables = await probeTables(lab.cluster);
    return tables.length === 3 && tables.every((t) => t.shards?.length === 1 && t.shards[0].replicas.length === 1
      && t.shards[0].replicas[0] === t.name.replace('disk_probe_', '') && t.shards[0].primary_replica === t.shards[0].replicas[0]) ? tables : null;
  }, { timeoutMs: 20000 });
  expect(placed.map((t) => t.name).sort()).toEqual(['disk_probe_rethinkdb_0', 'disk_probe_rethinkdb_1', 'disk_probe_rethinkdb_2']);
  const cluster = await lab.manager.store.readCluster({ backfills: true });
  expect(cluster.tables.map((t) => t.db)).not.toContain('rethinkdb_manager');
  // The disk probes answer: each server has disk times in a window.
  await eventually(() => latencyView(lab.manager).servers.filter((s) => s.signal === 'disk' && s.p90Ms !== null).length === 3, { timeoutMs: 10000 });

  await lab.cluster.stopServer(2);
  const dropped = await eventually(async () => {
    const tables = await probeTables(lab.cluster);
    return tables.every((t) => t.name !== 'disk_probe_rethinkdb_2') ? tables : null;
  }, { timeoutMs: 30000 });
  expect(dropped.map((t) => t.name).sort()).toEqual(['disk_probe_rethinkdb_0', 'disk_probe_rethinkdb_1']);
  expect(lab.manager.logs.some((l) => l.msg === 'dropping a disk probe table' && l.table === 'rethinkdb_manager.disk_probe_rethinkdb_2')).toBe(true);
  expect((await lab.manager.store.readCluster()).tables.map((t) => t.db)).not.toContain('rethinkdb_manager');
});

(diskNodesAvailable() ? test : test.skip)('when a neighbour saturates one server\'s disk, then the trigger raises a PERFWARNING on its pod from the disk probe, its primaries move off, and the warning ends after the neighbour stops', async () => {
  lab.cluster = await startRealCluster({ size: 4 });
  lab.manager = createRealManager(lab.cluster, {
    env: { LATENCY_TRIGGER_ENABLED: 'true', LATENCY_WARMUP_WINDOWS: '5', LATENCY_CLEAR_COOLDOWN_SECONDS: '3' },
  });
  await waitConnected(lab.manager);
  // Every server's disk baseline learned, and nothing holding the trigger back, before the neighbour starts.
  await eventually(() => {
    const view = latencyView(lab.manager);
    const disks = view.servers.filter((x) => x.signal === 'disk');
    return view.windows >= 7 && disks.length === 4 && disks.every((x) => x.baselineMs !== null) && view.held === null;
  }, { timeoutMs: 60000, what: 'the disk baselines learned' });
  const hot = 1;
  expect(primariesOf(await readTables(lab.cluster))).toContain('rethinkdb_1');
  const disk = createDiskNodes({ name: `rethinkdb-test-disk-${process.pid}` });
  try {
    // 50 write operations a second: well past the threshold even when other suites' servers share the machine's disk.
    disk.throttle(hot, { pids: processTree(lab.cluster.pidOf(hot)), directory: lab.cluster.servers[hot].dir, writeIops: 50 });
    // On a time-out, the trigger's view then says why (the values, the baselines, what held it).
    const raised = await eventually(() => latencyView(lab.manager).lastDecisions.find((d) => d.type === 'raise'), { timeoutMs: 60000, what: 'a raise' })
      .catch((err) => { throw new Error(`${err.message}; the trigger's view: ${JSON.stringify(latencyView(lab.manager)).slice(0, 3000)}`); });
    expect(raised).toMatchObject({ pod: 'rethinkdb-1', evidence: { signal: 'disk' }, result: { event: 'PERFWARNING' } });
    expect(raised.evidence.p90Ms).toBeGreaterThanOrEqual(4 * raised.evidence.baselineMs);
    expect(primariesOf(await readTables(lab.cluster))).not.toContain('rethinkdb_1');
    // The reply probe did not see it: r.expr(1) needs no disk.
    const reply = latencyView(lab.manager).servers.find((s) => s.server === 'rethinkdb_1' && s.signal === 'reply');
    expect(reply.anomalous).toBe(false);
  } finally {
    await disk.destroy();
  }
  const cleared = await eventually(() => latencyView(lab.manager).lastDecisions.find((d) => d.type === 'clear'), { timeoutMs: 60000 });
  expect(cleared).toMatchObject({ pod: 'rethinkdb-1', result: { event: 'PERFWARNING_END', ended: true } });
});
