// A server lost for good, on real 2.4.4 servers: SIGKILLed and never restarted. While it is away less than
// LOSS_RESTORE_AFTER_SECONDS, GET /v1/cluster shows the wait; then the manager recreates its replicas on the other
// servers (a nonvoting copy backfilled, then swapped in), and every shard has its three voting replicas again, all
// ready, with every document still there. Outcomes are read through the driver, not through the manager.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import {
  createRealManager, eventually, readTables, realLab, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

const lab = realLab();

const NAMES = ['ycsb.usertable', 'ycsb.accounts'];
const countRows = (index) => lab.cluster.withConnection(async (c) => Promise.all(NAMES.map((name) => {
  const [db, table] = name.split('.');
  return r.db(db).table(table).count().run(c);
})), index);

describe('a server lost for good', () => {
  test('when rethinkdb_1 stays away past LOSS_RESTORE_AFTER_SECONDS, then its replicas are recreated on the others, every shard has three ready voters, and no document is lost', async () => {
    const cluster = await startRealCluster();
    lab.cluster = cluster;
    const manager = createRealManager(cluster, { via: 0, env: { LOSS_RESTORE_AFTER_SECONDS: '8', FAILOVER_CHECK_MS: '500' } });
    lab.manager = manager;
    await waitConnected(manager);
    const rows = await countRows(0);
    const before = await readTables(cluster, 0);
    const held = NAMES.flatMap((name) => before.config[name].shards.filter((s) => s.replicas.includes('rethinkdb_1')));
    expect(held.length).toBeGreaterThan(0);
    await cluster.stopServer(1, 'SIGKILL');

    const waiting = await eventually(async () => {
      const body = (await request(manager.app).get('/v1/cluster')).body;
      return body.lostServers?.length === 1 && body.lostServers;
    }, { timeoutMs: 15000, what: 'GET /v1/cluster to list rethinkdb_1 as lost' });
    expect(waiting[0]).toMatchObject({ server: 'rethinkdb_1', reason: expect.stringContaining('taken for lost at 8 s') });

    const restored = await eventually(async () => {
      const t = await readTables(cluster, 0);
      const shards = NAMES.flatMap((name) => t.config[name].shards);
      const done = shards.every((s) => !s.replicas.includes('rethinkdb_1') && s.replicas.length === 3 && s.nonvoting_replicas.length === 0)
        && NAMES.every((name) => t.status[name].status.all_replicas_ready);
      return done && t;
    }, { timeoutMs: 90000, intervalMs: 500, what: 'rethinkdb_1\'s replicas recreated on the other servers, all ready' });
    for (const name of NAMES) {
      for (const shard of restored.config[name].shards) expect(shard.replicas.length).toBe(3);
      expect(restored.config[name].shards.map((s) => s.primary_replica)).not.toContain('rethinkdb_1');
    }
    expect(await countRows(0)).toEqual(rows);
    const events = (await request(manager.app).get('/v1/events')).body.events;
    expect(events.filter((e) => e.action === 'migrate-replicas-off').map((e) => [e.actor, e.outcome])).toEqual([['manager:loss-restore', 'completed']]);
    expect(manager.logs.some((l) => l.msg === 'a lost server\'s replicas are recreated elsewhere')).toBe(true);
    // The key's next look finds no server the configs name disconnected.
    await eventually(async () => (await request(manager.app).get('/v1/cluster')).body.lostServers?.length === 0, { timeoutMs: 5000, what: 'lostServers to be empty' });
  });
});
