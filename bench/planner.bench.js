// Times the pure planner on a synthetic cluster of 1,000 tables x 32 shards x 3 replicas over 100 servers
// and prints the time per plan. Run: npm run bench  (BENCH_RUNS=N to change the repetitions)

import { performance } from 'node:perf_hooks';
import { planMovePrimariesFromServers, planRebalancePrimaries } from '../src/planner/primary-planner.js';
import { planAddServer, planMigrateReplicasOff } from '../src/planner/replica-planner.js';
import { checkTransition } from '../src/planner/safety.js';

const TABLES = 1000;
const SHARDS = 32;
const REPLICAS = 3;
const SERVERS = 100;
const RUNS = Number(process.env.BENCH_RUNS ?? 5);

function syntheticCluster({ servers = SERVERS, extraServer = false } = {}) {
  const ids = Array.from({ length: servers }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
  const all = extraServer ? [...ids, 'new-server'] : ids;
  const tables = [];
  const random = seededRandom(42);
  let cursor = 0;
  for (let t = 0; t < TABLES; t += 1) {
    const shards = [];
    for (let s = 0; s < SHARDS; s += 1) {
      // primary round-robin (even primaries), other replicas at varied offsets, as RethinkDB's placement varies
      const replicas = [ids[cursor % servers]];
      while (replicas.length < REPLICAS) {
        const candidate = ids[Math.floor(random() * servers)];
        if (!replicas.includes(candidate)) replicas.push(candidate);
      }
      cursor += 1;
      shards.push({ index: s, primary: replicas[0], replicas, nonvoting: [], acting: [replicas[0]], states: Object.fromEntries(replicas.map((id) => [id, 'ready'])) });
    }
    tables.push({ id: `table-${t}`, db: 'bench', name: `t${String(t).padStart(4, '0')}`, shards, readyForWrites: true, readyForReads: true, allReplicasReady: true });
  }
  return {
    servers: all.map((id, i) => ({ id, name: `server_${String(i).padStart(3, '0')}`, connected: true, tags: [], hostname: null, canonicalAddresses: [] })),
    tables,
    backfills: [],
  };
}

// mulberry32: a small seeded generator, so every run plans the same cluster.
function seededRandom(seed) {
  let a = seed;
  return () => {
    a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function time(label, fn) {
  fn();
  const samples = [];
  let result;
  for (let i = 0; i < RUNS; i += 1) {
    const start = performance.now();
    result = fn();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  const median = samples[Math.floor(samples.length / 2)];
  console.log(`${label.padEnd(46)} median ${median.toFixed(1).padStart(8)} ms   min ${samples[0].toFixed(1).padStart(8)} ms   max ${samples.at(-1).toFixed(1).padStart(8)} ms   ${describe(result)}`);
  return result;
}

function describe(plan) {
  if (plan.changes) return `${plan.changes.length} tables, ${plan.changes.reduce((n, c) => n + c.moves.length, 0)} moves, ${plan.skipped.length} skipped`;
  if (plan.moves) return `${plan.moves.length} replica moves, ${plan.skipped.length} skipped`;
  return '';
}

const cluster = syntheticCluster();
const withNew = syntheticCluster({ extraServer: true });
const victim = cluster.servers[17].id;
console.log(`planner benchmark: ${TABLES} tables x ${SHARDS} shards x ${REPLICAS} replicas over ${SERVERS} servers (${TABLES * SHARDS} shards), ${RUNS} runs each, node ${process.version}`);
const drain = time('planMovePrimariesFromServers (one server)', () => planMovePrimariesFromServers(cluster, [victim]));
time('planRebalancePrimaries (already even)', () => planRebalancePrimaries(cluster));
time('planRebalancePrimaries (one server drained)', () => planRebalancePrimaries(cluster, { draining: [victim] }));
time('planMigrateReplicasOff (one server)', () => planMigrateReplicasOff(cluster, victim));
time('planAddServer (101st server)', () => planAddServer(withNew, 'new-server'));
time('checkTransition (every table of the drain plan)', () => {
  for (const change of drain.changes) checkTransition(cluster, cluster.tables.find((t) => t.id === change.tableId), change.shards);
  return {};
});
const { heapUsed } = process.memoryUsage();
console.log(`heap used after the runs: ${(heapUsed / 1024 / 1024).toFixed(1)} MiB`);
