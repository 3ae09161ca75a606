// Rolling restarts as one event (src/policy/rollout.js and decidePoststart's rollout rule): pure, table-driven.

import { decidePoststart, decidePrestop } from '../../src/policy/lifecycle.js';
import {
  REPLICAS_READY_CONDITION, decidePodReadiness, decidePrestopWait, decideRolloutLevelling, owedHomes, prestopPreference, prestopWaitBudgetMs,
  prestopWaitOutcome, prestopWaitSkipped, prestopWaitUnread, rolloutOf, shardsShortWithout,
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
    ['every pod updated but the last not Ready yet (revisions still differ)', sts({ updateRevision: 'r2', updatedReplicas: 3 }), ['rethinkdb-2'], true, /3 of 3 pods on revision r2/],
    ['a scale-up (revisions equal, fewer pods updated than replicas)', sts({ replicas: 4, updatedReplicas: 3 }), ['rethinkdb-0', 'rethinkdb-1'], false, /no rollout/],
    ['revisions differ but every pod at or above the partition is updated', sts({ updateRevision: 'r2', updatedReplicas: 1, strategy: { type: 'RollingUpdate', partition: 2 } }), ['rethinkdb-2'], false, /1 of 1 pods on revision r2 \(partition 2\)/],
    ['revisions differ and pods above the partition still to update', sts({ updateRevision: 'r2', updatedReplicas: 1, strategy: { type: 'RollingUpdate', partition: 1 } }), ['rethinkdb-2'], true, /1 of 2 pods/],
    ['OnDelete, revisions differing', sts({ updateRevision: 'r2', updatedReplicas: 1, strategy: { type: 'OnDelete', partition: 0 } }), ['rethinkdb-2'], false, /OnDelete: no rollout the controller ends/],
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

  test.each([
    [10, 17000, 10000], [10, 12000, 7000], [10, 4000, 0], [10, undefined, 10000], [0, 17000, 0],
  ])('when the wait may last %i s and the decision has %s ms left, then it gets %i ms (5 s stay for the demotion)', (maxWaitSeconds, leftMs, ms) => {
    expect(prestopWaitBudgetMs({ maxWaitSeconds, leftMs })).toBe(ms);
  });

  test('when the wait ends, then it waited only if every shard short at its start has a ready majority again', () => {
    const short = [{ tableId: 't', table: 'app.users', shard: 0 }];
    const back = cluster(servers, [shard(0, 'b', ['a', 'b', 'c'])]);
    const still = cluster(servers, [shard(0, 'b', ['a', 'b', 'c'], { b: 'backfilling' })]);
    const lost = cluster([server('a'), server('b'), server('c', false)], [shard(0, 'b', ['a', 'b', 'c'], { b: 'backfilling' })]);
    expect(prestopWaitOutcome(back, { serverId: 'a', initialShort: short })).toBe('waited');
    expect(prestopWaitOutcome(still, { serverId: 'a', initialShort: short })).toBe('gave_up');
    // Another voter disconnected meanwhile: no longer "short" by decidePrestopWait's rule, but not back either.
    expect(decidePrestopWait(lost, { serverId: 'a', serverName: 'a', waitLeftMs: 1000 }).short).toEqual([]);
    expect(prestopWaitOutcome(lost, { serverId: 'a', initialShort: short })).toBe('gave_up');
  });

  test('when decidePrestop is given a wait, then it waits after the mark and before the demotion, and again after the demotion; 0 gives none', () => {
    const steps = (seconds) => decidePrestop({ pod: 'rethinkdb-1', server: server('s1'), majorityWaitSeconds: seconds }).intents
      .map((i) => (i.phase ? `${i.type} ${i.phase}` : i.type));
    expect(steps(10)).toEqual(['mark-draining', 'move-connection', 'wait-for-majority before-demote', 'demote', 'wait-for-majority after-demote']);
    expect(steps(0)).toEqual(['mark-draining', 'move-connection', 'demote']);
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

describe('prestopWaitSkipped and prestopWaitUnread: a wait that ends without a cluster to decide on', () => {
  test.each([
    ['after-demote', true, 'none'],
    ['after-demote', false, null],
    ['before-demote', true, null],
    ['before-demote', false, null],
  ])('when the phase is %s and dry run is %p, then it is skipped with %p', (phase, dryRun, outcome) => {
    expect(prestopWaitSkipped({ phase, dryRun })?.outcome ?? null).toBe(outcome);
  });

  test('when the cluster cannot be read, then the wait gives up and says what goes on, keeping what was short at its start', () => {
    const from = { short: [{ tableId: 't', shard: 0 }], reason: 'without a, t shard 0 would have no ready voting majority' };
    expect(prestopWaitUnread({ phase: 'before-demote', from, message: 'timeout' })).toEqual({
      outcome: 'unread', short: from.short, reason: `${from.reason}; the cluster could not be read (timeout), so the demotion goes ahead`,
    });
    expect(prestopWaitUnread({ phase: 'after-demote', from: null, message: 'timeout' })).toEqual({
      outcome: 'unread', short: [], reason: 'the cluster could not be read (timeout), so the hook answers without waiting',
    });
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
  // n servers, shard i's primary on server i, three replicas each; the StatefulSet restarts the highest first.
  function rollout(n, withPreference) {
    const ids = Array.from({ length: n }, (_, i) => `s${i}`);
    let c = cluster(ids.map((id) => server(id)), ids.map((id, i) => shard(i, id, [0, 1, 2].map((k) => ids[(i + k) % n]))));
    const moves = new Map();
    const owed = [];
    const updated = [];
    const targets = [];
    [...ids].reverse().forEach((id, k) => {
      const prefer = withPreference ? prestopPreference({ inProgress: true }, { updatedServerIds: updated, owed }) : null;
      const plan = planMovePrimariesFromServers(c, [id], { prefer });
      const demoted = [];
      for (const change of plan.changes) {
        c = { ...c, tables: [{ ...c.tables[0], shards: change.shards.map((sh, i) => ({ ...c.tables[0].shards[i], primary: sh.primary, acting: [sh.primary] })) }] };
        for (const m of change.moves) {
          moves.set(m.shard, (moves.get(m.shard) ?? 0) + 1);
          demoted.push({ tableId: 't', shard: m.shard });
          targets.push({ to: m.to, restarted: [...updated], updatedCandidate: c.tables[0].shards[m.shard].replicas.some((r) => updated.includes(r)) });
        }
      }
      owed.push({ serverId: id, serverName: id, demoted, since: `2026-11-26T00:00:${String(k).padStart(2, '0')}Z` });
      updated.push(id);
    });
    // The levelling at the end, as decideRolloutLevelling asks for it: by counts, the owed homes preferred.
    const levelling = planRebalancePrimaries(c, { prefer: owedHomes(owed) });
    for (const m of levelling.changes.flatMap((ch) => ch.moves)) moves.set(m.shard, (moves.get(m.shard) ?? 0) + 1);
    return { moves: ids.map((_, i) => moves.get(i) ?? 0), targets, updated };
  }

  test.each([3, 4, 5])('when %i servers roll with the preference, then each PRESTOP sends primaries to restarted pods, and no primary moves more than twice', (n) => {
    const { moves, targets } = rollout(n, true);
    expect(Math.max(...moves)).toBeLessThanOrEqual(2);
    expect(moves.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(rollout(n, false).moves.reduce((a, b) => a + b, 0));
    const withCandidate = targets.filter((x) => x.updatedCandidate);
    expect(withCandidate.length).toBeGreaterThan(0);
    for (const t of withCandidate) expect(t.restarted).toContain(t.to);
  });

  test('when a restarted pod is a candidate, then the preference picks it over a less loaded pod still to stop', () => {
    // s2 restarted and holds two primaries already; s0 holds none but will stop next.
    const c = cluster([server('s0'), server('s1'), server('s2')], [shard(0, 's1', ['s0', 's1', 's2']), shard(1, 's2', ['s0', 's1', 's2']), shard(2, 's2', ['s0', 's1', 's2'])]);
    const plain = planMovePrimariesFromServers(c, ['s1']).changes[0].moves;
    const preferred = planMovePrimariesFromServers(c, ['s1'], { prefer: { targets: ['s2'], homes: [] } }).changes[0].moves;
    expect(plain).toEqual([{ shard: 0, from: 's1', to: 's0' }]);
    expect(preferred).toEqual([{ shard: 0, from: 's1', to: 's2' }]);
  });

  test('when a shard\'s home is a candidate among the restarted pods, then it goes home', () => {
    const c = cluster([server('s0'), server('s1'), server('s2')], [shard(0, 's0', ['s0', 's1', 's2']), shard(1, 's0', ['s0', 's1', 's2'])]);
    const moves = planMovePrimariesFromServers(c, ['s0'], { prefer: { targets: ['s1', 's2'], homes: [{ tableId: 't', shard: 1, serverId: 's2' }] } }).changes[0].moves;
    expect(moves.find((m) => m.shard === 1).to).toBe('s2');
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
    ['the StatefulSet unreadable (no end seen)', null, owed, 'wait'],
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
    ['a replica waiting for a primary that is lost, nobody acting (another server\'s fault)', cluster([server('a'), server('b', false), server('c')], [{ ...shard(0, 'b', ['a', 'b', 'c'], { a: 'waiting_for_primary' }), acting: [] }]), 'a', true, /every replica it holds is ready/],
    ['a replica backfilling from the server that took over after a failover', cluster([server('a'), server('b', false), server('c')], [{ ...shard(0, 'b', ['a', 'b', 'c'], { a: 'backfilling' }), acting: ['c'] }]), 'a', false, /backfilling/],
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
