// Real RethinkDB servers for the tests: the paper's tables on a lab cluster, a manager wired to it through the real
// driver path (src/rethinkdb/connect.js), and reads of table_config/table_status straight through the driver.

import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import r from 'rethinkdb';
import { createRethinkDbCluster, resolveBinary } from '../../bench/lab/rethinkdb-cluster.js';
import { loadConfig } from '../../src/config.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createRethinkDbStore } from '../../src/rethinkdb/connect.js';
import { createLogSink } from './harness.js';

// The paper's data: ycsb.usertable 4 shards x 3 replicas, and a second table.
export const PAPER_TABLES = [
  { db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 },
  { db: 'ycsb', table: 'accounts', shards: 2, replicas: 3, docs: 200 },
];

// Starts `size` servers and creates the tables. Fails (never skips) without a binary, saying how to provide one.
// The loopback ports are picked free and then released before the server binds them, so a test file running in
// parallel can take one first: such a start ("Address already in use" in a server's log) is tried once more.
// labIndex: a netns lab's own bridge and subnet (the evaluation uses 0).
export async function startRealCluster({ size = 4, tables = PAPER_TABLES, network = 'loopback', labIndex = 0 } = {}, attempt = 1) {
  const cluster = createRethinkDbCluster({ binary: resolveBinary(), size, network, labIndex });
  try {
    await cluster.start();
    await cluster.createTables(tables);
  } catch (err) {
    const logs = serverLogs(cluster);
    await cluster.destroy();
    if (attempt === 1 && /already in use/i.test(logs)) return startRealCluster({ size, tables, network, labIndex }, 2);
    throw new Error(`${err.message}\n${logs}`);
  }
  return cluster;
}

// The tail of each server's log, for a start that failed (the directory goes with destroy()).
function serverLogs(cluster) {
  return cluster.servers.map((s) => {
    const path = join(cluster.baseDir, `${s.hostname}.log`);
    return existsSync(path) ? `${s.hostname}.log: ${readFileSync(path, 'utf8').slice(-600)}` : '';
  }).filter(Boolean).join('\n');
}

// A manager on the real cluster, connected through server `via` (system clock: real elections take real time).
export function createRealManager(cluster, { via = 0, env = {}, kube = null } = {}) {
  const s = cluster.servers[via];
  const config = loadConfig({
    RETHINKDB_HOST: s.host, RETHINKDB_PORT: String(s.driverPort), WAIT_POLL_INTERVAL_MS: '100', RETHINKDB_RECONNECT_MIN_MS: '100',
    RETHINKDB_RECONNECT_MAX_MS: '500', RETHINKDB_QUERY_TIMEOUT_MS: '3000', MONITOR_ENABLED: 'false', LOG_LEVEL: 'info', AUTH_MODE: 'none', ...env,
  });
  const sink = createLogSink();
  const logger = createLogger({ level: config.logLevel, destination: sink.stream });
  const clock = createSystemClock();
  const { store, connections, close } = createRethinkDbStore({ r, config, clock, logger });
  const manager = createManager({ config, store, kube, clock, logger });
  return { ...manager, config, logs: sink.lines, connections, close: async () => { await manager.marks.flush(); await close(); } };
}

// Until the manager's connection is up (it connects in the background) and, as src/server.js does at start-up,
// it has reconciled its persisted state (it takes no work before).
export async function waitConnected(m, timeoutMs = 10000) {
  const until = Date.now() + timeoutMs;
  while (!m.connections.status().connected) {
    if (Date.now() > until) throw new Error(`manager not connected: ${m.connections.status().lastError}`);
    await new Promise((res) => { setTimeout(res, 50); });
  }
  await m.reconcile();
}

// table_config and table_status by names, read through the driver, not through the manager.
export async function readTables(cluster, index = null) {
  return cluster.withConnection(async (c) => {
    const configs = await r.db('rethinkdb').table('table_config').coerceTo('array').run(c);
    const statuses = await r.db('rethinkdb').table('table_status').coerceTo('array').run(c);
    const byName = (list) => Object.fromEntries(list.map((t) => [`${t.db}.${t.name}`, t]));
    return { config: byName(configs), status: byName(statuses) };
  }, index);
}

export const primariesOf = (tables, name = 'ycsb.usertable') => tables.config[name].shards.map((s) => s.primary_replica);
export const actingOf = (tables, name = 'ycsb.usertable') => tables.status[name].shards.map((s) => s.primary_replicas);
export const replicasOf = (tables, name = 'ycsb.usertable') => tables.config[name].shards.map((s) => [...s.replicas].sort());

// Polls fn until it returns a truthy value (real time), or throws with the last value seen.
export async function eventually(fn, { timeoutMs = 20000, intervalMs = 100, what = 'condition' } = {}) {
  const until = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try { last = await fn(); if (last) return last; } catch (err) { last = err.message; }
    if (Date.now() > until) throw new Error(`${what} not reached within ${timeoutMs} ms; last: ${JSON.stringify(last)}`);
    await new Promise((res) => { setTimeout(res, intervalMs); });
  }
}
