// Builds a manager on the sandbox with a virtual clock, and a memory sink for its logs.

import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { createSandboxKube } from '../../src/sandbox/sandbox-kube.js';

// Virtual time: sleeping advances the clock at once, so waits and backfills take no real time.
export function createVirtualClock(start = Date.parse('2026-11-21T12:00:00Z')) {
  let now = start;
  return {
    now: () => now,
    sleep: async (ms) => { now += Math.max(1, ms); },
    advance: (ms) => { now += ms; },
  };
}

export function createLogSink() {
  const lines = [];
  const stream = new Writable({
    write(chunk, enc, cb) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      cb();
    },
  });
  return { stream, lines };
}

export function createSandboxHarness({ env = {}, model: modelOptions = {}, wrapSource = (s) => s } = {}) {
  const clock = createVirtualClock();
  const config = loadConfig({ LOG_LEVEL: 'info', ...env });
  const sink = createLogSink();
  const logger = createLogger({ level: config.logLevel, destination: sink.stream });
  const model = createSandboxCluster({ clock, ...modelOptions });
  const source = wrapSource(createSandboxSource(model));
  const store = createDataStore({ source, managedTables: config.managedTables });
  const kube = createSandboxKube({ model, clock });
  const manager = createManager({ config, store, kube, clock, logger });
  return { ...manager, clock, config, model, logs: sink.lines, kube };
}

// The configured primary of each shard of a table, by server name.
export async function primaryMap(store, table = 'ycsb.usertable') {
  const cluster = await store.readCluster();
  const t = cluster.tables.find((x) => `${x.db}.${x.name}` === table);
  const name = (id) => cluster.servers.find((s) => s.id === id)?.name ?? id;
  return t.shards.map((s) => name(s.primary));
}
