// After RethinkDB fails over on its own (no PRESTOP), the acting primaries become the configured ones: no handover,
// no shard given to a server that may not be primary, nothing for a shard no one acts for yet.

import { findServer, findTable } from '../../src/cluster/cluster-model.js';
import { planAdoptActingPrimaries } from '../../src/planner/primary-planner.js';
import { checkTransition } from '../../src/planner/safety.js';
import { decideFailover } from '../../src/policy/failover.js';
import { fixtureCluster } from '../helpers/clusters.js';

// 07: rethinkdb_2 and rethinkdb_3 killed. usertable shard 0 (configured on rethinkdb_3) is acted for by rethinkdb_0;
// shard 2 (configured on rethinkdb_2) has no live majority and nobody acts for it.
const killed = fixtureCluster('07-two-servers-killed.json');
const id = (cluster, name) => findServer(cluster, name).id;
const usertable = findTable(killed, 'ycsb.usertable');

describe('planAdoptActingPrimaries', () => {
  test('when a shard\'s configured primary is disconnected and another server acts for it, then that server is written as its primary, and only that shard', () => {
    const plan = planAdoptActingPrimaries(killed);
    expect(plan.changes).toEqual([expect.objectContaining({
      tableId: usertable.id, moves: [{ shard: 0, from: id(killed, 'rethinkdb_3'), to: id(killed, 'rethinkdb_0') }],
    })]);
    const { shards } = plan.changes[0];
    shards.forEach((s, i) => {
      expect(s.replicas).toEqual(usertable.shards[i].replicas);
      if (i !== 0) expect(s.primary).toBe(usertable.shards[i].primary);
    });
    expect(checkTransition(killed, usertable, shards)).toEqual([]);
    expect(plan.skipped).toEqual([{ tableId: usertable.id, shard: 2, reason: expect.stringContaining('no other server acts for the shard yet') }]);
  });

  test('when every configured primary is connected, then nothing is planned', () => {
    expect(planAdoptActingPrimaries(fixtureCluster('01-healthy.json'))).toEqual({ changes: [], skipped: [] });
  });

  test('when the acting primary is draining, or its replica is not ready, then it is not made the configured primary', () => {
    const draining = planAdoptActingPrimaries(killed, { draining: [id(killed, 'rethinkdb_0')] });
    expect(draining.changes).toEqual([]);
    expect(draining.skipped[0]).toEqual({ tableId: usertable.id, shard: 0, reason: expect.stringContaining('(draining)') });
    const unready = {
      ...killed,
      tables: killed.tables.map((t) => (t.id !== usertable.id ? t : {
        ...t, shards: t.shards.map((s, i) => (i === 0 ? { ...s, states: { ...s.states, [id(killed, 'rethinkdb_0')]: 'backfilling' } } : s)),
      })),
    };
    expect(planAdoptActingPrimaries(unready).changes).toEqual([]);
  });
});

describe('decideFailover', () => {
  test('when a lost server\'s shard has an acting primary, then the decision adopts it and lists the shard that waits', () => {
    const decision = decideFailover(killed);
    expect(decision.intents).toEqual([{ type: 'adopt-acting-primaries', reason: decision.reason }]);
    expect(decision.reason).toMatch(/rethinkdb_2, rethinkdb_3 disconnected and RethinkDB has failed over: 1 shard in 1 table/);
    expect(decision.waiting.map((w) => w.shard)).toEqual([2]);
  });

  test('when FAILOVER_ADOPT is off, or every server is connected, then nothing is done', () => {
    expect(decideFailover(killed, { enabled: false })).toEqual({ reason: 'FAILOVER_ADOPT is off', intents: [], waiting: [] });
    expect(decideFailover(fixtureCluster('01-healthy.json')).intents).toEqual([]);
  });

  test('when the lost server\'s shards have no acting primary yet, then nothing is written and they are listed as waiting', () => {
    const electing = {
      ...killed,
      tables: killed.tables.map((t) => (t.id !== usertable.id ? t : { ...t, shards: t.shards.map((s, i) => (i === 0 ? { ...s, acting: [] } : s)) })),
    };
    const decision = decideFailover(electing);
    expect(decision.intents).toEqual([]);
    expect(decision.reason).toMatch(/no acting primary to adopt yet/);
    expect(decision.waiting.map((w) => w.shard)).toEqual([0, 2]);
  });
});
