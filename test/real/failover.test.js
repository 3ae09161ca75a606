// A failover RethinkDB does on its own (a server SIGKILLed, no PRESTOP), on real 2.4.4 servers: the manager makes
// the acting primaries the configured ones (FAILOVER_ADOPT), so that the server's return hands nothing back; with
// FAILOVER_ADOPT off, the config keeps naming the lost server and RethinkDB gives it its shards back when it returns.
// Outcomes are read through the driver (table_config / table_status), not through the manager.

import { jest } from '@jest/globals';
import request from 'supertest';
import {
  actingOf, createRealManager, eventually, primariesOf, readTables, realLab, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

const lab = realLab();

const NAMES = ['ycsb.usertable', 'ycsb.accounts'];
const shardsOf = (t) => NAMES.flatMap((name) => primariesOf(t, name).map((primary, shard) => ({
  name, shard, primary, acting: actingOf(t, name)[shard],
})));

// rethinkdb_1 is SIGKILLed (the manager is connected through rethinkdb_0); returns the shards it was configured
// primary of, and the tables once RethinkDB has elected another acting primary for each.
async function killAndWaitForFailover() {
  const before = await readTables(lab.cluster);
  const lostShards = shardsOf(before).filter((s) => s.primary === 'rethinkdb_1');
  expect(lostShards.length).toBeGreaterThan(0);
  await lab.cluster.stopServer(1, 'SIGKILL');
  const failedOver = await eventually(async () => {
    const t = await readTables(lab.cluster, 0);
    const now = shardsOf(t).filter((s) => lostShards.some((l) => l.name === s.name && l.shard === s.shard));
    return now.every((s) => s.acting.length === 1 && s.acting[0] !== 'rethinkdb_1') && t;
  }, { timeoutMs: 30000, what: 'RethinkDB to elect acting primaries for rethinkdb_1\'s shards' });
  return { lostShards, failedOver };
}

async function restartAndSettle() {
  await lab.cluster.restartServer(1);
  return eventually(async () => {
    const t = await readTables(lab.cluster, 0);
    return NAMES.every((name) => t.status[name].status.all_replicas_ready) && shardsOf(t).every((s) => s.acting.length === 1 && s.acting[0] === s.primary) && t;
  }, { timeoutMs: 60000, what: 'rethinkdb_1 back, every replica ready and every shard acted for by its configured primary' });
}

describe('a failover RethinkDB did on its own', () => {
  test('when the configured primary of some shards is SIGKILLed, then the manager writes the acting primaries as configured, and the server\'s return hands nothing back', async () => {
    lab.cluster = await startRealCluster();
    lab.manager = createRealManager(lab.cluster, { via: 0, env: { FAILOVER_CHECK_MS: '500' } });
    await waitConnected(lab.manager);
    const { lostShards } = await killAndWaitForFailover();
    const adopted = await eventually(async () => {
      const t = await readTables(lab.cluster, 0);
      const now = shardsOf(t).filter((s) => lostShards.some((l) => l.name === s.name && l.shard === s.shard));
      return now.every((s) => s.primary === s.acting[0]) && t;
    }, { timeoutMs: 15000, what: 'the manager to name the acting primaries in table_config' });
    expect(shardsOf(adopted).map((s) => s.primary)).not.toContain('rethinkdb_1');
    expect(lab.manager.logs.some((l) => l.msg === 'failover: adopting the acting primaries')).toBe(true);
    const audit = await request(lab.manager.app).get('/v1/events');
    expect(audit.status).toBe(200);
    expect(JSON.stringify(audit.body)).toContain('adopt-acting-primaries');
    const back = await restartAndSettle();
    // No hand-back: the configured primaries are the adopted ones, and rethinkdb_1 acts for nothing.
    expect(shardsOf(back).map((s) => `${s.name}[${s.shard}] ${s.primary}`)).toEqual(shardsOf(adopted).map((s) => `${s.name}[${s.shard}] ${s.primary}`));
    expect(shardsOf(back).flatMap((s) => s.acting)).not.toContain('rethinkdb_1');
  });

  test('when FAILOVER_ADOPT is off, then table_config keeps naming the lost server, and RethinkDB hands its shards back when it returns', async () => {
    lab.cluster = await startRealCluster();
    lab.manager = createRealManager(lab.cluster, { via: 0, env: { FAILOVER_ADOPT: 'false', FAILOVER_CHECK_MS: '500' } });
    await waitConnected(lab.manager);
    const { lostShards } = await killAndWaitForFailover();
    await new Promise((resolve) => { setTimeout(resolve, 3000); });
    const still = await readTables(lab.cluster, 0);
    const lostNow = shardsOf(still).filter((s) => lostShards.some((l) => l.name === s.name && l.shard === s.shard));
    expect(lostNow.map((s) => s.primary)).toEqual(lostShards.map(() => 'rethinkdb_1'));
    const back = await restartAndSettle();
    expect(shardsOf(back).filter((s) => s.acting[0] === 'rethinkdb_1').length).toBe(lostShards.length);
  });
});
