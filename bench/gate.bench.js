// The query gate's cost (npm run bench:gate): a real RethinkDB 2.4.4 cluster (3 servers) and a `rethinkdb proxy` on
// loopback, the gate as its own process (node gate/server.js) in front of the proxy, and the official driver.
//   1. steady state: point reads at a fixed rate (200 and 1,000 ops/s, 10 s each), straight to the proxy, through the
//      gate and through a bare Node relay (bench/lab/bare-relay.js), alternating; p50 and p99 of each, the gate's
//      added latency, and the part of it any relay in Node adds on this machine (the bare relay's);
//   2. throughput: point reads as fast as 64 clients can send them (one read in flight each) for 10 s through the gate;
//      reads per second, and per CPU-second of the gate process (its utime + stime); then the same through a bare
//      Node relay (bench/lab/bare-relay.js), the floor that Node's sockets set on this machine;
//   3. memory: 1,000 idle client connections through the gate (each past its handshake); the gate's RSS before and
//      after.
// The load generator shares this machine's cores with the servers, the proxy and the gate: the figures are for this
// machine. Prints numbers; asserts nothing.

import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import r from 'rethinkdb';
import { percentile } from './evaluate/stats.js';
import { createRethinkDbCluster, resolveBinary } from '../test/lab/rethinkdb-cluster.js';
import { cpuSecondsOf } from './lab/proc-stat.js';
import { firstJsonLine } from './lab/child-lines.js';

const GATE = fileURLToPath(new URL('../gate/server.js', import.meta.url));
const BARE_RELAY = fileURLToPath(new URL('./lab/bare-relay.js', import.meta.url));
const seconds = Number(process.env.GATE_BENCH_SECONDS ?? 10);
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

// The port in the first JSON line a child prints that contains `marker`.
const portOf = async (child, what, marker) => (await firstJsonLine(child, { what, marker })).port;

async function startBareRelay(upstream) {
  const child = spawn(process.execPath, [BARE_RELAY], { env: { ...process.env, UPSTREAM: `${upstream.host}:${upstream.driverPort}` }, stdio: ['ignore', 'pipe', 'inherit'] });
  return { child, port: await portOf(child, 'the bare relay', '"port"') };
}

// Reads per second and per CPU-second of the process `pid`, for the throughput load through `port`.
async function throughputPerCpu(pid, port, ids) {
  const cpu0 = cpuSecondsOf(pid);
  const t0 = performance.now();
  const reads = await throughput(port, seconds, ids);
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu = cpuSecondsOf(pid) - cpu0;
  return { reads, elapsedS, cpu, perSecond: reads / elapsedS, perCpuSecond: reads / cpu };
}

async function startGate(upstream) {
  const env = {
    ...process.env, GATE_UPSTREAM: `${upstream.host}:${upstream.driverPort}`, GATE_PORT: '0', GATE_METRICS_PORT: '0', GATE_HOST: '127.0.0.1', LOG_LEVEL: 'info',
  };
  // GATE_BENCH_PROFILE=dir: the gate writes a CPU profile there (node --cpu-prof) when it stops.
  const profile = process.env.GATE_BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.GATE_BENCH_PROFILE}`] : [];
  const child = spawn(process.execPath, [...profile, GATE], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await portOf(child, 'the gate', 'query gate listening');
  return { child, port };
}

// Point reads at `rate` per second for `durationS`, on `clients` connections; latencies in ms.
async function fixedRate(port, rate, durationS, ids, clients = 8) {
  const conns = await Promise.all(Array.from({ length: clients }, () => r.connect({ host: '127.0.0.1', port })));
  const table = r.db('bench').table('kv');
  const latencies = [];
  const failures = [];
  const started = performance.now();
  const total = rate * durationS;
  const inFlight = [];
  for (let i = 0; i < total; i += 1) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    // From when it was due if it went late (a generator that falls behind does not hide the wait), from when it was
    // sent if it went early (up to 1 ms, the loop does not sleep less).
    const t0 = Math.min(due, performance.now());
    inFlight.push(table.get(ids[i % ids.length]).run(conns[i % clients]).then(() => latencies.push(performance.now() - t0), (err) => failures.push(err.message)));
  }
  await Promise.all(inFlight);
  await Promise.all(conns.map((c) => c.close()));
  latencies.sort((a, b) => a - b);
  return { n: latencies.length, failures: failures.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
}

async function throughput(port, durationS, ids, clients = 64) {
  const conns = await Promise.all(Array.from({ length: clients }, () => r.connect({ host: '127.0.0.1', port })));
  const table = r.db('bench').table('kv');
  let done = 0;
  const until = performance.now() + durationS * 1000;
  await Promise.all(conns.map(async (c, k) => {
    for (let i = k; performance.now() < until; i += clients) {
      await table.get(ids[i % ids.length]).run(c);
      done += 1;
    }
  }));
  await Promise.all(conns.map((c) => c.close()));
  return done;
}

async function main() {
  const cluster = createRethinkDbCluster({ binary: resolveBinary(), size: 3, network: 'loopback' });
  await cluster.start();
  let gate = null;
  let bare = null;
  try {
    await cluster.withConnection(async (c) => {
      await r.dbCreate('bench').run(c);
      await r.db('bench').tableCreate('kv', { shards: 2, replicas: 3 }).run(c);
      await r.db('bench').table('kv').wait().run(c);
      await r.db('bench').table('kv').insert(Array.from({ length: 1000 }, (_, i) => ({ id: `k${i}`, v: 'x'.repeat(100) }))).run(c);
    });
    const ids = Array.from({ length: 1000 }, (_, i) => `k${i}`);
    const proxy = await cluster.addProxy();
    gate = await startGate(proxy);
    process.stdout.write(`gate pid ${gate.child.pid}, port ${gate.port}; proxy ${proxy.driverPort}; ${seconds} s per run\n\n`);

    bare = await startBareRelay(proxy);
    process.stdout.write('1. steady state, point reads (8 connections); the bare relay is any Node relay\'s own hop\n');
    process.stdout.write('   rate     path        ops     failed  p50 ms  p99 ms\n');
    for (const rate of [200, 1000]) {
      const rows = {};
      const paths = [['proxy', proxy.driverPort], ['gate', gate.port], ['bare relay', bare.port]];
      for (const [name, port] of [...paths, ...paths]) {
        const res = await fixedRate(port, rate, seconds / 2, ids);
        rows[name] = rows[name] ? merge(rows[name], res) : res;
      }
      for (const [name] of paths) {
        const x = rows[name];
        process.stdout.write(`   ${String(rate).padEnd(8)} ${name.padEnd(11)} ${String(x.n).padEnd(7)} ${String(x.failures).padEnd(7)} ${x.p50.toFixed(2).padEnd(7)} ${x.p99.toFixed(2)}\n`);
      }
      const diff = (a, b) => `p50 ${(rows[a].p50 - rows[b].p50).toFixed(2)} ms, p99 ${(rows[a].p99 - rows[b].p99).toFixed(2)} ms`;
      process.stdout.write(`   at ${rate}/s: gate - proxy ${diff('gate', 'proxy')}; bare relay - proxy ${diff('bare relay', 'proxy')}; gate - bare relay ${diff('gate', 'bare relay')}\n`);
    }

    process.stdout.write('\n2. throughput through one process (64 clients, one point read in flight each), the gate and a bare relay alternating\n');
    for (const [name, relay] of [['gate', gate], ['bare relay', bare], ['gate', gate], ['bare relay', bare]]) {
      const x = await throughputPerCpu(relay.child.pid, relay.port, ids);
      process.stdout.write(`   ${name.padEnd(10)} ${x.reads} reads in ${x.elapsedS.toFixed(1)} s: ${x.perSecond.toFixed(0)}/s; CPU ${x.cpu.toFixed(2)} s (${(x.cpu / x.elapsedS).toFixed(2)} cores): ${x.perCpuSecond.toFixed(0)} reads per CPU-second\n`);
    }
    bare.child.kill('SIGTERM');
    bare = null;

    process.stdout.write('\n3. memory at 1,000 idle client connections\n');
    const before = rssMb(gate.child.pid);
    const idle = [];
    for (let i = 0; i < 1000; i += 1) idle.push(await r.connect({ host: '127.0.0.1', port: gate.port }));
    await sleep(500);
    const after = rssMb(gate.child.pid);
    process.stdout.write(`   gate RSS ${before.toFixed(1)} MB before, ${after.toFixed(1)} MB with 1,000 idle connections (${((after - before) * 1024 / 1000).toFixed(1)} KB each)\n`);
    await Promise.all(idle.map((c) => c.close({ noreplyWait: false }).catch(() => {})));
  } finally {
    bare?.child.kill('SIGTERM');
    gate?.child.kill('SIGTERM');
    await cluster.destroy();
  }
}

function merge(a, b) {
  // Percentiles of two runs cannot be merged exactly: the mean of each (the runs are equal in length).
  return { n: a.n + b.n, failures: a.failures + b.failures, p50: (a.p50 + b.p50) / 2, p99: (a.p99 + b.p99) / 2 };
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
