// Times the pure planner on a synthetic cluster of 1,000 tables x 32 shards x 3 replicas over 100 servers
// and prints the time and the bytes allocated per plan. Run: npm run bench  (BENCH_RUNS=N to change the repetitions)
// Allocation is read as the heap growth over a run, so the bench re-runs itself with gc() exposed (the young
// generation emptied before each run) and a young generation large enough that a plan's garbage stays put; a run
// during which the collector ran anyway is counted and its figure flagged.

import { spawnSync } from 'node:child_process';
import { PerformanceObserver, performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { planMovePrimariesFromServers, planRebalancePrimaries } from '../src/planner/primary-planner.js';
import { planAddServer, planMigrateReplicasOff } from '../src/planner/replica-planner.js';
import { checkTransition } from '../src/planner/safety.js';

const TABLES = 1000;
const SHARDS = 32;
const REPLICAS = 3;
const SERVERS = 100;
const RUNS = Number(process.env.BENCH_RUNS ?? 5);
// Enough for the optimizing compiler to be done: interpreted code allocates what optimized code does not.
const WARMUP_RUNS = 5;
const SEMI_SPACE_MB = 256;
const NODE_FLAGS = ['--expose-gc', `--min-semi-space-size=${SEMI_SPACE_MB}`, `--max-semi-space-size=${SEMI_SPACE_MB}`];

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

// Collections that started between two performance.now() readings. Node delivers 'gc' entries a couple of event
// loop turns after the collection, so they are read after the runs.
const gcStarts = [];
const gcObserver = new PerformanceObserver((list) => gcStarts.push(...list.getEntries().map((e) => e.startTime)));

async function time(label, fn) {
  for (let i = 0; i < WARMUP_RUNS; i += 1) fn();
  const runs = [];
  let result;
  for (let i = 0; i < RUNS; i += 1) {
    result = null;
    // A young-generation collection only: a full one also drops what optimized planner code holds weakly (the last
    // plan's view closures), and the next dozen runs then go back through the interpreter.
    globalThis.gc({ type: 'minor' });
    const heapBefore = process.memoryUsage().heapUsed;
    const start = performance.now();
    result = fn();
    const end = performance.now();
    runs.push({ ms: end - start, bytes: process.memoryUsage().heapUsed - heapBefore, start, end });
  }
  await new Promise((resolve) => { setTimeout(resolve, 20); });
  for (const run of runs) run.gcs = gcStarts.filter((t) => t >= run.start && t <= run.end).length;
  const ms = runs.map((r) => r.ms).sort((a, b) => a - b);
  console.log(`${label.padEnd(48)} median ${ms[Math.floor(ms.length / 2)].toFixed(1).padStart(6)} ms   min ${ms[0].toFixed(1).padStart(6)} ms   max ${ms.at(-1).toFixed(1).padStart(6)} ms   ${describeAllocation(runs)}   ${describe(result)}`);
  return result;
}

// Bytes per run from the runs no collection disturbed (a collection frees part of what the run allocated).
function describeAllocation(runs) {
  const clean = runs.filter((r) => r.gcs === 0).map((r) => r.bytes).sort((a, b) => a - b);
  const gcs = runs.reduce((n, r) => n + r.gcs, 0);
  const gcNote = gcs === 0 ? 'no GC' : `${gcs} GC in ${runs.length - clean.length}/${runs.length} runs`;
  if (clean.length === 0) return `alloc ${'?'.padStart(6)} MiB/run (${gcNote}: disturbed)`;
  return `alloc ${(clean[Math.floor(clean.length / 2)] / 1024 / 1024).toFixed(1).padStart(6)} MiB/run (${gcNote})`;
}

function describe(plan) {
  if (plan.changes) return `${plan.changes.length} tables, ${plan.changes.reduce((n, c) => n + c.moves.length, 0)} moves, ${plan.skipped.length} skipped`;
  if (plan.moves) return `${plan.moves.length} replica moves, ${plan.skipped.length} skipped`;
  return '';
}

async function main() {
  gcObserver.observe({ entryTypes: ['gc'] });
  const cluster = syntheticCluster();
  const withNew = syntheticCluster({ extraServer: true });
  const victim = cluster.servers[17].id;
  console.log(`planner benchmark: ${TABLES} tables x ${SHARDS} shards x ${REPLICAS} replicas over ${SERVERS} servers (${TABLES * SHARDS} shards), ${RUNS} runs each, node ${process.version} ${process.execArgv.join(' ')}`);
  const drain = await time('planMovePrimariesFromServers (one server)', () => planMovePrimariesFromServers(cluster, [victim]));
  await time('planRebalancePrimaries (already even)', () => planRebalancePrimaries(cluster));
  await time('planRebalancePrimaries (one server drained)', () => planRebalancePrimaries(cluster, { draining: [victim] }));
  await time('planMigrateReplicasOff (one server)', () => planMigrateReplicasOff(cluster, victim));
  await time('planAddServer (101st server)', () => planAddServer(withNew, 'new-server'));
  await time('checkTransition (every table of the drain plan)', () => {
    for (const change of drain.changes) checkTransition(cluster, cluster.tables.find((t) => t.id === change.tableId), change.shards);
    return {};
  });
  gcObserver.disconnect();
  const { heapUsed } = process.memoryUsage();
  console.log(`heap used after the runs: ${(heapUsed / 1024 / 1024).toFixed(1)} MiB`);
}

// `npm run bench` starts plain node: run again with the flags the allocation figures need.
function rerunWithFlags() {
  const child = spawnSync(process.execPath, [...NODE_FLAGS, ...process.execArgv, fileURLToPath(import.meta.url)], { stdio: 'inherit' });
  process.exitCode = child.status ?? 1;
}

if (typeof globalThis.gc === 'function') await main();
else rerunWithFlags();
