// Experiment (not in npm test): does one table_config write that demotes a starved server's primary AND makes it
// nonvoting move the table's Raft leadership off it sooner, or more cheaply, than the manager's two steps (demote and
// wait for the new primary to act; then nonvoting, RAFT_LEADER_MOVE_SETTLE_MS, vote back)? README, "Next", item 1.
// Usage (root): node bench/experiments/demote-and-flip.js [quiet|noise] [rounds per mode, default 3]
// 4 servers in 0.5-core CPU nodes (network namespaces); ycsb.usertable 4 shards x 3 replicas, 2,000 documents;
// rethinkdb_1 is a replica of every shard, the primary of shard 1 and the table's Raft leader before each round.
// Load: 4 loops from rethinkdb_0, each a read then an update of a random document every 10 ms. The modes alternate
// round by round. Printed per round: when shard 1's new primary acted, when another server led the table, the ops
// that failed and the p99 of those that did not, from the first write to 1 s after the leadership moved.
import r from 'rethinkdb';
import { createRethinkDbCluster, resolveBinary } from '../../test/lab/rethinkdb-cluster.js';
import { pinRaftLeader, raftLeaderOn } from '../../test/lab/raft-leader.js';
import { summarizeLatencies } from '../evaluate/stats.js';

const noise = process.argv[2] === 'noise';
const rounds = Number(process.argv[3] ?? 3);
const SETTLE_MS = 300;
const cluster = createRethinkDbCluster({ binary: resolveBinary(), size: 4, network: process.env.NET ?? 'netns', coresPerNode: 0.5, labIndex: 3 });
const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });
const HOT = 'rethinkdb_1';
try {
  await cluster.start();
  await cluster.createTables([{ db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 }]);
  const names = cluster.servers.map((s) => s.name);
  // rethinkdb_1 a replica of every shard and the primary of shard 1; the others one primary each.
  const pinned = [0, 1, 2, 3].map((i) => ({
    primary_replica: names[i], replicas: [...new Set([names[i], HOT, names[[2, 3, 0, 2][i]]])], nonvoting_replicas: [],
  }));
  const target = pinned[1].replicas.find((n) => n !== HOT);
  const demoted = pinned.map((s, i) => (i === 1 ? { ...s, primary_replica: target } : s));
  const flipped = demoted.map((s) => ({ ...s, nonvoting_replicas: [HOT] }));
  const c = await cluster.connect(0);
  c.on('error', () => {}); // the servers go before the connection closes
  const table = r.db('ycsb').table('usertable');
  const records = [];
  let stop = false;
  const loop = async () => {
    while (!stop) {
      for (const op of [(k) => table.get(k), (k) => table.get(k).update({ f: r.now() })]) {
        const start = performance.now();
        await op(`user${Math.floor(Math.random() * 2000)}`).run(c).then(() => records.push({ start, end: performance.now(), ok: true }), () => records.push({ start, end: performance.now(), ok: false }));
      }
      await sleep(10);
    }
  };
  const loops = [loop(), loop(), loop(), loop()];
  if (noise) { cluster.cpu.startNoise(1, { processes: 2 }); await sleep(5000); }
  const acting = async () => (await r.db('rethinkdb').table('table_status').filter({ db: 'ycsb', name: 'usertable' }).nth(0)('shards').nth(1)('primary_replicas').run(c).catch(() => []));
  const waitFor = async (check, t0) => { while (!(await check()) && performance.now() - t0 < 30000) await sleep(50); return Math.round(performance.now() - t0); };
  const results = [];
  for (let round = 0; round < rounds * 2; round += 1) {
    const mode = round % 2 === 0 ? 'two writes' : 'one write';
    await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: HOT, shards: pinned });
    await sleep(3000);
    const t0 = performance.now();
    let actedMs;
    if (mode === 'two writes') {
      await table.config().update({ shards: demoted }).run(c);
      actedMs = await waitFor(async () => (await acting()).join() === target, t0);
      await table.config().update({ shards: flipped }).run(c);
    } else {
      await table.config().update({ shards: flipped }).run(c);
      actedMs = await waitFor(async () => (await acting()).join() === target, t0);
    }
    await sleep(SETTLE_MS);
    await table.config().update({ shards: demoted }).run(c);
    const ledMs = await waitFor(async () => !['rethinkdb_1', null, 'err'].includes(await raftLeaderOn(c, 'ycsb', 'usertable').catch(() => 'err')), t0);
    await sleep(1000);
    const during = records.filter((x) => x.start >= t0 && x.start <= t0 + ledMs + 1000);
    const lat = summarizeLatencies(during.filter((x) => x.ok).map((x) => x.end - x.start));
    const row = { mode, round, actedMs, ledMs, leader: await raftLeaderOn(c, 'ycsb', 'usertable'), ops: during.length, failed: during.filter((x) => !x.ok).length, p99Ms: Math.round(lat.p99 * 10) / 10 };
    results.push(row);
    console.log(JSON.stringify(row));
  }
  stop = true;
  await Promise.all(loops);
  for (const mode of ['two writes', 'one write']) {
    const rows = results.filter((x) => x.mode === mode);
    console.log(`${mode} (${noise ? 'noise on rethinkdb_1' : 'quiet'}): led elsewhere after ${rows.map((x) => x.ledMs).join(', ')} ms; shard 1 acted after ${rows.map((x) => x.actedMs).join(', ')} ms; failed ${rows.map((x) => x.failed).join(', ')}; p99 ${rows.map((x) => x.p99Ms).join(', ')} ms`);
  }
  c.close();
} finally {
  cluster.cpu?.stopNoise?.(1);
  await cluster.destroy();
}
