// RethinkDB proxies (`rethinkdb proxy --join ...`, the client entry that deploy/ ships) on real 2.4.4 servers: they
// appear in no system table the manager reads, so the manager never takes one for a server, and a manager whose
// only seed is a proxy reads the cluster and drains a server through it. What the proxy answered is recorded in
// test/data/rethinkdb-2.4.4/proxy-system-tables.json.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import request from 'supertest';
import { postJson } from '../helpers/harness.js';
import {
  actingOf, createRealManager, primariesOf, readTables, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(90000);

const TABLES = [{ db: 'ycsb', table: 'usertable', shards: 3, replicas: 3, docs: 300 }];
let cluster;
let proxy;
let m;

beforeAll(async () => {
  cluster = await startRealCluster({ size: 3, tables: TABLES });
  proxy = await cluster.addProxy();
  // The manager's only seed is the proxy.
  m = createRealManager(cluster, { env: { RETHINKDB_HOST: proxy.host, RETHINKDB_PORT: String(proxy.driverPort) } });
  await waitConnected(m);
}, 120000);

afterAll(async () => {
  await m?.close();
  await cluster?.destroy();
});

async function throughProxy(fn) {
  const conn = await r.connect({ host: proxy.host, port: proxy.driverPort });
  try {
    return await fn(conn);
  } finally {
    await conn.close();
  }
}

describe('a RethinkDB proxy beside real servers', () => {
  test('when the system tables are read through the proxy, then they list the three servers and no proxy; the proxy calls itself one, with no name', async () => {
    const seen = await throughProxy(async (conn) => ({
      self: await conn.server(),
      serverStatus: (await r.db('rethinkdb').table('server_status').coerceTo('array').run(conn)).map((s) => s.name).sort(),
      serverConfig: (await r.db('rethinkdb').table('server_config').coerceTo('array').run(conn)).map((s) => s.name).sort(),
      statsServers: (await r.db('rethinkdb').table('stats').filter((s) => s('id').nth(0).eq('server')).coerceTo('array').run(conn)).map((s) => s.server).sort(),
    }));
    expect(seen.self).toEqual({ id: expect.stringMatching(/^proxy-[0-9a-f-]{36}$/), proxy: true });
    const names = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'];
    expect(seen).toMatchObject({ serverStatus: names, serverConfig: names, statsServers: names });
  });

  test('when the manager\'s only seed is a proxy, then its cluster view has exactly the servers, and it says it is connected through the proxy', async () => {
    expect(m.connections.status().via).toEqual({ host: proxy.host, port: proxy.driverPort, server: null });
    const view = (await request(m.app).get('/v1/cluster')).body;
    expect(view.servers.map((s) => [s.name, s.connected]).sort()).toEqual([['rethinkdb_0', true], ['rethinkdb_1', true], ['rethinkdb_2', true]]);
  });

  test('when a server is drained through a proxy-connected manager, then its primaries move and a client entering through the proxy still writes', async () => {
    const res = await postJson(m.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'completed', settled: true, notDone: [] });
    const t = await readTables(cluster);
    expect(primariesOf(t, 'ycsb.usertable')).not.toContain('rethinkdb_1');
    expect(actingOf(t, 'ycsb.usertable')).toEqual(primariesOf(t, 'ycsb.usertable').map((p) => [p]));
    const written = await throughProxy((conn) => r.db('ycsb').table('usertable').insert({ id: 'through-the-proxy' }, { conflict: 'replace' }).run(conn));
    expect(written.errors).toBe(0);
  });
});
