// What the manager costs per event on a real RethinkDB cluster with many tables: a PRESTOP, a rebalance and a
// monitor poll, each through the manager's real entry points (HTTP routes, the official driver), with its answer
// time split into reading, planning, writing and waiting for RethinkDB (src/lib/trace.js) and the queries sent,
// and the CPU time the RethinkDB servers used meanwhile (and idle, before the PRESTOP).
// Run (root): npm run bench:scale   Env: BENCH_TABLES (1000), BENCH_SHARDS (4), BENCH_REPLICAS (3),
// BENCH_SERVERS (4), TABLE_WRITE_CONCURRENCY (8, the manager's), BENCH_CREATE_BUDGET_SECONDS (900: tables are created until then; how many is printed),
// BENCH_BUSY_TABLES (5: the last tables by name get client reads during the PRESTOP), BENCH_SERVER_ARGS (more `rethinkdb serve` arguments, e.g. "--cores 1"), RETHINKDB_BINARY (../shared/rethinkdb/rethinkdb). Creating 1,000 tables takes about 5 minutes here; restarting
// servers on such data directories took longer still (Raft elections of every table), so each run starts afresh.

import { once } from 'node:events';
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import r from 'rethinkdb';
import { traced } from '../src/lib/trace.js';
import { createLabKube } from '../test/lab/lab-kube.js';
import { cpuSecondsOf } from './lab/proc-stat.js';
import { createLabManager } from '../test/lab/lab-manager.js';
import { createRethinkDbCluster, resolveBinary } from '../test/lab/rethinkdb-cluster.js';

const TABLES = Number(process.env.BENCH_TABLES ?? 1000);
const SHARDS = Number(process.env.BENCH_SHARDS ?? 4);
const REPLICAS = Number(process.env.BENCH_REPLICAS ?? 3);
const SERVERS = Number(process.env.BENCH_SERVERS ?? 4);
const CREATE_BUDGET_MS = Number(process.env.BENCH_CREATE_BUDGET_SECONDS ?? 900) * 1000;
const CREATE_CONCURRENCY = 8;
const PRESTOP_DEADLINE_SECONDS = Number(process.env.BENCH_PRESTOP_DEADLINE_SECONDS ?? 300);
const DEFAULT_PRESTOP_DEADLINE_MS = 20000;
const WRITE_CONCURRENCY = Number(process.env.TABLE_WRITE_CONCURRENCY ?? 8);
const BUSY_TABLES = Number(process.env.BENCH_BUSY_TABLES ?? 5);
const BUSY_DOCS = 200;
const SERVER_ARGS = (process.env.BENCH_SERVER_ARGS ?? '').split(/\s+/).filter(Boolean);
const IDLE_SAMPLE_MS = 5000;
const LOG_FILE = process.env.BENCH_LOG_FILE ?? join(tmpdir(), `scale-bench-manager-${process.pid}.log`);
const DB = 'scale';

const say = (line) => process.stdout.write(`${line}\n`);
const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

// Creates up to TABLES tables, CREATE_CONCURRENCY at a time, until the budget runs out; then waits until every
// replica is ready. Returns how many exist.
async function createTables(cluster) {
  const startedAt = performance.now();
  let next = 0;
  let created = 0;
  await cluster.withConnection(async (c) => {
    await r.dbCreate(DB).run(c);
    const worker = async () => {
      while (next < TABLES && performance.now() - startedAt < CREATE_BUDGET_MS) {
        const name = `t${String(next).padStart(4, '0')}`;
        next += 1;
        await r.db(DB).tableCreate(name, { shards: SHARDS, replicas: REPLICAS }).run(c);
        created += 1;
        if (created % 100 === 0) say(`  ${created} tables created (${seconds(performance.now() - startedAt)})`);
      }
    };
    await Promise.all(Array.from({ length: CREATE_CONCURRENCY }, worker));
    await r.db(DB).wait({ waitFor: 'all_replicas_ready', timeout: 1800 }).run(c);
  });
  say(`${created} of ${TABLES} tables created and ready in ${seconds(performance.now() - startedAt)}`);
  return created;
}

async function post(base, path, body) {
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: body ? JSON.stringify(body) : undefined });
  const json = await res.json();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// Primaries (configured) per server name, from table_config.
async function primaryCounts(cluster) {
  return cluster.withConnection(async (c) => {
    const configs = await r.db('rethinkdb').table('table_config').filter({ db: DB }).pluck('shards').coerceTo('array').run(c);
    const counts = {};
    for (const t of configs) for (const s of t.shards) counts[s.primary_replica] = (counts[s.primary_replica] ?? 0) + 1;
    return counts;
  });
}

// Client traffic on the last BUSY_TABLES tables (by name, so last in a plan made in table order): BUSY_DOCS
// documents each, read whole one table after another until stop() is called. Returns { names, stop }.
async function startBusyReads(cluster, tables) {
  const names = Array.from({ length: Math.min(BUSY_TABLES, tables) }, (_, i) => `t${String(tables - 1 - i).padStart(4, '0')}`);
  // RethinkDB's ids (random uuids): spread over the shards, as numbers would not be (they sort before every string).
  const docs = Array.from({ length: BUSY_DOCS }, () => ({ payload: 'x'.repeat(100) }));
  await cluster.withConnection(async (c) => {
    for (const name of names) await r.db(DB).table(name).insert(docs).run(c);
  });
  let running = true;
  const counts = { reads: 0, failed: 0 };
  // A read that fails (a handover of its shard under way) is counted and the loop goes on.
  const loop = cluster.withConnection(async (c) => {
    for (let i = 0; running; i += 1) {
      counts.reads += 1;
      await r.db(DB).table(names[i % names.length]).coerceTo('array').run(c).catch(() => { counts.failed += 1; });
    }
  });
  // A second for rethinkdb.stats' per-second rates to show the reads.
  await new Promise((resolve) => { setTimeout(resolve, 1500); });
  return { names, counts, stop: async () => { running = false; await loop; } };
}

// CPU seconds the RethinkDB servers used (user + system, from /proc), summed over the servers.
function serversCpuSeconds(cluster) {
  return cluster.servers.map((s) => cluster.pidOf(s.index)).filter(Boolean).reduce((sum, pid) => sum + cpuSecondsOf(pid), 0);
}

// Runs `event` and returns its result with the servers' CPU seconds and the wall time it took.
async function withServerCpu(cluster, event) {
  const cpuBefore = serversCpuSeconds(cluster);
  const startedAt = performance.now();
  const result = await event();
  return { result, serverCpuS: serversCpuSeconds(cluster) - cpuBefore, wallS: (performance.now() - startedAt) / 1000 };
}

const ROWS = [];
function row(event, timings, extra = '', serverCpuS = null) {
  const own = timings.readMs + timings.planMs + timings.otherMs;
  ROWS.push({ event, ...timings, own, extra, serverCpuS });
  say(`${event}: answered in ${timings.totalMs} ms ${extra}`);
}

function printTable() {
  const head = ['event', 'answer ms', 'read ms (queries)', 'plan ms', 'write ms (queries, mean each)', 'wait ms (reads)', 'other ms', 'manager own ms', 'RethinkDB CPU s', 'notes'];
  say(`\n| ${head.join(' | ')} |`);
  say(`| ${head.map(() => '---').join(' | ')} |`);
  for (const x of ROWS) {
    say(`| ${x.event} | ${x.totalMs} | ${x.readMs} (${x.queries.reads}) | ${x.planMs} | ${x.writeMs} (${x.queries.writes}, ${x.meanWriteMs ?? '-'}) | ${x.waitMs} (${x.queries.readsWhileWaiting}) | ${x.otherMs} | ${x.own.toFixed(1)} | ${x.serverCpuS === null ? '-' : x.serverCpuS.toFixed(1)} | ${x.extra} |`);
  }
  say('\nmanager own = reading + planning + other (everything but the table_config writes and the wait for RethinkDB to act on them)');
  say(`RethinkDB CPU s = CPU seconds the ${SERVERS} servers used during the event, summed (this machine has ${cpus().length} CPUs)`);
}

// RethinkDB maps two areas per coroutine stack; with thousands of shard replicas per server it crashed here at the
// default limit (65530) with "mprotect failed with ENOMEM; try increasing /proc/sys/vm/max_map_count".
const MAX_MAP_COUNT = 1048576;
function raiseMapCount() {
  const path = '/proc/sys/vm/max_map_count';
  const current = Number(readFileSync(path, 'utf8'));
  if (current < MAX_MAP_COUNT) writeFileSync(path, String(MAX_MAP_COUNT));
  say(`vm.max_map_count: ${current}${current < MAX_MAP_COUNT ? ` raised to ${MAX_MAP_COUNT}` : ''}`);
}

async function main() {
  raiseMapCount();
  say(`scale benchmark: ${SERVERS} RethinkDB 2.4.4 servers, up to ${TABLES} tables x ${SHARDS} shards x ${REPLICAS} replicas, TABLE_WRITE_CONCURRENCY ${WRITE_CONCURRENCY}${SERVER_ARGS.length ? `, servers started with ${SERVER_ARGS.join(' ')}` : ''}; node ${process.version}, ${cpus().length} CPUs, ${(totalmem() / 2 ** 30).toFixed(0)} GiB`);
  // CPU nodes without a real limit (every core each): the lab's metrics API needs them, and the monitor reads it.
  const cluster = createRethinkDbCluster({
    binary: resolveBinary(), size: SERVERS, cacheSizeMb: 64, coresPerNode: cpus().length, serverArgs: SERVER_ARGS,
  });
  let manager = null;
  let server = null;
  try {
    await cluster.start();
    const tables = await createTables(cluster);
    const rss = cluster.servers.map((s) => {
      const line = readFileSync(`/proc/${cluster.pidOf(s.index)}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'));
      return `${s.name} ${Math.round(Number(line.split(/\s+/)[1]) / 1024)} MiB`;
    });
    say(`RethinkDB servers' RSS with ${tables} tables (--cache-size 64): ${rss.join(', ')}`);
    // The preStop's deadline is long here so that its whole time is measured; it is compared with the default 20 s.
    manager = createLabManager(cluster, {
      via: 0,
      destination: createWriteStream(LOG_FILE),
      kube: createLabKube(cluster),
      env: {
        LOG_LEVEL: 'info', MONITOR_ENABLED: 'true', RETHINKDB_QUERY_TIMEOUT_MS: '20000', PRESTOP_DEADLINE_SECONDS: String(PRESTOP_DEADLINE_SECONDS), ACTION_DEADLINE_SECONDS: '300',
        TABLE_WRITE_CONCURRENCY: String(WRITE_CONCURRENCY),
      },
    });
    say(`manager log: ${LOG_FILE}`);
    await manager.ready(60000);
    server = manager.app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${server.address().port}`;
    say(`primaries before: ${JSON.stringify(await primaryCounts(cluster))}`);

    const read = await traced(() => manager.store.readCluster());
    row('one read of the system tables', read.timings, `${read.result.tables.length} tables`);
    const stats = await traced(() => manager.store.readTableServerStats());
    row('one read of the traffic per table and server (rethinkdb.stats)', stats.timings, `${stats.result.length} rows`);

    const idle = await withServerCpu(cluster, () => new Promise((resolve) => { setTimeout(resolve, IDLE_SAMPLE_MS); }));
    say(`RethinkDB servers idle: ${(idle.serverCpuS / idle.wallS).toFixed(2)} CPU seconds per second (summed over ${SERVERS} servers, ${tables} tables)`);

    const busy = BUSY_TABLES > 0 ? await startBusyReads(cluster, tables) : null;
    const { result: prestop, serverCpuS: prestopCpu } = await withServerCpu(cluster, () => post(base, '/v1/hooks/prestop?pod=rethinkdb-1'));
    if (busy) {
      await busy.stop();
      const order = prestop.report.changes.map((c) => c.table);
      const positions = busy.names.map((name) => order.indexOf(`${DB}.${name}`));
      say(`busy tables (read during the PRESTOP): ${busy.names.join(', ')}; moved ${positions.filter((p) => p >= 0).length} of ${busy.names.length}, at positions ${positions.map((p) => (p >= 0 ? p + 1 : 'not moved')).join(', ')} of ${order.length} moves; ${busy.counts.failed} of ${busy.counts.reads} reads failed`);
    }
    const withinDefault = prestop.timings.totalMs <= DEFAULT_PRESTOP_DEADLINE_MS ? 'within' : 'OVER';
    row('PRESTOP rethinkdb-1', prestop.timings, `primariesOff ${prestop.primariesOff}, ${prestop.report.changes.length} primaries moved, ${withinDefault} the default 20 s deadline`, prestopCpu);
    say(`primaries after PRESTOP: ${JSON.stringify(await primaryCounts(cluster))}`);

    const release = await post(base, '/v1/actions/release-server', { server: 'rethinkdb_1', rebalance: false });
    row('release-server (no rebalance)', release.timings);
    const { result: rebalance, serverCpuS: rebalanceCpu } = await withServerCpu(cluster, () => post(base, '/v1/actions/rebalance-primaries', {}));
    row('rebalance-primaries (after the drain)', rebalance.timings, `${rebalance.changes.length} primaries moved, outcome ${rebalance.outcome}`, rebalanceCpu);
    const even = await post(base, '/v1/actions/rebalance-primaries', {});
    row('rebalance-primaries (already even)', even.timings, `${even.changes.length} moved`);

    const poll = await traced(() => manager.monitor.pollOnce());
    row('one monitor poll', poll.timings);
    say(`primaries at the end: ${JSON.stringify(await primaryCounts(cluster))}`);
    printTable();
  } finally {
    if (server) server.close();
    if (manager) await manager.close().catch(() => {});
    await cluster.destroy();
  }
}

main().catch((err) => { console.error(err); process.exitCode = 1; });
