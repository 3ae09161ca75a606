// Rolling restarts as one event (src/policy/rollout.js and decidePoststart's rollout rule): pure, table-driven.

import { decidePoststart, decidePrestop } from '../../src/policy/policy.js';
import {
  REPLICAS_READY_CONDITION, decidePodReadiness, decidePrestopWait, decideRolloutLevelling, owedHomes, prestopPreference, rolloutOf, shardsShortWithout,
} from '../../src/policy/rollout.js';
import { planMovePrimariesFromServers, planRebalancePrimaries } from '../../src/planner/primary-planner.js';

const server = (id, connected = true) => ({ id, name: id, connected, hostname: id });
const shard = (index, primary, replicas, states = {}) => ({
  index, primary, replicas, nonvoting: [], acting: [primary], states: Object.fromEntries(replicas.map((r) => [r, states[r] ?? 'ready'])),
});
const cluster = (servers, shards) => ({ servers, tables: [{ id: 't', db: 'app', name: 'users', shards }] });
const sts = (fields = {}) => ({
  name: 'rethinkdb', generation: 2, observedGeneration: 2, replicas: 3, readyReplicas: 3, updatedReplicas: 3, currentRevision: 'r1', updateRevision: 'r1', ...fields,
});

describe('rolloutOf: whether the StatefulSet is rolling', () => {
  const pods = [{ name: 'rethinkdb-0', revision: 'r1' }, { name: 'rethinkdb-1', revision: 'r1' }, { name: 'rethinkdb-2', revision: 'r2' }];
  test.each([
    ['every pod on the current revision', sts(), ['rethinkdb-0', 'rethinkdb-1'], false, /no rollout/],
    ['revisions differ (kubectl rollout restart, an image change)', sts({ updateRevision: 'r2', updatedReplicas: 1 }), ['rethinkdb-2'], true, /1 of 3 pods on revision r2/],
    ['the controller has not seen the new spec yet', sts({ generation: 3 }), ['rethinkdb-0', 'rethinkdb-1'], true, /has not acted on it yet/],
    ['fewer pods updated than replicas (OnDelete, or revisions recorded late)', sts({ updatedReplicas: 2 }), ['rethinkdb-0', 'rethinkdb-1'], true, /2 of 3/],
    ['the StatefulSet was not read', null, [], false, /not read/],
  ])('when %s, then in progress is as expected, with the updated pods and a reason', (_, set, updated, inProgress, reason) => {
    const r = rolloutOf(set, pods);
    expect(r.inProgress).toBe(inProgress);
    expect(r.updated).toEqual(updated);
    expect(r.reason).toMatch(reason);
  });

  test('when pods are on the update revision, then they are the updated ones, sorted', () => {
    expect(rolloutOf(sts({ updateRevision: 'r2', updatedReplicas: 1 }), [...pods].reverse()).updated).toEqual(['rethinkdb-2']);
  });
});

describe('decidePrestopWait and shardsShortWithout: a stop must not leave a shard without a ready voting majority', () => {
  const servers = [server('a'), server('b'), server('c')];
  test.each([
    ['every replica ready', {}, false, 0],
    ['another replica still backfilling', { b: 'backfilling' }, true, 1],
    ['another replica transitioning', { c: 'transitioning' }, true, 1],
    ['the stopping server itself backfilling', { a: 'backfilling' }, false, 0],
  ])('when %s, then wait is as expected', (_, states, wait, short) => {
    const c = cluster(servers, [shard(0, 'b', ['a', 'b', 'c'], states)]);
    const d = decidePrestopWait(c, { serverId: 'a', serverName: 'a', waitLeftMs: 5000 });
    expect(d.wait).toBe(wait);
    expect(d.short).toHaveLength(short);
    expect(shardsShortWithout(c, 'a')).toHaveLength(short);
  });

  test('when the budget is spent, then no wait, and the reason names the shard', () => {
    const c = cluster(servers, [shard(0, 'b', ['a', 'b', 'c'], { b: 'backfilling' })]);
    const d = decidePrestopWait(c, { serverId: 'a', serverName: 'a', waitLeftMs: 0 });
    expect(d).toMatchObject({ wait: false, short: [{ tableId: 't', table: 'app.users', shard: 0 }] });
    expect(d.reason).toMatch(/app.users shard 0 would have no ready voting majority.*no time to wait/);
  });

  test('when two of three replicas are lost already, then the stop takes nothing it has not lost: no wait', () => {
    const c = cluster([server('a'), server('b', false), server('c', false)], [shard(0, 'a', ['a', 'b', 'c'])]);
    expect(shardsShortWithout(c, 'a')).toHaveLength(1);
    expect(decidePrestopWait(c, { serverId: 'a', serverName: 'a', waitLeftMs: 5000 })).toMatchObject({ wait: false, short: [] });
  });

  test('when the server is not a voter of the shard, then the shard is not its concern', () => {
    const c = cluster(servers, [{ ...shard(0, 'b', ['a', 'b', 'c'], { c: 'backfilling' }), nonvoting: ['a'] }]);
    expect(decidePrestopWait(c, { serverId: 'a', serverName: 'a', waitLeftMs: 5000 }).wait).toBe(false);
  });
});

describe('decidePoststart during a rollout: the hand-back is owed, not made', () => {
  const back = cluster([server('a'), server('b'), server('c')], [shard(0, 'b', ['a', 'b', 'c']), shard(1, 'c', ['a', 'b', 'c'])]);
  const rolling = { inProgress: true, updated: ['rethinkdb-2'], reason: 'statefulset rethinkdb is rolling out: 1 of 3' };

  test.each(['balance', 'always'])('when giveBack is %s and a rollout is under way, then it waits for its replicas and owes the hand-back', (giveBack) => {
    const d = decidePoststart(back, {
      serverId: 'a', wasDraining: true, giveBack, demoted: [{ tableId: 't', shard: 0 }], rollout: rolling, pod: 'rethinkdb-0',
    });
    expect(d).toMatchObject({ kind: 'returning', deferred: true });
    expect(d.intents.map((i) => i.type)).toEqual(['release', 'wait-for-replicas-ready', 'owe-hand-back']);
    expect(d.intents[2]).toMatchObject({ server: { id: 'a' }, pod: 'rethinkdb-0', demoted: [{ tableId: 't', shard: 0 }] });
    expect(d.reason).toMatch(/during a rollout .*1 of 3.*one levelling when the rollout ends/);
  });

  test('when giveBack is never, then a rollout changes nothing: nothing is owed', () => {
    const d = decidePoststart(back, { serverId: 'a', giveBack: 'never', rollout: rolling });
    expect(d.intents).toEqual([]);
  });

  test.each([
    ['no rollout', { inProgress: false, updated: [], reason: 'none' }],
    ['the StatefulSet not read', null],
  ])('when %s, then the hand-back runs as before', (_, rollout) => {
    const d = decidePoststart(back, { serverId: 'a', giveBack: 'balance', rollout });
    expect(d.intents.map((i) => i.type)).toEqual(['wait-for-replicas-ready', 'rebalance-primaries']);
  });
});

describe('prestopPreference and the demotion plan during a rollout: each primary moves at most twice', () => {
  // Three servers, shard i's primary on server i; the StatefulSet restarts 2, then 1, then 0.
  const ids = ['s0', 's1', 's2'];
  const start = () => cluster(ids.map((id) => server(id)), ids.map((id, i) => shard(i, id, ids)));

  function rollout(withPreference) {
    let c = start();
    const moves = new Map();
    const owed = [];
    const updated = [];
    let second = 0;
    for (const id of ['s2', 's1', 's0']) {
      const prefer = withPreference ? prestopPreference({ inProgress: true }, { updatedServerIds: updated, owed }) : null;
      const plan = planMovePrimariesFromServers(c, [id], { prefer });
      const demoted = [];
      for (const change of plan.changes) {
        c = { ...c, tables: [{ ...c.tables[0], shards: change.shards.map((s, i) => ({ ...c.tables[0].shards[i], primary: s.primary, acting: [s.primary] })) }] };
        for (const m of change.moves) {
          moves.set(m.shard, (moves.get(m.shard) ?? 0) + 1);
          demoted.push({ tableId: 't', shard: m.shard });
        }
      }
      second += 1;
      owed.push({ serverId: id, serverName: id, demoted, since: `2026-11-26T00:00:0${second}Z` });
      updated.push(id);
    }
    // The levelling at the end: each shard back to the server it is owed to.
    for (const home of owedHomes(owed)) {
      if (c.tables[0].shards[home.shard].primary !== home.serverId) moves.set(home.shard, (moves.get(home.shard) ?? 0) + 1);
    }
    return [0, 1, 2].map((i) => moves.get(i) ?? 0);
  }

  test('when the rollout is not preferred to, then a primary moves three times (the reason for the rule)', () => {
    expect(Math.max(...rollout(false))).toBe(3);
  });

  test('when restarted pods and homes are preferred, then no primary moves more than twice', () => {
    expect(rollout(true)).toEqual([2, 2, 2]);
  });

  test('when no rollout is under way, then there is no preference', () => {
    expect(prestopPreference({ inProgress: false }, { updatedServerIds: ['s2'] })).toBeNull();
    expect(prestopPreference(null, {})).toBeNull();
  });

  test('when a preference is given, then decidePrestop carries it to its demotion and says so', () => {
    const prefer = { targets: ['s2'], homes: [] };
    const d = decidePrestop({ pod: 'rethinkdb-1', server: server('s1'), prefer });
    expect(d.intents.find((i) => i.type === 'demote').prefer).toBe(prefer);
    expect(d.reason).toMatch(/a rollout is under way/);
    expect(decidePrestop({ pod: 'rethinkdb-1', server: server('s1') }).intents.find((i) => i.type === 'demote')).not.toHaveProperty('prefer');
  });
});

describe('owedHomes and decideRolloutLevelling: one levelling when the rollout ends', () => {
  const owed = [
    { serverId: 's1', serverName: 's1', since: '2026-11-26T00:00:02Z', demoted: [{ tableId: 't', shard: 1 }, { tableId: 't', shard: 2 }] },
    { serverId: 's2', serverName: 's2', since: '2026-11-26T00:00:01Z', demoted: [{ tableId: 't', shard: 2 }] },
  ];

  test('when the levelling could move a primary already home or one that is not, then it moves the one that is not (seen on the lab)', () => {
    // After a rollout of 2, 1, 0: shard 0 (home s0) on s1, shard 1 back home on s2, shard 2 (home s1) on s2.
    const c = cluster(['s0', 's1', 's2'].map((id) => server(id)), [shard(0, 's1', ['s0', 's1', 's2']), shard(1, 's2', ['s0', 's1', 's2']), shard(2, 's2', ['s0', 's1', 's2'])]);
    const homes = [{ tableId: 't', shard: 1, serverId: 's2' }, { tableId: 't', shard: 2, serverId: 's1' }, { tableId: 't', shard: 0, serverId: 's0' }];
    const plan = planRebalancePrimaries(c, { prefer: homes });
    expect(plan.changes.flatMap((ch) => ch.moves)).toEqual([{ shard: 2, from: 's2', to: 's0' }]);
    expect(planRebalancePrimaries(c, {}).changes.flatMap((ch) => ch.moves)).toHaveLength(1);
  });

  test('when a shard is owed to two servers, then the earlier debt wins', () => {
    expect(owedHomes(owed)).toEqual([{ tableId: 't', shard: 2, serverId: 's2' }, { tableId: 't', shard: 1, serverId: 's1' }]);
  });

  test.each([
    ['nothing owed', { inProgress: false, reason: 'done' }, [], 'none'],
    ['the rollout still under way', { inProgress: true, reason: '2 of 3 pods on revision r2' }, owed, 'wait'],
    ['the rollout over', { inProgress: false, reason: 'no rollout' }, owed, 'level'],
    ['the StatefulSet unreadable', null, owed, 'level'],
  ])('when %s, then the action is as expected', (_, rollout, debts, action) => {
    const d = decideRolloutLevelling({ rollout, owed: debts });
    expect(d.action).toBe(action);
    if (action === 'level') {
      expect(d.intents).toEqual([
        { type: 'rebalance-primaries', prefer: owedHomes(owed), byLoad: false, reason: d.reason },
        { type: 'settle-hand-backs', servers: ['s1', 's2'] },
      ]);
      expect(d.reason).toMatch(/one levelling of the primaries gives s1, s2 back/);
    } else {
      expect(d.intents).toEqual([]);
    }
  });
});

describe('decidePodReadiness: Ready means every replica the server holds is ready', () => {
  const base = { pod: 'rethinkdb-0', now: 100000, maxUnreadyMs: 600000 };
  const servers = [server('a'), server('b'), server('c')];
  test.each([
    ['connected, every replica ready', cluster(servers, [shard(0, 'b', ['a', 'b', 'c'])]), 'a', true, /connected and every replica it holds is ready/],
    ['a replica backfilling', cluster(servers, [shard(0, 'b', ['a', 'b', 'c'], { a: 'backfilling' })]), 'a', false, /app.users shard 0 \(backfilling\)/],
    ['no server found for the pod', cluster(servers, []), null, false, /no connected RethinkDB server for pod rethinkdb-0/],
    ['its server disconnected', cluster([server('a', false), server('b')], []), 'a', false, /no connected/],
    ['a replica waiting for a primary that is lost (another server\'s fault)', cluster([server('a'), server('b', false), server('c')], [shard(0, 'b', ['a', 'b', 'c'], { a: 'waiting_for_primary' })]), 'a', true, /every replica it holds is ready/],
    ['a replica of a shard that lost its majority', cluster([server('a'), server('b', false), server('c', false)], [shard(0, 'a', ['a', 'b', 'c'], { a: 'waiting_for_quorum' })]), 'a', true, /ready/],
    ['a nonvoting replica backfilling', cluster(servers, [{ ...shard(0, 'b', ['a', 'b', 'c'], { a: 'backfilling' }), nonvoting: ['a'] }]), 'a', false, /backfilling/],
    ['no replica at all (a new server)', cluster(servers, [shard(0, 'b', ['b', 'c'])]), 'a', true, /ready/],
  ])('when %s, then ready is as expected', (_, c, serverId, ready, reason) => {
    const d = decidePodReadiness(c, { ...base, serverId });
    expect(d.ready).toBe(ready);
    expect(d.reason).toMatch(reason);
  });

  test('when a replica has stayed unready past the maximum, then ready anyway, saying so, with what it waited for', () => {
    const c = cluster(servers, [shard(0, 'b', ['a', 'b', 'c'], { a: 'backfilling' })]);
    expect(decidePodReadiness(c, { ...base, serverId: 'a', unreadySince: base.now - 599999 }).ready).toBe(false);
    const d = decidePodReadiness(c, { ...base, serverId: 'a', unreadySince: base.now - 600000 });
    expect(d).toMatchObject({ ready: true, waitingFor: [{ table: 'app.users', shard: 0, state: 'backfilling' }] });
    expect(d.reason).toMatch(/after 600 s; ready anyway \(READINESS_MAX_WAIT_SECONDS\)/);
  });

  test('the condition type is the one the manifests gate on', () => {
    expect(REPLICAS_READY_CONDITION).toBe('rethinkdb-manager.io/replicas-ready');
  });
});
