// A server lost for good: after LOSS_RESTORE_AFTER_SECONDS its replicas are recreated on the others, one lost server
// at a time, never beside another migration, never from a minority's view; the wait and its reason are stated.

import { findServer } from '../../src/cluster/cluster-model.js';
import { planMigrateReplicasOff } from '../../src/planner/replica-planner.js';
import { decideLossRestore, trackLost } from '../../src/policy/loss-restore.js';
import { fixtureCluster } from '../helpers/clusters.js';

// 06: rethinkdb_3 killed (each of its shards keeps two live replicas). 07: rethinkdb_2 and rethinkdb_3 killed.
const one = fixtureCluster('06-one-server-killed-after-13.5s.json');
const two = fixtureCluster('07-two-servers-killed.json');
const healthy = fixtureCluster('01-healthy.json');
const id = (cluster, name) => findServer(cluster, name).id;
const MIN = 60000;
const AFTER = 30 * MIN;

describe('trackLost', () => {
  test('when a server the configs name is disconnected, then it is tracked from the first look on, and dropped once it is back', () => {
    const first = trackLost(one, new Map(), 1000);
    expect([...first.entries()]).toEqual([[id(one, 'rethinkdb_3'), 1000]]);
    const later = trackLost(one, first, 5000);
    expect(later.get(id(one, 'rethinkdb_3'))).toBe(1000);
    expect(trackLost(healthy, later, 9000).size).toBe(0);
  });
});

describe('decideLossRestore', () => {
  const lost3 = (since) => new Map([[id(one, 'rethinkdb_3'), since]]);

  test('when nothing is disconnected, then nothing is decided and nothing waits', () => {
    expect(decideLossRestore(healthy, { lostSince: new Map(), now: 0, afterMs: AFTER })).toMatchObject({ intents: [], waiting: [] });
  });

  test('when a server has been disconnected for less than the wait, then it waits, with the time it will be restored around', () => {
    const d = decideLossRestore(one, { lostSince: lost3(0), now: 10 * MIN, afterMs: AFTER });
    expect(d.intents).toEqual([]);
    expect(d.waiting).toEqual([{
      serverId: id(one, 'rethinkdb_3'), server: 'rethinkdb_3', since: 0, restoreAt: AFTER, reason: expect.stringContaining('disconnected for 10 min; taken for lost at 30 min'),
    }]);
  });

  test('when the wait has passed, then its replicas are migrated off, and the plan that intent runs keeps every shard\'s replica count', () => {
    const d = decideLossRestore(one, { lostSince: lost3(0), now: AFTER, afterMs: AFTER });
    expect(d.intents).toEqual([{ type: 'migrate-replicas-off', server: { id: id(one, 'rethinkdb_3'), name: 'rethinkdb_3' }, reason: expect.stringContaining('taken for lost') }]);
    expect(d.waiting).toEqual([]);
    const plan = planMigrateReplicasOff(one, id(one, 'rethinkdb_3'));
    const held = one.tables.reduce((n, t) => n + t.shards.filter((s) => s.replicas.includes(id(one, 'rethinkdb_3'))).length, 0);
    expect(plan.moves).toHaveLength(held);
    for (const move of plan.moves) {
      const shard = one.tables.find((t) => t.id === move.tableId).shards[move.shard];
      expect(shard.replicas).not.toContain(move.to);
      expect(findServer(one, move.to) ?? one.servers.find((s) => s.id === move.to)).toMatchObject({ connected: true });
    }
  });

  test('when LOSS_RESTORE_AFTER_SECONDS is 0, then nothing is ever restored, and the wait says so', () => {
    const d = decideLossRestore(one, { lostSince: lost3(0), now: 100 * MIN, afterMs: 0 });
    expect(d.intents).toEqual([]);
    expect(d.waiting[0]).toMatchObject({ restoreAt: null, reason: expect.stringContaining('only by an operator') });
  });

  test('when the lost server\'s migration is on record, or another one is, then nothing new starts', () => {
    const own = decideLossRestore(one, { lostSince: lost3(0), now: AFTER, afterMs: AFTER, migrating: [id(one, 'rethinkdb_3')] });
    expect(own.intents).toEqual([]);
    expect(own.waiting[0]).toMatchObject({ restoreAt: null, reason: expect.stringContaining('being recreated') });
    const other = decideLossRestore(one, { lostSince: lost3(0), now: AFTER, afterMs: AFTER, migrating: [id(one, 'rethinkdb_0')] });
    expect(other.intents).toEqual([]);
    expect(other.waiting[0]).toMatchObject({ restoreAt: AFTER, reason: expect.stringContaining('another migration is on record') });
  });

  test('when two of five servers are lost, then the one lost first is restored first, and the other waits for it', () => {
    const five = { ...two, servers: [...two.servers, { ...findServer(two, 'rethinkdb_0'), id: 'fifth', name: 'rethinkdb_4' }] };
    const lostSince = new Map([[id(two, 'rethinkdb_2'), 5], [id(two, 'rethinkdb_3'), 0]]);
    const d = decideLossRestore(five, { lostSince, now: AFTER + 5, afterMs: AFTER });
    expect(d.intents).toEqual([expect.objectContaining({ server: { id: id(two, 'rethinkdb_3'), name: 'rethinkdb_3' } })]);
    expect(d.waiting).toEqual([expect.objectContaining({ server: 'rethinkdb_2', reason: expect.stringContaining('rethinkdb_3 is restored first') })]);
  });

  test('when the manager sees no majority of the servers connected (two of four), then no data is moved', () => {
    const lostSince = trackLost(two, new Map(), 0);
    expect(lostSince.size).toBe(2);
    const d = decideLossRestore(two, { lostSince, now: 2 * AFTER, afterMs: AFTER });
    expect(d.intents).toEqual([]);
    expect(d.waiting.every((w) => w.reason.includes('not a majority'))).toBe(true);
  });
});
