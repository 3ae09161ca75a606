// A long PERFWARNING withdrawn while its migration runs, on four real RethinkDB 2.4 servers: the restore waits for
// the migration (real backfills) to end, then the next ticks move a fair share of replicas back to the server and
// level the primaries. Until now this was seen only on the sandbox. Outcomes are read through the driver.

import { jest } from '@jest/globals';
import request from 'supertest';
import {
  createRealManager, eventually, readTables, replicasOf, settled, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';
import { postJson } from '../helpers/harness.js';

jest.setTimeout(120000);

let cluster;
let m;
beforeAll(async () => {
  cluster = await startRealCluster();
  m = createRealManager(cluster, { env: { MONITOR_ENABLED: 'false', PERFWARNING_LONG_SECONDS: '30' } });
  await waitConnected(m);
}, 120000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

const replicasOn = (t, name) => Object.keys(t.config).reduce((n, table) => n + replicasOf(t, table).filter((rs) => rs.includes(name)).length, 0);

describe('a long PERFWARNING that ends while its replicas migrate off', () => {
  test('when it is withdrawn mid-migration, then the restore waits; once the migration has ended, the ticks move replicas back to rethinkdb_1 and it gets primaries again', async () => {
    const before = await readTables(cluster);
    const share = replicasOn(before, 'rethinkdb_1');
    expect(share).toBeGreaterThan(0);
    const warned = await postJson(m.app, '/v1/hooks/perfwarning', { pod: 'rethinkdb-1', durationSeconds: 600 });
    expect(warned.status).toBe(200);
    const href = warned.body.pods[0].migration?.href;
    expect(href).toBeTruthy();

    const ended = await request(m.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-1');
    expect(ended.status).toBe(200);
    const op = (await request(m.app).get(href)).body;
    // The withdrawal came while the migration ran (else this run proves nothing about waiting).
    expect(ended.body.restore).toMatchObject({ action: 'wait', reason: expect.stringMatching(/migration of rethinkdb_1's replicas is still under way/) });
    expect(['running', 'succeeded']).toContain(op.status);

    // The migration finishes by itself; the restore stays pending meanwhile.
    const done = await eventually(async () => {
      const o = (await request(m.app).get(href)).body;
      return o.status !== 'running' && o;
    }, { timeoutMs: 60000, what: 'the migration to end' });
    expect(done.status).toBe('succeeded');
    const off = await readTables(cluster);
    expect(replicasOn(off, 'rethinkdb_1')).toBe(0);
    expect(await m.marks.restores()).toEqual([expect.objectContaining({ pod: 'rethinkdb-1' })]);

    // The ticks retry the restore: replicas back (add-server), then primaries.
    const t = await eventually(async () => {
      await m.tick({ poll: false });
      if ((await m.marks.restores()).length > 0) return false;
      const running = (await request(m.app).get('/v1/operations')).body.operations.some((o) => o.status === 'running');
      if (running) return false;
      const now = await settled(cluster);
      return now && replicasOn(now, 'rethinkdb_1') > 0 && now;
    }, { timeoutMs: 90000, intervalMs: 500, what: 'replicas back on rethinkdb_1' });
    // A fair share of the replicas (add-server), not necessarily what it had before.
    const total = Object.keys(t.config).reduce((n, table) => n + replicasOf(t, table).flat().length, 0);
    expect(replicasOn(t, 'rethinkdb_1')).toBeGreaterThanOrEqual(Math.floor(total / 4));
    for (const table of Object.keys(t.config)) expect(replicasOf(t, table).every((rs) => rs.length === 3)).toBe(true);
    const primaries = Object.keys(t.config).flatMap((table) => t.config[table].shards.map((s) => s.primary_replica));
    expect(primaries).toContain('rethinkdb_1');
    expect(await m.marks.perfWarnings()).toEqual([]);
  });
});
