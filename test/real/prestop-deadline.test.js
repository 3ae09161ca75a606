// A PRESTOP whose deadline leaves no time before the demotion's reserve (PRESTOP_DEADLINE_SECONDS=5: 4 s for the
// action, under the 5 s reserve), on real RethinkDB 2.4 servers: the heartbeat write is sent and not waited for, the
// demotion goes ahead at once, and the write lands all the same (read in rethinkdb.cluster_config through the driver).

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import {
  createRealManager, eventually, primariesOf, readTables, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(120000);

let cluster;
let m;
beforeAll(async () => {
  cluster = await startRealCluster({ size: 3, tables: [{ db: 'ycsb', table: 'usertable', shards: 3, replicas: 3, docs: 300 }] });
  m = createRealManager(cluster, { via: 0, env: { PRESTOP_DEADLINE_SECONDS: '5' } });
  await waitConnected(m);
}, 120000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

const heartbeatSecs = () => cluster.withConnection((conn) => r.db('rethinkdb').table('cluster_config').get('heartbeat')('heartbeat_timeout_secs').run(conn));

test('when PRESTOP has no time to wait for the heartbeat write, then the write is sent, the primaries move off, and the heartbeat is lowered on the server', async () => {
  expect(await heartbeatSecs()).toBe(10);
  expect(primariesOf(await readTables(cluster))).toContain('rethinkdb_1');
  const res = await request(m.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({
    primariesOff: true, outcome: 'completed',
    heartbeat: { lowered: false, reason: 'sent, not waited for: the deadline leaves no time before the demotion (it may still land)' },
  });
  expect(primariesOf(await readTables(cluster))).not.toContain('rethinkdb_1');
  await eventually(async () => (await heartbeatSecs()) === 2, { timeoutMs: 10000, what: 'the heartbeat timeout lowered to 2 s' });
  process.stdout.write(`PRESTOP with no spare time: answered in ${res.body.timings?.totalMs ?? '?'} ms, the heartbeat write sent unwaited and landed\n`);
});
