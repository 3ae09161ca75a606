// A drain writes more tables than it writes at once (TABLE_WRITE_CONCURRENCY): the busiest go first, so that a
// deadline cuts the quiet ones. End to end on the sandbox through the PRESTOP route, with rethinkdb.stats rows
// supplied by the source (the sandbox models no traffic).

import request from 'supertest';
import { paperTopology } from '../../src/sandbox/sandbox-cluster.js';
import { createSandboxHarness } from '../helpers/harness.js';

// The paper's cluster with three tables laid out as its usertable: rethinkdb_1 is primary of one shard of each.
function threeTables() {
  const paper = paperTopology();
  const [usertable] = paper.tables;
  return { ...paper, tables: ['a', 'b', 'c'].map((name) => ({ ...usertable, name, docCount: 1000 })) };
}

// The harness, with the source's table writes recorded (table ids, in order) and its stats rows from `traffic`:
// (cluster) -> rows, or a function that throws.
function harness({ env, traffic }) {
  const written = [];
  let statsReads = 0;
  let cluster = null;
  const h = createSandboxHarness({
    env,
    model: { topology: threeTables() },
    wrapSource: (source) => ({
      ...source,
      updateTableShards: async (tableId, shards) => { written.push(tableId); return source.updateTableShards(tableId, shards); },
      readTableServerStats: async () => { statsReads += 1; return traffic(cluster); },
    }),
  });
  return {
    h,
    written,
    statsReads: () => statsReads,
    // The cluster before the event, which `traffic` describes.
    async prepare() { cluster = await h.store.readCluster(); return cluster; },
  };
}

// The tables whose primaries rethinkdb_1 holds, in the cluster's order: what its PRESTOP writes.
function drained(cluster) {
  const r1 = cluster.servers.find((s) => s.name === 'rethinkdb_1').id;
  return { r1, tables: cluster.tables.filter((t) => t.shards.some((sh) => sh.primary === r1)).map((t) => t.id) };
}

// One row per table and server: the last drained table busy on rethinkdb_1, every other pair at 1 doc/s.
function lastTableBusy(cluster) {
  const { r1, tables } = drained(cluster);
  const busy = tables[tables.length - 1];
  return cluster.tables.flatMap((t) => cluster.servers.map((s) => ({
    id: ['table_server', t.id, s.id], query_engine: { read_docs_per_sec: t.id === busy && s.id === r1 ? 500 : 1 },
  })));
}

describe('the order of a drain\'s table writes', () => {
  test('when a PRESTOP writes more tables than it writes at once, then the traffic is read once and the busiest table is written first', async () => {
    const t = harness({ env: { TABLE_WRITE_CONCURRENCY: '1' }, traffic: lastTableBusy });
    const { tables } = drained(await t.prepare());
    expect(tables).toHaveLength(3);
    const res = await request(t.h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(t.statsReads()).toBe(1);
    expect(t.written).toEqual([tables[tables.length - 1], ...tables.slice(0, -1)]);
  });

  test('when the tables fit in one round of writes, then no traffic is read and they are written in the plan\'s order', async () => {
    const t = harness({ env: { TABLE_WRITE_CONCURRENCY: '8' }, traffic: lastTableBusy });
    const { tables } = drained(await t.prepare());
    const res = await request(t.h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(t.statsReads()).toBe(0);
    expect([...t.written].sort()).toEqual([...tables].sort());
  });

  test('when the traffic cannot be read, then the PRESTOP still moves every primary, in the plan\'s order, and logs why', async () => {
    const t = harness({ env: { TABLE_WRITE_CONCURRENCY: '1' }, traffic: () => { throw new Error('stats unavailable'); } });
    const { tables } = drained(await t.prepare());
    const res = await request(t.h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.status).toBe(200);
    expect(res.body.primariesOff).toBe(true);
    expect(t.statsReads()).toBe(1);
    expect(t.written).toEqual(tables);
    expect(t.h.logs.some((l) => l.msg === 'traffic not read; writing the tables in the plan\'s order' && l.err === 'stats unavailable')).toBe(true);
  });
});
