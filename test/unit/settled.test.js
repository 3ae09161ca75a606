// Whether a change has taken effect (src/planner/settled.js), on hand-made reads: what each wait of the reconfigurer
// still finds pending.

import {
  actingPending, primariesPending, raftLeadersPending, replicaReadyPending,
} from '../../src/planner/settled.js';

const servers = ['a', 'b', 'c'].map((id) => ({ id, name: `rethinkdb_${id}`, connected: id !== 'c', tags: [], hostname: id, canonicalAddresses: [] }));
// One table, one shard on a, b, c (c disconnected); overrides per test.
function read(shard = {}, { raftLeader = 'a', backfills = [] } = {}) {
  return {
    servers,
    backfills,
    tables: [{
      id: 't', db: 'db', name: 't', raftLeader,
      shards: [{
        index: 0, primary: 'a', replicas: ['a', 'b', 'c'], nonvoting: [], acting: ['a'], states: { a: 'ready', b: 'ready', c: 'disconnected' }, ...shard,
      }],
    }],
  };
}

describe('primariesPending', () => {
  test.each([
    ['the configured primary acts and a majority is live', {}, []],
    ['the old primary still acts', { primary: 'b' }, ['acting primary is not the configured one yet']],
    ['nobody acts yet', { acting: [] }, ['acting primary is not the configured one yet']],
    ['two act at once', { acting: ['a', 'b'] }, ['acting primary is not the configured one yet']],
    ['it acts, but only one of three voters is live and ready', { states: { a: 'ready', b: 'backfilling', c: 'disconnected' } }, ['shard has no live voting majority']],
  ])('when %s, then pending: %j', (_, shard, reasons) => {
    expect(primariesPending(read(shard), [{ tableId: 't', shards: [0] }]).map((p) => p.reason)).toEqual(reasons);
  });

  test('when the table is gone, then nothing is waited for', () => {
    expect(primariesPending(read(), [{ tableId: 'gone', shards: [0] }])).toEqual([]);
  });
});

describe('actingPending', () => {
  test.each([
    ['a still acts', {}, [], ['still the acting primary']],
    ['a is still configured, b acts', { acting: ['b'] }, [], ['still the configured primary']],
    ['b is configured and acts', { primary: 'b', acting: ['b'] }, [], []],
    ['a still acts, but the shard is known to stay', {}, [{ tableId: 't', shard: 0 }], []],
    ['a still acts, but the table was not written', {}, [{ tableId: 't' }], []],
  ])('when %s, then pending: %j', (_, shard, except, reasons) => {
    expect(actingPending(read(shard), ['a'], except).map((p) => p.reason)).toEqual(reasons);
  });

  test('when the lost primary\'s shard is electing and the leaving server votes, then it may still be picked', () => {
    // c (configured, disconnected) lost; a and b voting, nobody acting: an election under way that may pick a.
    const electing = read({ primary: 'c', acting: [] });
    expect(actingPending(electing, ['a'])).toEqual([{ tableId: 't', shard: 0, reason: 'an election that may pick it is under way' }]);
    expect(actingPending(read({ primary: 'c', acting: ['b'] }), ['a'])).toEqual([]);
  });
});

describe('replicaReadyPending', () => {
  test.each([
    ['ready on a connected server', 'b', {}, [], 'ready', 1],
    ['backfilling, a job at 40 %', 'b', { states: { a: 'ready', b: 'backfilling', c: 'disconnected' } }, ['replica is backfilling'], 'backfilling', 0.4],
    ['ready in the status but its server disconnected', 'c', { states: { a: 'ready', b: 'ready', c: 'ready' } }, ['replica is ready'], 'ready', 1],
    ['not listed yet', 'd', {}, ['replica is not listed yet'], 'unknown', null],
  ])('when the replica is %s, then pending %j, state %s, progress %p', (_, serverId, shard, reasons, state, progress) => {
    const cluster = read(shard, { backfills: [{ tableId: 't', destinationId: 'b', progress: 0.4 }] });
    const got = replicaReadyPending(cluster, { tableId: 't', shard: 0, serverId });
    expect({ reasons: got.pending.map((p) => p.reason), state: got.state, progress: got.progress }).toEqual({ reasons, state, progress });
  });

  test('when the table is gone, then it is pending for that', () => {
    expect(replicaReadyPending(read(), { tableId: 'gone', shard: 0, serverId: 'b' }).pending).toEqual([{ tableId: 'gone', reason: 'table disappeared' }]);
  });
});

describe('raftLeadersPending', () => {
  test.each([
    ['another server leads', 'b', []],
    ['the server still leads', 'a', ['the server still leads the table\'s Raft group']],
    ['nobody leads yet', null, ['no Raft leader yet']],
  ])('when %s, then pending: %j', (_, raftLeader, reasons) => {
    expect(raftLeadersPending(read({}, { raftLeader }), ['t'], 'a').map((p) => p.reason)).toEqual(reasons);
  });

  test('when the table is not among those moved, then it is not waited for', () => {
    expect(raftLeadersPending(read({}, { raftLeader: 'a' }), ['other'], 'a')).toEqual([]);
  });
});
