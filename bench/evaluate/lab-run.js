// One evaluation run: a fresh real cluster, the paper's tables with a pinned layout, the manager (or not), YCSB-A
// load through three servers (or a proxy), a scenario's timeline of infrastructure events, and the op records it produced.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import r from 'rethinkdb';
import { createLabKube } from '../../test/lab/lab-kube.js';
import { createLabManager } from '../../test/lab/lab-manager.js';
import { createRethinkDbCluster, resolveBinary } from '../../test/lab/rethinkdb-cluster.js';
import { createLoadGenerator } from './load-generator.js';
import { createKeyChooser } from './zipf.js';
import { firstJsonLine } from '../lab/child-lines.js';

const GATE = fileURLToPath(new URL('../../gate/server.js', import.meta.url));
const sleep = (ms) => new Promise((res) => { setTimeout(res, Math.max(0, ms)); });

// options: { network, rate, keyCount, seed, hotServer, entryServers, log, managerEnv }
// arm: 'none', 'manager', 'gate' (clients through the query gate, one process in front of each entry),
// 'manager+gate', or 'manager+gate+hold' (the manager holds a table's queries at the gates while it moves the table's
// primaries: GATE_HOLD_*, with a token file both sides read).
export async function runOnce(scenario, arm, options) {
  const withHold = arm === 'manager+gate+hold';
  const withManager = arm === 'manager' || arm === 'manager+gate' || withHold;
  const withGate = arm === 'gate' || arm === 'manager+gate' || withHold;
  const {
    network, rate, keyCount, seed, hotServer = 1, entryServers = [0, 2, 3], log = () => {}, nodeCpus = 'shared',
  } = options;
  // A scenario with CPU interference runs each server in its own CPU node (cgroup), where the neighbour runs; with
  // nodeCpus 'isolated', the hot server's node has a CPU of its own (test/lab/cpu-nodes.js).
  const cluster = createRethinkDbCluster({
    binary: resolveBinary(), size: 4, network, cacheSizeMb: 128, coresPerNode: scenario.coresPerNode ?? null, isolateNodes: nodeCpus === 'isolated' ? [hotServer] : [],
  });
  let manager = null;
  const gates = [];
  try {
    log({ arm }, 'starting the cluster');
    await cluster.start();
    log({}, 'creating and filling the tables');
    await cluster.createTables([
      { db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: keyCount, docBytes: 1000 },
      { db: 'ycsb', table: 'accounts', shards: 2, replicas: 3, docs: 200 },
    ]);
    const layout = await pinLayout(cluster, { keyCount, seed, hotServer });
    log({ busiestShard: layout.busiestShard }, 'layout pinned');
    // A scenario may shape the cluster further before the load starts, the same in both arms.
    const prepared = scenario.prepare ? await scenario.prepare({ cluster, layout, hotServer }) : null;
    if (prepared) log(prepared, 'prepared');
    // scenario.entry 'proxy': every client enters through a query router (rethinkdb proxy) instead of three servers.
    const direct = scenario.entry === 'proxy'
      ? [await cluster.addProxy()].map((p) => ({ name: p.name, host: p.host, port: p.driverPort }))
      : entryServers.map((i) => ({ name: cluster.servers[i].name, host: cluster.servers[i].host, port: cluster.servers[i].driverPort }));
    // The gate's arms: a gate process in front of each entry, on loopback (as beside each proxy in a pod). Started
    // before the manager, which is told where their HTTP ports are in the hold arm.
    const tokenFile = withHold ? holdTokenFile() : null;
    const entries = [];
    for (const entry of direct) {
      if (!withGate) { entries.push(entry); continue; }
      const gate = await startGate(entry, { tokenFile });
      gates.push(gate);
      entries.push({ name: `gate-${entry.name}`, host: '127.0.0.1', port: gate.port });
    }
    if (withManager) {
      const holdEnv = withHold ? { GATE_HOLD_TOKEN_FILE: tokenFile, GATE_HOLD_ENDPOINTS: gates.map((g) => `127.0.0.1:${g.metricsPort}`).join(',') } : {};
      manager = await startManager(cluster, {
        via: entryServers[0], env: { ...scenario.managerEnv, ...options.managerEnv, ...holdEnv }, kube: scenario.coresPerNode ? createLabKube(cluster) : null,
      });
    }
    // Every update an increment of its record's counter, read back at the end (report: "counted writes").
    const load = createLoadGenerator({
      r, entries, db: 'ycsb', table: 'usertable', rateOpsPerSec: rate, keyCount, seed, opTimeoutMs: 5000, countWrites: true, client: options.client ?? 'plain',
    });
    const { t0 } = await load.start();
    log({}, 'load running');
    const events = [];
    const at = (seconds) => sleep(t0 + seconds * 1000 - performance.now());
    const now = () => (performance.now() - t0) / 1000;
    const mark = (label) => { events.push({ t: now(), label }); log({ label }, 'event'); };
    // The wall clock at t0, to put the run's times (events, failures) against the manager's log.
    const notes = { t0Wall: new Date(Date.now() - (performance.now() - t0)).toISOString(), client: options.client ?? 'plain', ...(prepared ? { prepared } : {}) };
    await scenario.timeline({ cluster, manager, at, now, mark, arm, hotServer, layout, notes, log });
    await at(scenario.durationSeconds);
    if (manager) notes.managerCounts = await managerCounts(manager).catch((err) => ({ error: err.message }));
    log({ progress: load.progress() }, 'stopping the load');
    const { records, examples, counters } = await load.stop();
    if (cluster.cpu?.cpus) notes.cpus = cluster.cpu.cpus;
    return {
      scenario: scenario.name, arm, t0, records, events, examples, layout, notes, counters, window: scenario.window ?? null, phases: scenario.phases ?? [],
    };
  } finally {
    await manager?.stop();
    for (const gate of gates) gate.child.kill('SIGTERM');
    await cluster.destroy();
  }
}

// What the manager did in a run, from its metrics and audit: the holds of suspects by how they ended, the servers
// suspected at the end, and its audited actions by actor (a false alarm shows as a hold or an action nothing called for).
async function managerCounts(manager) {
  const text = await (await fetch(`${manager.base}/metrics`)).text();
  const series = (name) => Object.fromEntries(text.split('\n').filter((l) => l.startsWith(name)).map((l) => {
    const [key, value] = l.split(' ');
    return [key, Number(value)];
  }));
  const actions = {};
  for (const e of manager.audit.list({ limit: 500 })) {
    const key = `${e.action} by ${e.actor}`;
    actions[key] = (actions[key] ?? 0) + 1;
  }
  return {
    suspicionHolds: series('rethinkdb_manager_suspicion_holds_total'), suspectedAtEnd: series('rethinkdb_manager_suspected_servers'), actions,
  };
}

// A fresh shared token for the hold arm's gates and manager, in a file of its own.
function holdTokenFile() {
  const path = join(mkdtempSync(join(tmpdir(), 'eval-gate-hold-')), 'token');
  writeFileSync(path, randomBytes(32).toString('hex'));
  return path;
}

// node gate/server.js in front of `entry`; resolves once it listens, with its port and its HTTP port. tokenFile: the
// holds' token (GATE_HOLD_TOKEN_FILE), or null.
async function startGate(entry, { tokenFile = null } = {}) {
  const env = {
    ...process.env, GATE_UPSTREAM: `${entry.host}:${entry.port}`, GATE_PORT: '0', GATE_METRICS_PORT: '0', GATE_HOST: '127.0.0.1', LOG_LEVEL: 'warn',
    ...(tokenFile ? { GATE_HOLD_TOKEN_FILE: tokenFile } : {}),
  };
  const child = spawn(process.execPath, [GATE], { env: { ...env, LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'inherit'] });
  const { port, metricsPort } = await firstJsonLine(child, { what: 'the query gate', marker: 'query gate listening' });
  return { child, port, metricsPort };
}

// usertable: the busiest shard (for this seed's key stream) has its primary on hotServer, the others one per other
// server; every shard has 3 replicas including its primary. Both arms of a pair get the same layout.
async function pinLayout(cluster, { keyCount, seed, hotServer }) {
  const chooser = createKeyChooser({ keyCount, seed });
  const sample = Array.from({ length: 20000 }, () => chooser.next());
  const shards = await cluster.shardOfKeys('ycsb', 'usertable', sample);
  const load = [0, 1, 2, 3].map((i) => shards.filter((s) => s === i).length / sample.length);
  const busiest = load.indexOf(Math.max(...load));
  const others = [0, 1, 2, 3].filter((i) => i !== hotServer);
  const names = cluster.servers.map((s) => s.name);
  const primaries = [0, 1, 2, 3].map((shard) => (shard === busiest ? hotServer : others.shift()));
  const config = primaries.map((p, shard) => {
    const rest = [0, 1, 2, 3].filter((i) => i !== p);
    const replicas = [p, rest[shard % 3], rest[(shard + 1) % 3]];
    if (shard !== busiest && !replicas.includes(hotServer)) replicas[2] = hotServer;
    return { primary_replica: names[p], replicas: [...new Set(replicas)].map((i) => names[i]), nonvoting_replicas: [] };
  });
  await cluster.withConnection(async (c) => {
    await r.db('ycsb').table('usertable').config().update({ shards: config }).run(c);
    await r.db('ycsb').table('usertable').wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(c);
  });
  return { busiestShard: busiest, shardLoad: load, shards: config };
}

// The manager in this process on a loopback port, as deployed. Without a Kubernetes port, pods map to servers by
// hostname; with the lab's (CPU nodes), the monitor polls its metrics every MONITOR_POLL_INTERVAL_MS, as
// src/server.js runs it.
async function startManager(cluster, { via, env = {}, kube = null }) {
  const m = createLabManager(cluster, { via, kube, env: { LOG_LEVEL: 'warn', RETHINKDB_RECONNECT_MAX_MS: '1000', RETHINKDB_QUERY_TIMEOUT_MS: '5000', ...env } });
  const server = await new Promise((res) => { const srv = m.app.listen(0, '127.0.0.1', () => res(srv)); });
  const base = `http://127.0.0.1:${server.address().port}`;
  await m.ready();
  const timer = setInterval(() => { m.tick({ poll: false }).catch(() => {}); }, 1000);
  const monitor = m.monitor.view().enabled ? setInterval(() => { m.monitor.pollOnce().catch(() => {}); }, m.config.monitor.pollIntervalMs) : null;
  // A pod's hook: the same HTTP call its curl makes (body: JSON). Resolves with { status, body }.
  async function hook(method, path, body = undefined) {
    const res = await fetch(`${base}${path}`, body === undefined ? { method } : { method, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    return { status: res.status, body: await res.json().catch(() => null) };
  }
  async function waitOperation(href, timeoutMs = 600000) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const { body } = await hook('GET', href);
      if (body?.status !== 'running' || Date.now() > until) return body;
      await sleep(200);
    }
  }
  async function stop() {
    clearInterval(timer);
    if (monitor) clearInterval(monitor);
    server.closeAllConnections?.();
    await new Promise((res) => { server.close(res); });
    await m.shutdown(2000);
    await m.close();
  }
  // The monitor's view, with the latency trigger's decisions among its own (both raise and clear perf warnings).
  const monitorView = () => {
    const view = m.monitor.view();
    return { ...view, lastDecisions: [...view.lastDecisions, ...(m.latencyTrigger?.view().lastDecisions ?? [])] };
  };
  return {
    hook, waitOperation, stop, base, monitor: monitorView, latency: () => m.latencyTrigger?.view() ?? null, audit: m.audit,
  };
}
