// Resident memory of the manager as a process, started the way the image starts it (its CMD: the bundle that
// `npm run build` makes, built first; --source runs node src/server.js instead), idle and under load: RSS at 5 s and
// 30 s after start, then 50,000 GET /v1/cluster and 5,000 hooks (dry-run and real preStops, postStarts) over
// keep-alive connections, then RSS right after the load and after 30 s idle, and the V8 heap in use (from GET
// /metrics). Prints a table; it asserts nothing.
//
//   node bench/memory.bench.js                      # the sandbox (no RethinkDB configured)
//   node bench/memory.bench.js --backend rethinkdb  # a 3-server lab cluster of the real RethinkDB 2.4.4 (needs root)
//   options: --source (run src/server.js, not the image's bundle, for comparison)
//            --reads N --hooks N --real-hooks N (preStop+postStart pairs, part of --hooks) --concurrency N
//            --idle-seconds N --rounds N (the load again, to tell a leak from one-time warm-up)
//            --env KEY=VALUE (on top of the image's ENV, e.g. NODE_OPTIONS=...; repeatable)
//            --heap-snapshots (a heap snapshot at idle before the load and after each round, and the object kinds that
//            grew; the RSS after a snapshot is perturbed)
//            --kube (with --backend rethinkdb: also a real kube-apiserver and etcd, as the tests start them, holding the
//            lab's servers as pods; the manager uses it as in its pod: Lease, node watch, pod annotations, Events)

import { spawn } from 'node:child_process';
import {
  closeSync, mkdtempSync, openSync, readFileSync, readSync, readdirSync, rmSync, statSync, writeFileSync,
} from 'node:fs';
import { Agent, request } from 'node:http';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { buildBundle } from '../scripts/build.js';
import { imageCommand, imageEnv } from '../test/helpers/deploy-files.js';
import { cpuSecondsOf } from './lab/proc-stat.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });
const MiB = 2 ** 20;

const { values: opts } = parseArgs({
  options: {
    backend: { type: 'string', default: 'sandbox' },
    reads: { type: 'string' },
    hooks: { type: 'string' },
    'real-hooks': { type: 'string' },
    concurrency: { type: 'string', default: '4' },
    'idle-seconds': { type: 'string', default: '30' },
    rounds: { type: 'string', default: '1' },
    env: { type: 'string', multiple: true, default: [] },
    'heap-snapshots': { type: 'boolean', default: false },
    kube: { type: 'boolean', default: false },
    source: { type: 'boolean', default: false },
  },
});
const real = opts.backend === 'rethinkdb';
// A real cluster shares this machine's CPUs with whatever else runs here: a lighter default load there.
const reads = Number(opts.reads ?? (real ? 10000 : 50000));
const hooks = Number(opts.hooks ?? (real ? 1000 : 5000));
const realHookPairs = Number(opts['real-hooks'] ?? (real ? 10 : 100));
const concurrency = Number(opts.concurrency);
const idleMs = Number(opts['idle-seconds']) * 1000;
const rounds = Number(opts.rounds);
// The sandbox's 4 pods, or the lab's 3 servers (hostnames rethinkdb-i, as a StatefulSet's pods).
const LAB_SIZE = 3;
const PODS = Array.from({ length: real ? LAB_SIZE : 4 }, (_, i) => `rethinkdb-${i}`);

// The manager's node arguments: the image's CMD (run from the repository as the image runs it from WORKDIR /app),
// its bundle built first so that it is never stale; or the source. The environment is the image's final stage's
// (its ENV lines: NODE_ENV, NODE_OPTIONS...), so that the manager runs here as it runs in its pod.
async function managerCommand(dockerfile) {
  if (opts.source) return { args: ['src/server.js'], what: 'the source (--source)' };
  const [program, ...args] = imageCommand(dockerfile) ?? [];
  if (program !== 'node') throw new Error(`the Dockerfile's CMD does not run node: ${program}`);
  const { entry } = await buildBundle();
  if (resolve(repoRoot, args.at(-1)) !== entry) throw new Error(`the image's CMD runs ${args.at(-1)}, not the bundle npm run build makes (${entry})`);
  return { args, what: "the image's CMD, the bundle npm run build makes (built just now)" };
}

function readStatus(pid) {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  // The manager's CPU time so far (utime + stime).
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile'), hwm: kb('VmHWM'), cpuSeconds: cpuSecondsOf(pid) };
}

// The manager (node + commandArgs) with a minimal environment (nothing of this shell's, such as a KUBECONFIG);
// resolves with the child and its port once it logs that it listens.
async function startManager({ commandArgs, env, diagnosticDir }) {
  const args = [...(diagnosticDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${diagnosticDir}`] : []), ...commandArgs];
  const child = spawn(process.execPath, args, {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const startedAt = Date.now();
  let stderr = '';
  child.stderr.on('data', (d) => { stderr = (stderr + d).slice(-2000); });
  const port = await new Promise((res, rej) => {
    let partial = '';
    const onData = (chunk) => {
      const lines = (partial + chunk).split('\n');
      partial = lines.pop();
      for (const line of lines) {
        const m = /"port":(\d+).*"msg":"manager listening"/.exec(line);
        if (m) { child.stdout.off('data', onData); child.stdout.resume(); res(Number(m[1])); return; }
      }
    };
    child.stdout.on('data', onData);
    child.once('exit', (code) => rej(new Error(`the manager exited (${code}) before listening: ${stderr}`)));
  });
  // The log lines go on being read (and dropped), as a container runtime reads them.
  child.stdout.on('data', () => {});
  return { child, port, startedAt };
}

function httpClient(port) {
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  return function call(method, path) {
    return new Promise((res, rej) => {
      const req = request({ host: '127.0.0.1', port, method, path, agent }, (r) => {
        const chunks = [];
        r.on('data', (c) => chunks.push(c));
        r.on('end', () => res({ status: r.statusCode, body: Buffer.concat(chunks).toString() }));
      });
      req.on('error', rej);
      req.end();
    });
  };
}

// n requests, `concurrency` at a time; returns the count of each status.
async function drive(n, makeRequest) {
  const statuses = {};
  let next = 0;
  async function worker() {
    while (next < n) {
      const i = next;
      next += 1;
      const { status } = await makeRequest(i);
      statuses[status] = (statuses[status] ?? 0) + 1;
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, n) }, worker));
  return statuses;
}

// Real hooks, one pod at a time as a rolling restart does: a preStop that moves its primaries away, then a postStart
// whose operation gives them back (awaited, so that the next preStop finds a settled cluster).
async function rollingRestarts(call, pairs) {
  const statuses = {};
  const count = (s) => { statuses[s] = (statuses[s] ?? 0) + 1; };
  for (let i = 0; i < pairs; i += 1) {
    const pod = PODS[i % PODS.length];
    count((await call('POST', `/v1/hooks/prestop?pod=${pod}`)).status);
    const started = await call('POST', `/v1/hooks/poststart?pod=${pod}`);
    count(started.status);
    const href = started.status === 202 ? JSON.parse(started.body).operation.href : null;
    for (let polls = 0; href && polls < 600; polls += 1) {
      const op = JSON.parse((await call('GET', href)).body);
      if (op.status !== 'running') break;
      await sleep(50);
    }
  }
  return statuses;
}

// The V8 heap in use and committed, from prom-client's process metrics.
async function heapStats(call) {
  const text = (await call('GET', '/metrics')).body;
  const metric = (name) => Number(new RegExp(`^rethinkdb_manager_nodejs_${name} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  return { heap: metric('heap_size_used_bytes'), heapTotal: metric('heap_size_total_bytes') };
}

// Per constructor: count and self size of the objects in a heap snapshot file.
function summarizeSnapshot(file) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const { node_fields: fields, node_types: [types] } = snap.snapshot.meta;
  const width = fields.length;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const byName = new Map();
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]];
    const name = type === 'object' || type === 'closure' ? snap.strings[snap.nodes[i + nameAt]] : `(${type})`;
    const entry = byName.get(name) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += snap.nodes[i + sizeAt];
    byName.set(name, entry);
  }
  return byName;
}

function endsWithBrace(file, size) {
  if (size === 0) return false;
  const tail = Buffer.alloc(Math.min(size, 16));
  const fd = openSync(file, 'r');
  try {
    readSync(fd, tail, 0, tail.length, size - tail.length);
  } finally {
    closeSync(fd);
  }
  return tail.toString().trimEnd().endsWith('}');
}

async function heapSnapshot(child, dir) {
  const before = new Set(readdirSync(dir));
  child.kill('SIGUSR2');
  for (let i = 0; i < 600; i += 1) {
    await sleep(200);
    const fresh = readdirSync(dir).filter((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
    // Written as it is taken, after a pause (an empty file) while V8 walks the heap: done once its size stops
    // changing and its JSON has its closing brace (a size that stood still was not enough at low CPU priority).
    if (fresh.length) {
      const file = join(dir, fresh[0]);
      let size = -1;
      for (;;) {
        await sleep(500);
        const now = statSync(file).size;
        if (now === size && endsWithBrace(file, now)) return file;
        size = now;
      }
    }
  }
  throw new Error('no heap snapshot was written');
}

function printSnapshotGrowth(before, after, beforeLabel, afterLabel) {
  const rows = [...after].map(([name, a]) => {
    const b = before.get(name) ?? { count: 0, bytes: 0 };
    return { name, count: a.count - b.count, bytes: a.bytes - b.bytes, countAfter: a.count };
  }).filter((r) => r.bytes !== 0 || r.count !== 0).sort((x, y) => Math.abs(y.bytes) - Math.abs(x.bytes)).slice(0, 12);
  const total = (snap) => [...snap.values()].reduce((sum, e) => sum + e.bytes, 0);
  console.log(`\nheap snapshots (each after a full GC), ${afterLabel} minus ${beforeLabel}: ${fmtMiB(total(after) - total(before))} MiB live, of which:`);
  console.log(`  ${'kind'.padEnd(40)} ${'objects'.padStart(9)} ${'bytes'.padStart(11)} ${'objects after'.padStart(14)}`);
  for (const r of rows) console.log(`  ${r.name.slice(0, 40).padEnd(40)} ${String(r.count).padStart(9)} ${String(r.bytes).padStart(11)} ${String(r.countAfter).padStart(14)}`);
}

// A real kube-apiserver (test/helpers/kube-apiserver.js: etcd and kube-apiserver on loopback) holding the lab's
// servers as pods rethinkdb-i on nodes node-i, and a kubeconfig file for the manager (the admin token).
async function startKube(dir) {
  const { startKubeApiServer } = await import('../test/helpers/kube-apiserver.js');
  const { seedRethinkDbCluster } = await import('../test/helpers/kube-objects.js');
  const kube = await startKubeApiServer();
  try {
    const plan = Array.from({ length: LAB_SIZE }, (_, i) => ({ pod: `rethinkdb-${i}`, node: `node-${i}`, podIp: `198.18.0.${10 + i}`, hostIp: `198.18.1.${10 + i}` }));
    await seedRethinkDbCluster(kube.kubeConfig, { plan });
    const file = join(dir, 'bench.kubeconfig');
    writeFileSync(file, JSON.stringify({
      apiVersion: 'v1', kind: 'Config', 'current-context': 'bench',
      clusters: [{ name: 'bench', cluster: { server: kube.server, 'certificate-authority-data': kube.ca.toString('base64') } }],
      users: [{ name: 'bench', user: { token: kube.adminToken } }],
      contexts: [{ name: 'bench', context: { cluster: 'bench', user: 'bench', namespace: 'rethinkdb' } }],
    }), { mode: 0o600 });
    return { stop: kube.stop, env: { KUBERNETES_MODE: 'kubeconfig', KUBECONFIG: file, KUBERNETES_NAMESPACE: 'rethinkdb' } };
  } catch (err) {
    await kube.stop();
    throw err;
  }
}

async function startLabCluster() {
  const { createRethinkDbCluster } = await import('../test/lab/rethinkdb-cluster.js');
  const cluster = createRethinkDbCluster({ size: LAB_SIZE, cacheSizeMb: 64 });
  await cluster.start();
  await cluster.createTables([{ db: 'ycsb', table: 'usertable', shards: 3, replicas: 3, docs: 3000 }]);
  const s = cluster.servers[0];
  return { cluster, env: { RETHINKDB_HOST: s.host, RETHINKDB_PORT: String(s.driverPort), AUTH_MODE: 'none', KUBERNETES_MODE: 'off', MONITOR_ENABLED: 'false' } };
}

const fmtMiB = (bytes) => (Number.isFinite(bytes) ? (bytes / MiB).toFixed(1) : '-');

async function main() {
  const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
  const command = await managerCommand(dockerfile);
  const runEnv = { ...imageEnv(dockerfile), ...Object.fromEntries(opts.env.map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)])) };
  console.log(`node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(1)} GiB RAM, ${process.platform} ${process.arch}`);
  console.log(`manager: node ${command.args.join(' ')}, ${command.what}; backend ${opts.backend}${opts.kube ? ", Kubernetes API: a real kube-apiserver (pods rethinkdb-i)" : ""}, image env ${JSON.stringify(runEnv)}`);
  console.log(`load per round: ${reads} GET /v1/cluster, then ${hooks} hooks (${hooks - 2 * realHookPairs} dry-run preStops, ${realHookPairs} real preStop+postStart pairs), concurrency ${concurrency}, keep-alive; ${rounds} round(s)`);

  if (opts.kube && !real) throw new Error('--kube goes with --backend rethinkdb (the sandbox has its own Kubernetes)');
  const kubeDir = opts.kube ? mkdtempSync(join(tmpdir(), 'manager-kube-')) : null;
  const diagnosticDir = opts['heap-snapshots'] ? mkdtempSync(join(tmpdir(), 'manager-heap-')) : null;
  let kube = null;
  let lab = null;
  let manager = null;
  const rows = [];
  try {
    lab = real ? await startLabCluster() : null;
    kube = kubeDir ? await startKube(kubeDir) : null;
    if (kube) Object.assign(lab.env, kube.env);
    manager = await startManager({ commandArgs: command.args, env: { ...runEnv, ...lab?.env }, diagnosticDir });
    const { child, port, startedAt } = manager;
    const call = httpClient(port);
    const sample = async (label, extra = '') => {
      const s = readStatus(child.pid);
      const heap = await heapStats(call).catch(() => ({ heap: NaN, heapTotal: NaN }));
      rows.push({ label, ...s, ...heap, extra });
    };
    const untilSinceStart = (ms) => sleep(Math.max(0, startedAt + ms - Date.now()));
    // Readiness first (the state is loaded), without touching anything that allocates much.
    for (let i = 0; i < 300 && (await call('GET', '/readyz')).status !== 200; i += 1) await sleep(100);
    await untilSinceStart(5000);
    rows.push({ label: 'idle, 5 s after start', ...readStatus(child.pid), heap: NaN, heapTotal: NaN });
    await untilSinceStart(idleMs);
    await sample(`idle, ${idleMs / 1000} s after start`);
    const snapshots = [];
    if (diagnosticDir) snapshots.push(summarizeSnapshot(await heapSnapshot(child, diagnosticDir)));

    for (let round = 1; round <= rounds; round += 1) {
      const t0 = Date.now();
      const readStatuses = await drive(reads, () => call('GET', '/v1/cluster'));
      const readSeconds = (Date.now() - t0) / 1000;
      await sample(`round ${round}: after ${reads} reads`, `${readSeconds.toFixed(1)} s, ${Math.round(reads / readSeconds)}/s, ${JSON.stringify(readStatuses)}`);
      const t1 = Date.now();
      const dry = hooks - 2 * realHookPairs;
      const dryStatuses = await drive(dry, (i) => call('POST', `/v1/hooks/prestop?pod=${PODS[i % PODS.length]}&dryRun=true`));
      const realStatuses = await rollingRestarts(call, realHookPairs);
      await sample(`round ${round}: after ${hooks} hooks`, `${((Date.now() - t1) / 1000).toFixed(1)} s, dry ${JSON.stringify(dryStatuses)}, real ${JSON.stringify(realStatuses)}`);
      await sleep(idleMs);
      await sample(`round ${round}: idle ${idleMs / 1000} s after the load`);
      if (diagnosticDir) snapshots.push(summarizeSnapshot(await heapSnapshot(child, diagnosticDir)));
    }

    // RSS = anon (the V8 heap, malloc, stacks) + file (the node binary and libraries, shared); peak = VmHWM.
    // cpu s: the manager's CPU time since it started (a steadier cost of the load than its rate on a shared machine).
    console.log(`\n${'when'.padEnd(34)} ${'RSS MiB'.padStart(8)} ${'anon'.padStart(6)} ${'file'.padStart(6)} ${'peak'.padStart(6)} ${'heapUsed'.padStart(9)} ${'heapTotal'.padStart(9)} ${'cpu s'.padStart(6)}  notes`);
    for (const r of rows) {
      const cells = [fmtMiB(r.rss).padStart(8), fmtMiB(r.anon).padStart(6), fmtMiB(r.file).padStart(6), fmtMiB(r.hwm).padStart(6), fmtMiB(r.heap).padStart(9), fmtMiB(r.heapTotal).padStart(9), r.cpuSeconds.toFixed(1).padStart(6)];
      console.log(`${r.label.padEnd(34)} ${cells.join(' ')}  ${r.extra ?? ''}`);
    }
    const idle = rows[1];
    const last = rows.at(-1);
    console.log(`\ngrowth, idle after the load minus idle before it: RSS ${fmtMiB(last.rss - idle.rss)} MiB, heapUsed ${fmtMiB(last.heap - idle.heap)} MiB`);
    // From idle to the first round: warm-up (compiled code) and the bounded histories filling; between rounds: a leak.
    for (let i = 1; i < snapshots.length; i += 1) printSnapshotGrowth(snapshots[i - 1], snapshots[i], i === 1 ? 'idle before the load' : `idle after round ${i - 1}`, `idle after round ${i}`);
  } finally {
    if (manager) {
      manager.child.kill('SIGTERM');
      await new Promise((res) => { if (manager.child.exitCode !== null) res(); else manager.child.once('exit', res); });
    }
    await kube?.stop();
    await lab?.cluster.destroy();
    for (const dir of [diagnosticDir, kubeDir]) if (dir) rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err.stack ?? err.message);
  process.exitCode = 1;
});
