// Builds a manager on the sandbox with a virtual clock, and a memory sink for its logs.

import { Writable } from 'node:stream';
import request from 'supertest';
import { loadConfig } from '../../src/config.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createSandboxCluster } from '../../src/sandbox/sandbox-cluster.js';
import { connectSandboxHooks, createSandboxWorld } from '../../src/sandbox/sandbox-world.js';

export { createVirtualClock };

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

export function createSandboxHarness({
  env = {}, model: modelOptions = {}, kube: kubeOptions = {}, wrapSource = (s) => s, clock = createVirtualClock(), existing = null, staticToken = null,
} = {}) {
  const config = loadConfig({ LOG_LEVEL: 'info', ...env });
  const sink = createLogSink();
  const logger = createLogger({ level: config.logLevel, destination: sink.stream });
  const world = createSandboxWorld({
    config, clock, logger, wrapSource, staticToken, kubeOptions,
    // The work queue's delayed looks never fire on their own here (the clock is virtual): a test adds the key.
    timers: { setTimeout: () => null, clearTimeout: () => {} },
    existing: existing ?? (Object.keys(modelOptions).length ? { model: createSandboxCluster({ clock, ...modelOptions }) } : null),
  });
  // The sandbox's pods call their hooks through the app's routes, as the real pods' curl commands do.
  const auth = staticToken ? { authorization: `Bearer ${staticToken}` } : {};
  connectSandboxHooks(world.kube, (path) => request(world.manager.app).post(path).set(auth).then((r) => r.body));
  return { ...world.manager, ...world, clock, config, logs: sink.lines };
}

// The configured primary of each shard of a table, by server name.
export async function primaryMap(store, table = 'ycsb.usertable') {
  const cluster = await store.readCluster();
  const t = cluster.tables.find((x) => `${x.db}.${x.name}` === table);
  const name = (id) => cluster.servers.find((s) => s.id === id)?.name ?? id;
  return t.shards.map((s) => name(s.primary));
}

// The shards (table[index]) whose configured primary is this server, by server name, across all tables.
export async function primaryShardsOf(store, serverName) {
  const cluster = await store.readCluster();
  const id = cluster.servers.find((s) => s.name === serverName).id;
  return cluster.tables.flatMap((t) => t.shards.map((s, i) => (s.primary === id ? `${t.name}[${i}]` : null)).filter(Boolean));
}

// An AdmissionReview (admission.k8s.io/v1) as the API server sends it for an eviction of `pod`, and its POST to
// the manager's eviction webhook app.
export function evictionReview({ pod, namespace = 'rethinkdb', dryRun = false, subResource = 'eviction', uid = `uid-${pod}`, user = 'admin' }) {
  return {
    apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview',
    request: {
      uid, operation: 'CREATE', name: pod, namespace, dryRun, subResource,
      kind: { group: 'policy', version: 'v1', kind: 'Eviction' }, resource: { group: '', version: 'v1', resource: 'pods' },
      userInfo: { username: user }, object: { apiVersion: 'policy/v1', kind: 'Eviction', metadata: { name: pod, namespace } },
    },
  };
}
export const postReview = (webhookApp, body) => postJson(webhookApp, '/v1/admission/eviction', body);

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

// JSON POST as a client sends it, and a wait (in real time) until an operation is no longer running.
export const postJson = (app, path, body) => request(app).post(path).set('content-type', 'application/json').send(JSON.stringify(body));

export async function waitForOperation(app, href, { tries = 500 } = {}) {
  for (let i = 0; i < tries; i += 1) {
    const res = await request(app).get(href);
    if (res.body.status !== 'running') return res.body;
    await new Promise((resolve) => { setTimeout(resolve, 2); });
  }
  throw new Error(`operation ${href} still running`);
}

// A source wrapper that counts the reads of the system tables (each passed through `transform`), and notes how
// many had been made when the first table_config write came. reads.reset() starts counting again.
export function readCounter(transform = (raw) => raw) {
  const reads = {
    count: 0, beforeWrite: null, reset() { reads.count = 0; reads.beforeWrite = null; },
  };
  const wrapSource = (source) => ({
    ...source,
    readSystemTables: async () => { reads.count += 1; return transform(await source.readSystemTables()); },
    updateTableShards: async (...args) => { reads.beforeWrite ??= reads.count; return source.updateTableShards(...args); },
  });
  return { reads, wrapSource };
}
