// Where a replica migration's latency comes from (issue 17, IV-B5: the migration ran at p99 33-56x steady).
// One run of the evaluation's lab (bench/evaluate/lab-run.js: 4 servers in 0.5-core CPU nodes, the hot one on a CPU
// of its own, clients through a rethinkdb proxy, YCSB-A at --rate): at t=10 the noisy neighbour starts on
// rethinkdb_1 (unless --quiet), at t=12 the manager demotes its primaries, at t=20 it migrates its replicas off
// (POST /v1/actions/migrate-replicas-off), and this script polls the operation every 50 ms to time each step's
// phases: the staging write, the backfill, the finalizing write and the wait for the shard to settle. It prints
// the p99 and the failures of the ops due in each kind of phase, and in the seconds before the migration; for each
// step, each node's CPU use and CFS throttling, and for each backfill the ops split by their shard's primary.
//
//   node bench/experiments/migration-phases.js [--quiet] [--keys 20000] [--rate 200] [--cores 0.5] [--isolate 1]
//
// --isolate N: the server whose node gets a CPU of its own, and whose shard the layout makes the busiest (the
// evaluation's hot server; the replicas migrated are rethinkdb_1's whatever N is).

import { parseArgs } from 'node:util';
import r from 'rethinkdb';
import { runOnce } from '../evaluate/lab-run.js';
import { summarizeLatencies } from '../evaluate/stats.js';

const { values } = parseArgs({
  options: {
    quiet: { type: 'boolean', default: false }, keys: { type: 'string', default: '20000' }, rate: { type: 'string', default: '200' },
    duration: { type: 'string', default: '60' }, cores: { type: 'string', default: '0.5' },
    isolate: { type: 'string', default: '1' },
  },
});
const HOT = 1;
const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });

const phases = [];
const shardOfKey = new Map();
const primaryOfShard = [];
const scenario = {
  name: 'migration-phases',
  durationSeconds: Number(values.duration),
  coresPerNode: Number(values.cores),
  entry: 'proxy',
  managerEnv: { MONITOR_ENABLED: 'false' },
  async timeline({ cluster, manager, at, mark }) {
    const hot = cluster.servers[HOT].name;
    await at(10);
    if (!values.quiet) cluster.cpu.startNoise(HOT, { processes: 2 });
    mark('interference on');
    await at(12);
    const demoted = await manager.hook('POST', '/v1/actions/move-primaries-from-server', { server: hot });
    mark(`demoted (${demoted.status})`);
    // Which shard each key is in, and each shard's primary after the demotion (a replica move changes neither).
    const keys = Array.from({ length: Number(values.keys) }, (_, i) => `user${i}`);
    const shards = await cluster.shardOfKeys('ycsb', 'usertable', keys);
    keys.forEach((key, i) => shardOfKey.set(key, shards[i]));
    const config = await cluster.withConnection((c) => r.db('ycsb').table('usertable').config().run(c));
    primaryOfShard.push(...config.shards.map((sh) => sh.primary_replica));
    await at(20);
    mark('migration asked');
    const started = await manager.hook('POST', '/v1/actions/migrate-replicas-off', { server: hot });
    const href = started.body?.operation?.href ?? (started.body?.operation?.id ? `/v1/operations/${started.body.operation.id}` : null);
    if (!href) throw new Error(`migration not started: ${started.status} ${JSON.stringify(started.body).slice(0, 300)}`);
    // Each step's status as polled: a phase per (step, status), from its first sighting to the next status's.
    // With each sighting, every node's CPU time and CFS throttling so far.
    const open = new Map();
    const nodes = cluster.servers.map((_, i) => i);
    for (;;) {
      const { body: op } = await manager.hook('GET', href);
      const now = performance.now();
      const cpu = nodes.map((i) => ({ ...cluster.cpu.usage(i), ...cluster.cpu.throttling(i) }));
      for (const [i, step] of (op.steps ?? []).entries()) {
        const seen = open.get(i);
        if (seen?.status === step.status) continue;
        if (seen) phases.push({ step: i, status: seen.status, fromMs: seen.at, toMs: now, cpuFrom: seen.cpu, cpuTo: cpu, from: step.from, to: step.to });
        open.set(i, { status: step.status, at: now, cpu });
      }
      if (op.status !== 'running') break;
      await sleep(50);
    }
    mark('migration done');
  },
};

const run = await runOnce(scenario, 'manager', {
  network: 'netns', rate: Number(values.rate), keyCount: Number(values.keys), seed: 1, nodeCpus: 'isolated', hotServer: Number(values.isolate),
  log: (fields, msg) => process.stderr.write(`${msg} ${JSON.stringify(fields)}\n`),
});
const t = (ms) => (ms - run.t0) / 1000;
const event = (label) => run.events.find((e) => e.label.startsWith(label))?.t ?? null;
// The ops due in [from, to) seconds.
const opsIn = (from, to) => run.records.filter((rec) => { const s = t(rec.startMs); return s >= from && s < to; });
const summary = (records) => {
  const lat = summarizeLatencies(records.filter((rec) => rec.ok).map((rec) => rec.endMs - rec.startMs));
  return { ops: records.length, failed: records.filter((rec) => !rec.ok).length, p50: lat.p50, p99: lat.p99, max: lat.max };
};
const fmt = (s) => `${String(s.ops).padStart(5)} ops, ${String(s.failed).padStart(3)} failed, p50 ${s.p50?.toFixed(1)} ms, p99 ${s.p99?.toFixed(1)} ms, max ${s.max?.toFixed(1)} ms`;

const migrationFrom = event('migration asked');
const migrationTo = event('migration done');
process.stdout.write(`migration-phases: ${values.quiet ? 'no interference' : 'interference on rethinkdb_1 from t=10'}, ${values.keys} keys, ${values.rate} ops/s, nodes of ${values.cores} cores, rethinkdb_${values.isolate} on a CPU of its own\n`);
process.stdout.write(`steady (t=2-10):                ${fmt(summary(opsIn(2, 10)))}\n`);
process.stdout.write(`after the demotion (t=15-20):   ${fmt(summary(opsIn(15, 20)))}\n`);
process.stdout.write(`the migration (t=${migrationFrom?.toFixed(1)}-${migrationTo?.toFixed(1)}): ${fmt(summary(opsIn(migrationFrom, migrationTo)))}\n`);
process.stdout.write(`after it (to t=${scenario.durationSeconds - 1}):            ${fmt(summary(opsIn(migrationTo + 1, scenario.durationSeconds - 1)))}\n`);
for (const status of ['staging', 'backfilling', 'finalizing']) {
  const these = phases.filter((p) => p.status === status);
  const records = these.flatMap((p) => opsIn(t(p.fromMs), t(p.toMs)));
  const lengths = these.map((p) => ((p.toMs - p.fromMs) / 1000).toFixed(2));
  process.stdout.write(`${status.padEnd(12)} ${these.length} phases (${lengths.join(', ')} s): ${fmt(summary(records))}\n`);
}
// Per step, in order: when each phase began (seconds since t0) and the p99 of its ops.
// With each node's CPU use in cores and the share of the time its quota left it throttled.
for (const p of phases.filter((ph) => ph.status !== 'pending')) {
  const s = summary(opsIn(t(p.fromMs), t(p.toMs)));
  const seconds = (p.toMs - p.fromMs) / 1000;
  const nodes = p.cpuTo.map((to, i) => {
    const from = p.cpuFrom[i];
    return `${i}: ${((to.nodeNs - from.nodeNs) / 1e9 / seconds).toFixed(2)} cores, throttled ${((to.throttledNs - from.throttledNs) / 1e9 / seconds * 100).toFixed(0)}%`;
  });
  process.stdout.write(`  step ${p.step} ${p.from}->${p.to} ${p.status.padEnd(12)} t=${t(p.fromMs).toFixed(2)}-${t(p.toMs).toFixed(2)}: ${fmt(s)}; ${nodes.join(' | ')}\n`);
  if (p.status !== 'backfilling') continue;
  // The same ops by the server that is their shard's primary: is it the backfill's target that slows, or every server?
  const byPrimary = new Map();
  for (const rec of opsIn(t(p.fromMs), t(p.toMs))) {
    const primary = primaryOfShard[shardOfKey.get(rec.key)] ?? '?';
    if (!byPrimary.has(primary)) byPrimary.set(primary, []);
    byPrimary.get(primary).push(rec);
  }
  for (const [primary, records] of [...byPrimary].sort()) {
    const kinds = ['read', 'update'].map((kind) => `${kind}s p50 ${summary(records.filter((rec) => rec.kind === kind)).p50?.toFixed(1)} p99 ${summary(records.filter((rec) => rec.kind === kind)).p99?.toFixed(1)} ms`);
    process.stdout.write(`      ops whose primary is ${primary}${primary === p.to ? ' (the target)' : ''}: ${fmt(summary(records))}; ${kinds.join(', ')}\n`);
  }
}
process.stdout.write(`primaries after the demotion: ${primaryOfShard.join(', ')}\n`);
