// Experiment (not in npm test): how a table's Raft leadership leaves a server made nonvoting in every shard, on real
// 2.4.4 servers in network namespaces with CPU nodes. Usage (root): node bench/experiments/raft-step-down.js [quiet|noise] [cores] [gapMs]
// Each of 3 rounds pins the leadership on rethinkdb_1, makes it nonvoting, waits gapMs, gives the vote back, and
// prints when another server leads, how long the give-back write took, and failed writes of a light write loop.
// With a long gapMs (40000), leaderAtRestore shows whether the leader stepped down while it was nonvoting.
import r from 'rethinkdb';
import { createRethinkDbCluster, resolveBinary } from '../../test/lab/rethinkdb-cluster.js';
import { pinRaftLeader, raftLeaderOn } from '../../test/lab/raft-leader.js';

const noise = process.argv[2] === 'noise';
const cores = Number(process.argv[3] ?? 0.5);
const cluster = createRethinkDbCluster({ binary: resolveBinary(), size: 4, network: process.env.NET ?? 'netns', coresPerNode: cores, labIndex: 3 });
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));
try {
  await cluster.start();
  await cluster.createTables([{ db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 }]);
  const names = cluster.servers.map((s) => s.name);
  // rethinkdb_1 replica of every shard, primary of none.
  const shards = [0, 2, 3, 0].map((p, i) => ({ primary_replica: names[p], replicas: [...new Set([names[p], 'rethinkdb_1', names[[2, 3, 0, 2][i]]])], nonvoting_replicas: [] }));
  console.log(JSON.stringify(await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: 'rethinkdb_1', shards })));
  const c = await cluster.connect(0);
  let stop = false; let writes = 0; let errs = 0;
  (async () => { while (!stop) { await r.db('ycsb').table('usertable').get(`user${Math.floor(Math.random() * 2000)}`).update({ f: r.now() }).run(c).then(() => writes++, () => errs++); await sleep(10); } })();
  if (noise) { cluster.cpu.startNoise(1, { processes: 2 }); await sleep(5000); }
  const gap = Number(process.argv[4] ?? 1000);
  for (let round = 0; round < 3; round += 1) {
    if (round > 0) { console.log(JSON.stringify(await pinRaftLeader(cluster, { db: 'ycsb', table: 'usertable', server: 'rethinkdb_1', shards }))); await sleep(2000); }
    writes = 0; errs = 0;
    const flipped = shards.map((s) => ({ ...s, nonvoting_replicas: ['rethinkdb_1'] }));
    const t0 = performance.now();
    await r.db('ycsb').table('usertable').config().update({ shards: flipped }).run(c);
    const wrote = performance.now() - t0;
    await sleep(gap);
    const leaderAtRestore = await raftLeaderOn(c, 'ycsb', 'usertable').catch(() => 'err');
    const t1 = performance.now();
    await r.db('ycsb').table('usertable').config().update({ shards }).run(c);
    const restoreMs = Math.round(performance.now() - t1);
    let leader = 'rethinkdb_1';
    while ((leader === 'rethinkdb_1' || leader === null) && performance.now() - t1 < 30000) { await sleep(100); leader = await raftLeaderOn(c, 'ycsb', 'usertable').catch(() => 'err'); }
    const moved = performance.now() - t1;
    await sleep(3000);
    console.log(JSON.stringify({ noise, cores, gap, round, writeMs: Math.round(wrote), leaderAtRestore, leader, movedAfterRestoreMs: Math.round(moved), restoreMs, stillLeader: await raftLeaderOn(c, 'ycsb', 'usertable'), writes, errs }));
  }
  stop = true;
  c.close();
} finally {
  cluster.cpu?.stopNoise?.(1);
  await cluster.destroy();
}
