// Experiment (not in npm test; issue 33): where do the OP_INDETERMINATE "lost contact with primary replica" answers at a
// planned primary handover come from, and does holding a table's queries during the handover (as vtgate buffers a
// planned reparent) remove them where retrying after the error does not?
//
// 4 real servers on loopback, ycsb.usertable 4 shards x 3 replicas, a `rethinkdb proxy`, the query gate in front of it
// (gate/src/gate.js, as shipped: retries OP_FAILED). Load: LOOPS client loops through the gate, each a read then an
// update of a random document, ~RATE ops/s in all. Each round moves one shard's primary to another of its replicas
// (one table_config write), waits until table_status shows the new primary acting and every replica ready, then 1 s.
// Modes alternate round by round:
//   retry: the load runs on; the gate retries what the handover refuses (OP_FAILED).
//   hold:  before the write the loops stop sending and the ops in flight finish; they resume once the new primary
//          acts and every replica is ready (what a gate told of the handover would do).
//   narrow: as hold, but they resume once the old primary no longer acts (what the manager's hold does).
//   late:  as narrow, but the loops stop sending LATE_MS (200) after the write returned, not before it
//          (GATE_HOLD_DELAY_MS): the old primary serves them meanwhile.
// Printed per mode: failed ops by error class and op kind, the gate's retries, the slowest op.
//
// Usage (root): [CORES=0.5 [NOISE=1]] [NET=netns] node bench/experiments/handover-hold.js [rounds per mode, default 8] [loops, default 8]
//   [rate, default 200]. CORES: each server in a CPU node of that quota; NOISE=1: a noisy neighbour on the old primary's
//   node from 2 s before the write to the round's end (a hot-spot demotion).

import r from 'rethinkdb';
import pino from 'pino';
import { createRethinkDbCluster, resolveBinary } from '../../test/lab/rethinkdb-cluster.js';
import { loadGateConfig } from '../../gate/src/config.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';

const rounds = Number(process.argv[2] ?? 8);
const MODES = (process.env.MODES ?? 'retry,hold,narrow').split(',');
const LATE_MS = Number(process.env.LATE_MS ?? 200);
const LOOPS = Number(process.argv[3] ?? 8);
const RATE = Number(process.argv[4] ?? 200);
const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });
const clock = { now: () => Date.now(), sleep };
const classOf = (msg) => (/lost contact with primary/.test(msg) ? 'lost-contact' : /lost contact with the secondary/.test(msg) ? 'lost-secondaries'
  : /currently changing/.test(msg) ? 'primary-changing' : /not available/.test(msg) ? 'primary-unavailable' : /quorum/.test(msg) ? 'no-quorum' : msg.slice(0, 60));

const CORES = process.env.CORES ? Number(process.env.CORES) : null;
const NOISE = process.env.NOISE === '1';
const cluster = createRethinkDbCluster({ binary: resolveBinary(), size: 4, network: process.env.NET ?? 'loopback', coresPerNode: CORES, labIndex: 5 });
let gate;
try {
  await cluster.start();
  await cluster.createTables([{ db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 }]);
  const proxy = await cluster.addProxy();
  const metrics = createGateMetrics();
  const config = loadGateConfig({ GATE_UPSTREAM: `${proxy.host}:${proxy.driverPort}`, GATE_PORT: '0', GATE_METRICS_PORT: '0', GATE_HOST: '127.0.0.1' });
  gate = createGate({ config, metrics, clock, logger: pino({ level: 'silent' }) });
  const { port } = await gate.start();
  const admin = await cluster.connect(0);
  admin.on('error', () => {});
  const table = r.db('ycsb').table('usertable');

  let current = null; // the round being recorded: { mode, ops: [] }
  let paused = null; // a promise the loops wait on while a hold lasts
  let inFlight = 0;
  let stop = false;
  const loop = async () => {
    const c = await r.connect({ host: '127.0.0.1', port });
    c.on('error', () => {});
    const periodMs = (LOOPS * 2 * 1000) / RATE;
    while (!stop) {
      const began = performance.now();
      for (const [kind, op] of [['read', (k) => table.get(k)], ['update', (k) => table.get(k).update({ f: r.now() })]]) {
        const start = performance.now();
        while (paused) await paused;
        const key = `user${Math.floor(Math.random() * 2000)}`;
        inFlight += 1;
        const outcome = await op(key).run(c).then(() => null, (err) => err.msg ?? err.message);
        inFlight -= 1;
        current?.ops.push({ kind, ms: performance.now() - start, error: outcome });
      }
      await sleep(Math.max(0, periodMs - (performance.now() - began)));
    }
    await c.close().catch(() => {});
  };
  const loops = Array.from({ length: LOOPS }, loop);
  await sleep(2000);

  const status = async () => (await r.db('rethinkdb').table('table_status').filter({ db: 'ycsb', name: 'usertable' }).nth(0).run(admin));
  const settled = (st, shard, target) => st.shards[shard].primary_replicas.join() === target
    && st.shards.every((s) => s.replicas.every((rep) => rep.state === 'ready'));
  const results = Object.fromEntries(MODES.map((m) => [m, []]));
  for (let round = 0; round < rounds * MODES.length; round += 1) {
    const mode = MODES[round % MODES.length];
    const shards = (await r.db('rethinkdb').table('table_config').filter({ db: 'ycsb', name: 'usertable' }).nth(0).run(admin)).shards;
    const shard = Math.floor(round / MODES.length) % shards.length;
    const from = shards[shard].primary_replica;
    const target = shards[shard].replicas.find((n) => n !== from);
    const next = shards.map((s, i) => (i === shard ? { ...s, primary_replica: target } : s));
    const retriesBefore = (await metrics.registry.getSingleMetric('rethinkdb_gate_retries_total').get()).values.reduce((a, v) => a + v.value, 0);
    const fromIndex = cluster.servers.find((x) => x.name === from).index;
    if (NOISE) { cluster.cpu.startNoise(fromIndex, { processes: 2 }); await sleep(2000); }
    current = { mode, ops: [] };
    const t0 = performance.now();
    let release = null;
    let drainMs = 0;
    const pause = async () => {
      const began = performance.now();
      paused = new Promise((res) => { release = res; });
      while (inFlight > 0) await sleep(1);
      drainMs = Math.round(performance.now() - began);
    };
    if (mode === 'hold' || mode === 'narrow') await pause();
    let heldAt = performance.now();
    const writeAt = heldAt;
    await table.config().update({ shards: next }).run(admin);
    if (mode === 'late') { await sleep(LATE_MS); heldAt = performance.now(); await pause(); }
    let heldMs = 0;
    if (mode === 'narrow' || mode === 'late') {
      // Released once the old primary no longer acts for the shard (its primary execution is gone).
      while ((await status()).shards[shard].primary_replicas.includes(from) && performance.now() - t0 < 30000) await sleep(10);
      heldMs = Math.round(performance.now() - heldAt);
      const p = release; paused = null; p();
    }
    while (!settled(await status(), shard, target) && performance.now() - t0 < 30000) await sleep(20);
    const handoverMs = Math.round(performance.now() - writeAt);
    if (mode === 'hold') { heldMs = handoverMs; const p = release; paused = null; p(); }
    await sleep(1000);
    const recorded = current;
    current = null;
    if (NOISE) cluster.cpu.stopNoise(fromIndex);
    const retries = (await metrics.registry.getSingleMetric('rethinkdb_gate_retries_total').get()).values.reduce((a, v) => a + v.value, 0) - retriesBefore;
    const failed = recorded.ops.filter((o) => o.error);
    const byClass = {};
    for (const o of failed) byClass[`${o.kind}:${classOf(o.error)}`] = (byClass[`${o.kind}:${classOf(o.error)}`] ?? 0) + 1;
    const slowest = Math.round(Math.max(...recorded.ops.map((o) => o.ms)));
    const line = { round, mode, shard, from, to: target, ops: recorded.ops.length, failed: failed.length, byClass, retries, slowestMs: slowest, drainMs, heldMs, handoverMs };
    results[mode].push(line);
    process.stdout.write(`${JSON.stringify(line)}\n`);
    await sleep(500);
  }
  stop = true;
  await Promise.all(loops);
  for (const mode of MODES) {
    const rs = results[mode];
    process.stdout.write(`${mode}: failed ${rs.map((x) => x.failed).join(',')}; retries ${rs.map((x) => x.retries).join(',')}; slowest ms ${rs.map((x) => x.slowestMs).join(',')}; held ms ${rs.map((x) => x.heldMs).join(',')}; handover ms ${rs.map((x) => x.handoverMs).join(',')}\n`);
  }
} finally {
  await gate?.stop(1000).catch(() => {});
  await cluster.destroy();
}
