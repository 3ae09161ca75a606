// The query gate's cost (npm run bench:gate): a real RethinkDB 2.4.4 cluster (3 servers) and a `rethinkdb proxy` on
// loopback, the gate as its own process (node gate/server.js) in front of the proxy, and the official driver.
//   1. steady state: point reads at a fixed rate (200 and 1,000 ops/s on each path) straight to the proxy, through the
//      gate and through a bare Node relay (bench/lab/bare-relay.js), the three interleaved read by read so that the
//      machine's busy moments fall on each alike, in GATE_BENCH_ROUNDS rounds (3) of GATE_BENCH_SECONDS (10); p50 and
//      p99 of each, the gate's added latency, and the part of it any relay in Node adds here (the bare relay's);
//   2. throughput: point reads as fast as 64 clients can send them (one read in flight each, then four) for 10 s
//      through the gate; reads per second, and per CPU-second of the gate process (its utime + stime, and each per
//      read); then the same through a bare Node relay (bench/lab/bare-relay.js), the floor that Node's sockets set on
//      this machine;
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
import { cpuTimesOf } from './lab/proc-stat.js';
import { firstJsonLine } from './lab/child-lines.js';

const GATE = fileURLToPath(new URL('../gate/server.js', import.meta.url));
const BARE_RELAY = fileURLToPath(new URL('./lab/bare-relay.js', import.meta.url));
const seconds = Number(process.env.GATE_BENCH_SECONDS ?? 10);
const rounds = Number(process.env.GATE_BENCH_ROUNDS ?? 3);
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const rssMb = (pid) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;

// The port in the first JSON line a child prints that contains `marker`.
const portOf = async (child, what, marker) => (await firstJsonLine(child, { what, marker })).port;

async function startBareRelay(upstream) {
  const child = spawn(process.execPath, [BARE_RELAY], { env: { ...process.env, UPSTREAM: `${upstream.host}:${upstream.driverPort}` }, stdio: ['ignore', 'pipe', 'inherit'] });
  return { child, port: await portOf(child, 'the bare relay', '"port"') };
}

// Reads per second and per CPU-second of the process `pid` (and its user and system CPU per read), for the
// throughput load through `port` with `depth` reads in flight on each connection.
async function throughputPerCpu(pid, port, ids, depth) {
  const cpu0 = cpuTimesOf(pid);
  const t0 = performance.now();
  const reads = await throughput(port, seconds, ids, depth);
  const elapsedS = (performance.now() - t0) / 1000;
  const cpu1 = cpuTimesOf(pid);
  const user = cpu1.user - cpu0.user;
  const system = cpu1.system - cpu0.system;
  const cpu = user + system;
  return {
    reads, elapsedS, cpu, perSecond: reads / elapsedS, perCpuSecond: reads / cpu, userUs: (user / reads) * 1e6, systemUs: (system / reads) * 1e6,
  };
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

// Point reads at `rate` per second on each of `ports` for `durationS`, interleaved (one read to each path in turn, so
// that a busy moment of the machine falls on every path alike), on `clients` connections per path; per path, the
// count, failures, p50 and p99 in ms.
async function fixedRateInterleaved(ports, rate, durationS, ids, clients = 8) {
  const conns = await Promise.all(ports.map((port) => Promise.all(Array.from({ length: clients }, () => r.connect({ host: '127.0.0.1', port })))));
  const table = r.db('bench').table('kv');
  const latencies = ports.map(() => []);
  const failures = ports.map(() => 0);
  const started = performance.now();
  const total = rate * durationS * ports.length;
  const inFlight = [];
  for (let i = 0; i < total; i += 1) {
    const due = started + (i * 1000) / (rate * ports.length);
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    // From when it was due if it went late (a generator that falls behind does not hide the wait), from when it was
    // sent if it went early (up to 1 ms, the loop does not sleep less).
    const t0 = Math.min(due, performance.now());
    const path = i % ports.length;
    const k = Math.floor(i / ports.length);
    inFlight.push(table.get(ids[k % ids.length]).run(conns[path][k % clients]).then(() => latencies[path].push(performance.now() - t0), () => { failures[path] += 1; }));
  }
  await Promise.all(inFlight);
  await Promise.all(conns.flat().map((c) => c.close()));
  return latencies.map((list, path) => {
    list.sort((a, b) => a - b);
    return { n: list.length, failures: failures[path], p50: percentile(list, 50), p99: percentile(list, 99) };
  });
}

// Point reads as fast as `clients` connections take them, `depth` in flight on each (the driver sends a connection's
// queries without waiting for the answers before them); how many were answered.
async function throughput(port, durationS, ids, depth = 1, clients = 64) {
  const conns = await Promise.all(Array.from({ length: clients }, () => r.connect({ host: '127.0.0.1', port })));
  const table = r.db('bench').table('kv');
  let done = 0;
  const until = performance.now() + durationS * 1000;
  const loops = conns.flatMap((c) => Array.from({ length: depth }, () => c));
  await Promise.all(loops.map(async (c, k) => {
    for (let i = k; performance.now() < until; i += loops.length) {
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
    process.stdout.write(`1. steady state, point reads at a fixed rate on each path (8 connections each), the three paths interleaved read by read; ${rounds} rounds of ${seconds} s\n`);
    process.stdout.write('   the bare relay is any Node relay\'s own hop: gate - bare relay is what the gate\'s code adds\n');
    process.stdout.write('   rate/s  round  proxy p50/p99   gate p50/p99    bare p50/p99    gate-proxy p50/p99  bare-proxy p50/p99  gate-bare p50/p99\n');
    const paths = [proxy.driverPort, gate.port, bare.port];
    const pair = (a, b) => `${(a.p50 - b.p50).toFixed(2)}/${(a.p99 - b.p99).toFixed(2)}`.padEnd(20);
    const both = (x) => `${x.p50.toFixed(2)}/${x.p99.toFixed(2)}`.padEnd(16);
    const median = (list) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)];
    for (const rate of [200, 1000]) {
      const diffs = { gate: [], bare: [], own: [] };
      for (let round = 1; round <= rounds; round += 1) {
        const [px, gt, br] = await fixedRateInterleaved(paths, rate, seconds, ids);
        const failed = px.failures + gt.failures + br.failures;
        process.stdout.write(`   ${String(rate).padEnd(7)} ${String(round).padEnd(6)} ${both(px)}${both(gt)}${both(br)}${pair(gt, px)}${pair(br, px)}${pair(gt, br)}${failed ? `${failed} failed` : ''}\n`);
        diffs.gate.push(gt.p99 - px.p99);
        diffs.bare.push(br.p99 - px.p99);
        diffs.own.push(gt.p99 - br.p99);
      }
      const range = (list) => `median ${median(list).toFixed(2)} ms (${Math.min(...list).toFixed(2)} to ${Math.max(...list).toFixed(2)})`;
      process.stdout.write(`   at ${rate}/s, p99: gate - proxy ${range(diffs.gate)}; bare relay - proxy ${range(diffs.bare)}; gate - bare relay ${range(diffs.own)}\n`);
    }

    process.stdout.write('\n2. throughput through one process (64 clients; 1, then 4 point reads in flight on each), the gate and a bare relay alternating\n');
    for (const depth of [1, 4]) {
      for (const [name, relay] of [['gate', gate], ['bare relay', bare], ['gate', gate], ['bare relay', bare]]) {
        const x = await throughputPerCpu(relay.child.pid, relay.port, ids, depth);
        process.stdout.write(`   ${depth} in flight  ${name.padEnd(10)} ${x.reads} reads in ${x.elapsedS.toFixed(1)} s: ${x.perSecond.toFixed(0)}/s; CPU ${x.cpu.toFixed(2)} s (${(x.cpu / x.elapsedS).toFixed(2)} cores): ${x.perCpuSecond.toFixed(0)} reads per CPU-second (${x.userUs.toFixed(1)} µs user + ${x.systemUs.toFixed(1)} µs system a read)\n`);
      }
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

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
