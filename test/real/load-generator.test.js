// The load generator against one real RethinkDB 2.4 server on loopback: load 1,000 keys, 200 ops/s for 3 s.
// Fails (does not skip) when the server binary is missing: set RETHINKDB_BINARY.

import { performance } from 'node:perf_hooks';
import r from 'rethinkdb';
import { createLoadGenerator } from '../../bench/evaluate/load-generator.js';
import { bucketize, summarize } from '../../bench/evaluate/stats.js';
import { createRethinkDbCluster, resolveBinary } from '../lab/rethinkdb-cluster.js';

const DB = 'ycsb';
const TABLE = 'usertable';
const KEY_COUNT = 1000;
const RATE_OPS_PER_SEC = 200;
const RUN_MS = 3000;

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

async function createTable(server) {
  const conn = await r.connect({ host: server.host, port: server.driverPort });
  try {
    await r.dbCreate(DB).run(conn);
    await r.db(DB).tableCreate(TABLE).run(conn);
    await r.db(DB).table(TABLE).wait({ waitFor: 'all_replicas_ready', timeout: 30 }).run(conn);
  } finally {
    await conn.close();
  }
}

describe('load generator on a real RethinkDB server', () => {
  let server = null;
  let run = null;
  let loaded = null;
  let stoppedAtMs = null;

  beforeAll(async () => {
    const lab = createRethinkDbCluster({ binary: resolveBinary(), size: 1 });
    await lab.start().catch(async (err) => { await lab.destroy(); throw err; });
    server = { ...lab.servers[0], stop: () => lab.destroy(), addProxy: () => lab.addProxy() };
    await createTable(server);
    const generator = createLoadGenerator({
      r, entries: [{ name: 'rethinkdb_0', host: server.host, port: server.driverPort }], db: DB, table: TABLE,
      rateOpsPerSec: RATE_OPS_PER_SEC, keyCount: KEY_COUNT, seed: 1, countWrites: true,
    });
    loaded = await generator.load(KEY_COUNT, { batch: 250 });
    await generator.start();
    await sleep(RUN_MS);
    stoppedAtMs = performance.now();
    run = await generator.stop();
  }, 90000);

  afterAll(async () => {
    await server?.stop();
  }, 30000);

  test('when 1,000 keys are loaded, then every YCSB record is in the table', async () => {
    expect(loaded.inserted + loaded.replaced + loaded.unchanged).toBe(KEY_COUNT);
    const conn = await r.connect({ host: server.host, port: server.driverPort });
    try {
      expect(await r.db(DB).table(TABLE).count().run(conn)).toBe(KEY_COUNT);
      const doc = await r.db(DB).table(TABLE).get('user999').run(conn);
      expect(Object.keys(doc).sort()).toEqual(['field0', 'field1', 'field2', 'field3', 'field4', 'field5', 'field6', 'field7', 'field8', 'field9', 'id']);
    } finally {
      await conn.close();
    }
  });

  test('when run at 200 ops/s for 3 s, then about 600 ops are issued, one every 5 ms, and all succeed', () => {
    const summary = summarize(run.records, { t0: run.t0 });
    // open loop: the count follows the time that really passed (a busy machine sleeps a little longer than 3 s;
    // Node's timers run on libuv's cached loop clock, so a 3 s sleep can also end a fraction of a millisecond
    // early by performance.now(), when the op due at exactly 3 s is not yet due: 600 is the floor, not 601)
    const dueBeforeStop = Math.floor((stoppedAtMs - run.t0) / (1000 / RATE_OPS_PER_SEC)) + 1;
    expect(run.records.length).toBeGreaterThanOrEqual(Math.max(600, dueBeforeStop));
    expect(run.records.length).toBeLessThanOrEqual(dueBeforeStop + 2);
    expect(run.records.every((rec, i) => rec.i === i && Math.abs(rec.startMs - run.t0 - i * 5) < 1e-6)).toBe(true);
    expect({ failed: summary.failed, examples: run.examples }).toEqual({ failed: 0, examples: {} });
    expect(summary.byKind.read.attempted).toBeGreaterThan(200);
    expect(summary.byKind.update.attempted).toBeGreaterThan(200);
  });

  test('when every update counts, then the counters read back are the updates acknowledged, one for one', async () => {
    const updates = run.records.filter((rec) => rec.kind === 'update');
    expect(run.counters).toMatchObject({
      ok: true, missing: 0, beyond: 0, acked: updates.length, unknown: 0, failed: 0,
    });
    const conn = await r.connect({ host: server.host, port: server.driverPort });
    try {
      expect(await r.db(DB).table(TABLE).sum((d) => d('n').default(0)).run(conn)).toBe(updates.length);
    } finally {
      await conn.close();
    }
  });

  // The evaluation's hotspot-proxy scenario sends every client through a query router.
  test('when the lab adds a rethinkdb proxy, then a client entering through it reads the server\'s table, and the proxy says it is one', async () => {
    const proxy = await server.addProxy();
    const conn = await r.connect({ host: proxy.host, port: proxy.driverPort });
    try {
      expect(await conn.server()).toMatchObject({ proxy: true });
      expect(await r.db(DB).table(TABLE).count().run(conn)).toBe(KEY_COUNT);
    } finally {
      await conn.close();
    }
  });

  test('when the ops are bucketed, then each full second holds about 200 and latencies are sane', () => {
    const buckets = bucketize(run.records, { t0: run.t0 }).slice(0, 3);
    expect(buckets.map((b) => b.attempted)).toEqual([200, 200, 200]);
    for (const { latency } of buckets) {
      expect(latency.p50).toBeGreaterThan(0);
      // generous: a shared test machine, and updates wait for the disk (durability hard)
      expect(latency.p50).toBeLessThan(1000);
      expect(latency.max).toBeLessThan(5000);
    }
  });
});
