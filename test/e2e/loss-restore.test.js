// A server lost for good, on the sandbox: the work queue's `loss-restore` key shows the wait in GET /v1/cluster, then,
// after LOSS_RESTORE_AFTER_SECONDS, recreates the lost server's replicas on the other servers (audited as
// manager:loss-restore), with every shard at its replica count throughout; a server that comes back first is left alone.

import request from 'supertest';
import { LOSS_RESTORE_KEY } from '../../src/events/loss-restore-events.js';
import { createSandboxHarness } from '../helpers/harness.js';

async function look(h) {
  h.queue.add(LOSS_RESTORE_KEY);
  await h.queue.idle();
  for (let round = 0; round < 100 && h.operations.runningCount() > 0; round += 1) await h.operations.drain();
}

// The key's own cadence: a look every 10 s (a tenth of the wait, at most 10 s), for `ms` of virtual time.
async function lookEvery10sFor(h, ms) {
  for (let t = 0; t < ms; t += 10000) {
    h.clock.advance(10000);
    await look(h);
  }
}

async function replicaCounts(h) {
  const cluster = await h.store.readCluster();
  return cluster.tables.flatMap((t) => t.shards.map((s) => s.replicas.length - s.nonvoting.length));
}

describe('a server lost for good', () => {
  test('when rethinkdb_1 stays disconnected past LOSS_RESTORE_AFTER_SECONDS, then its replicas are recreated elsewhere, and no shard is ever short of one', async () => {
    // Every config write, as the sandbox receives it: the voting replicas of each shard it names.
    const writes = [];
    const wrapSource = (source) => ({
      ...source,
      updateTableShards: async (tableId, raw) => {
        writes.push(raw.map((shard) => shard.replicas.filter((id) => !shard.nonvoting_replicas.includes(id))));
        return source.updateTableShards(tableId, raw);
      },
    });
    const h = createSandboxHarness({ env: { LOSS_RESTORE_AFTER_SECONDS: '600' }, wrapSource });
    await h.lead();
    await h.queue.idle();
    const counts = await replicaCounts(h);
    const lostId = (await h.store.readCluster()).servers.find((s) => s.name === 'rethinkdb_1').id;
    h.model.crashServer('rethinkdb_1', { mode: 'kill' });
    h.clock.advance(5000);
    await look(h);
    const waiting = (await request(h.app).get('/v1/cluster')).body.lostServers;
    expect(waiting).toEqual([expect.objectContaining({ server: 'rethinkdb_1', reason: expect.stringContaining('taken for lost at 10 min') })]);
    expect(Date.parse(waiting[0].restoreAt) - Date.parse(waiting[0].since)).toBe(600000);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toEqual([]);

    await lookEvery10sFor(h, 600000);
    const [restore] = h.operations.list().filter((o) => o.kind === 'migrate-replicas-off');
    expect(restore).toMatchObject({ status: 'succeeded', params: { server: 'rethinkdb_1' } });
    const cluster = await h.store.readCluster();
    expect(cluster.servers.map((s) => s.id)).not.toContain(lostId);
    for (const table of cluster.tables) for (const shard of table.shards) expect(shard.replicas).not.toContain(lostId);
    expect(await replicaCounts(h)).toEqual(counts);
    // Each move stages a nonvoting copy, then swaps it in for the lost one: no write ever leaves a shard fewer voters.
    expect(writes.length).toBeGreaterThanOrEqual(2);
    for (const shards of writes) for (const voters of shards) expect(voters.length).toBeGreaterThanOrEqual(Math.min(...counts));
    expect(h.audit.list({ limit: 20 }).filter((e) => e.action === 'migrate-replicas-off').map((e) => e.actor)).toEqual(['manager:loss-restore']);
    expect(await h.metrics.render()).toMatch(/rethinkdb_manager_loss_restores_total 1/);
    // Nothing is named by the configs any more: nothing waits, nothing starts again.
    await look(h);
    expect((await request(h.app).get('/v1/cluster')).body.lostServers).toEqual([]);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toHaveLength(1);
  });

  test('when the server comes back before the wait is over, then nothing moves, and it is not counted as lost any more', async () => {
    const h = createSandboxHarness({ env: { LOSS_RESTORE_AFTER_SECONDS: '600' } });
    await h.lead();
    h.model.crashServer('rethinkdb_1', { mode: 'kill' });
    h.clock.advance(5000);
    await look(h);
    h.model.restoreServer('rethinkdb_1');
    h.clock.advance(300000);
    await look(h);
    h.clock.advance(400000);
    await look(h);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toEqual([]);
    expect((await request(h.app).get('/v1/cluster')).body.lostServers).toEqual([]);
  });

  test('when the looks stop for a while (this replica did not lead), then the wait counts again from the next look', async () => {
    const h = createSandboxHarness({ env: { LOSS_RESTORE_AFTER_SECONDS: '600' } });
    await h.lead();
    h.model.crashServer('rethinkdb_1', { mode: 'kill' });
    h.clock.advance(5000);
    await look(h);
    h.clock.advance(700000);
    await look(h);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toEqual([]);
    const [waiting] = (await request(h.app).get('/v1/cluster')).body.lostServers;
    expect(Date.parse(waiting.since)).toBe(h.clock.now());
    await lookEvery10sFor(h, 600000);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toHaveLength(1);
  });

  test('when LOSS_RESTORE_AFTER_SECONDS is 0, then the lost server waits for an operator, and GET /v1/cluster says so', async () => {
    const h = createSandboxHarness({ env: { LOSS_RESTORE_AFTER_SECONDS: '0' } });
    await h.lead();
    h.model.crashServer('rethinkdb_1', { mode: 'kill' });
    h.clock.advance(7 * 86400000);
    await look(h);
    expect(h.operations.list().filter((o) => o.kind === 'migrate-replicas-off')).toEqual([]);
    expect((await request(h.app).get('/v1/cluster')).body.lostServers).toEqual([expect.objectContaining({ restoreAt: null, reason: expect.stringContaining('only by an operator') })]);
  });
});
