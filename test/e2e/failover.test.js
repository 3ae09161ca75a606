// After a failover RethinkDB did on its own (a crash, no PRESTOP), on the sandbox: the work queue's `failover` key
// makes the acting primaries the configured ones, audited, and a dry run of nothing is ever written by it.

import request from 'supertest';
import { FAILOVER_KEY } from '../../src/events/failover-events.js';
import { createSandboxHarness, primaryMap } from '../helpers/harness.js';

const lostShards = (map, server) => Object.entries(map).filter(([, primary]) => primary === server).map(([shard]) => shard);

async function crashedAndFailedOver(env = {}) {
  const h = createSandboxHarness({ env });
  await h.lead();
  await h.queue.idle();
  const before = await primaryMap(h.store);
  h.model.crashServer('rethinkdb_1', { mode: 'kill' });
  // Past RethinkDB's election after a kill.
  h.clock.advance(5000);
  return { h, before };
}

describe('a failover RethinkDB did on its own', () => {
  test('when rethinkdb_1 crashed and others act for its shards, then the failover key writes them as configured primaries, once, and audits it', async () => {
    const { h, before } = await crashedAndFailedOver();
    const lost = lostShards(before, 'rethinkdb_1');
    expect(lost.length).toBeGreaterThan(0);
    expect(await primaryMap(h.store)).toEqual(before);
    h.queue.add(FAILOVER_KEY);
    await h.queue.idle();
    const after = await primaryMap(h.store);
    for (const shard of lost) expect(after[shard]).not.toBe('rethinkdb_1');
    for (const [shard, primary] of Object.entries(before)) if (primary !== 'rethinkdb_1') expect(after[shard]).toBe(primary);
    const cluster = await h.store.readCluster();
    for (const table of cluster.tables) for (const shard of table.shards) expect(shard.acting).toEqual([shard.primary]);
    const events = (await request(h.app).get('/v1/events')).body;
    expect(JSON.stringify(events)).toContain('adopt-acting-primaries');
    expect(h.audit.list({ limit: 10 }).filter((e) => e.action === 'adopt-acting-primaries').map((e) => e.actor)).toEqual(['manager:failover']);
    // A second look finds nothing to do.
    const again = await h.failover.reconcileFailover();
    expect(again).toMatchObject({ action: 'none' });
    expect(await h.metrics.render()).toMatch(/rethinkdb_manager_work_queue_adds_total\{queue="manager"\} [2-9]/);
  });

  test('when FAILOVER_ADOPT is off, then the config keeps naming the lost server', async () => {
    const { h, before } = await crashedAndFailedOver({ FAILOVER_ADOPT: 'false' });
    h.queue.add(FAILOVER_KEY);
    await h.queue.idle();
    expect(await primaryMap(h.store)).toEqual(before);
    expect(await h.failover.reconcileFailover()).toEqual({ event: 'FAILOVER', action: 'none', reason: 'FAILOVER_ADOPT is off' });
  });

  test('when RethinkDB has not elected anyone yet, then nothing is written, and the next look adopts', async () => {
    const h = createSandboxHarness();
    await h.lead();
    await h.queue.idle();
    const before = await primaryMap(h.store);
    h.model.crashServer('rethinkdb_1', { mode: 'cut' });
    const first = await h.failover.reconcileFailover();
    expect(first.action).toBe('none');
    expect(await primaryMap(h.store)).toEqual(before);
    h.clock.advance(30000);
    expect(await h.failover.reconcileFailover()).toMatchObject({ action: 'adopt', outcome: 'completed' });
  });
});
