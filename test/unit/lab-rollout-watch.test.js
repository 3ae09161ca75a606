// The lab's rollout watch (lab/kube/rollout-watch.js): the arithmetic of its summary, on hand-made samples.

import { failuresPerPod, summarizeRolloutSamples } from '../../lab/kube/rollout-watch.js';

const sample = (at, shards) => ({ at, shards: shards.map(([acting, states]) => ({ acting, states })) });
const ready3 = { rethinkdb_0: 'ready', rethinkdb_1: 'ready', rethinkdb_2: 'ready' };

describe('summarizeRolloutSamples', () => {
  test('when a primary goes away and comes back to the same server, then it is no handover; a change of server is one', () => {
    const s = summarizeRolloutSamples([
      sample(0, [['rethinkdb_0', ready3], ['rethinkdb_1', ready3]]),
      sample(250, [[null, ready3], ['rethinkdb_2', ready3]]),
      sample(500, [['rethinkdb_0', ready3], ['rethinkdb_2', ready3]]),
      sample(750, [['rethinkdb_1', ready3], ['rethinkdb_1', ready3]]),
    ]);
    expect(s.handovers).toEqual([1, 2]);
    expect(s.secondsBelowTwoUpToDate).toBe(0);
    expect(s.secondsWithoutUpToDateMajority).toBe(0);
  });

  test('when shards lose up-to-date replicas, then the seconds below two and without a majority add up the spans; a handover\'s waiting replicas are up to date', () => {
    const oneDown = { ...ready3, rethinkdb_2: 'disconnected' };
    const twoDown = { ...oneDown, rethinkdb_1: 'backfilling' };
    const s = summarizeRolloutSamples([
      sample(0, [['rethinkdb_0', ready3]]),
      sample(1000, [['rethinkdb_0', oneDown]]),
      sample(3000, [['rethinkdb_0', twoDown]]),
      { at: 3500, error: 'timeout' },
      sample(4500, [[null, { rethinkdb_0: 'waiting_for_primary', rethinkdb_1: 'waiting_for_primary', rethinkdb_2: 'waiting_for_primary' }]]),
      sample(5000, [['rethinkdb_0', ready3]]),
    ]);
    expect(s.secondsBelowTwoUpToDate).toBe(1.5);
    expect(s.secondsWithoutUpToDateMajority).toBe(1.5);
    expect(s.unreadableSamples).toBe(1);
    // Where: one stretch, from the sample that first saw it to the next good one, with the states it saw first.
    expect(s.belowTwo).toEqual([{ from: 3000, to: 4500, serverAway: true, shards: [{ shard: 0, acting: 'rethinkdb_0', states: twoDown }] }]);
    expect(s.secondsWithoutUpToDateMajorityBy).toEqual({ serverAway: 1.5, allConnected: 0 });
  });

  test('when a handover has both other replicas backfill from the new primary, every server up, then those seconds are counted apart from a server away', () => {
    // As the CI's kube-lab rollouts recorded it: the new primary ready (or waiting for its quorum), the others backfilling.
    const resync = { rethinkdb_0: 'backfilling', rethinkdb_1: 'ready', rethinkdb_2: 'backfilling' };
    const quorum = { rethinkdb_0: 'backfilling', rethinkdb_1: 'waiting_for_quorum', rethinkdb_2: 'backfilling' };
    const awayAndBackfilling = { rethinkdb_0: 'disconnected', rethinkdb_1: 'ready', rethinkdb_2: 'backfilling' };
    const s = summarizeRolloutSamples([
      sample(0, [['rethinkdb_0', ready3], ['rethinkdb_2', ready3]]),
      sample(250, [['rethinkdb_1', resync], ['rethinkdb_2', ready3]]),
      sample(500, [['rethinkdb_1', quorum], ['rethinkdb_2', ready3]]),
      sample(750, [['rethinkdb_1', ready3], ['rethinkdb_2', ready3]]),
      sample(1000, [['rethinkdb_1', ready3], ['rethinkdb_2', awayAndBackfilling]]),
      sample(1250, [['rethinkdb_1', resync], ['rethinkdb_2', awayAndBackfilling]]),
      sample(1500, [['rethinkdb_1', ready3], ['rethinkdb_2', ready3]]),
    ]);
    expect(s.secondsWithoutUpToDateMajority).toBe(1);
    // A sample with both kinds counts as a server away.
    expect(s.secondsWithoutUpToDateMajorityBy).toEqual({ serverAway: 0.5, allConnected: 0.5 });
    expect(s.belowTwo.map((b) => [b.from, b.to, b.serverAway])).toEqual([[250, 750, false], [1000, 1500, true]]);
  });

  test('when a pod turns Ready while its server still backfills, then it is reported as Ready too early; after the backfill it is not', () => {
    const backfilling = { ...ready3, rethinkdb_1: 'backfilling' };
    const samples = [sample(0, [['rethinkdb_0', backfilling]]), sample(1000, [['rethinkdb_0', ready3]])];
    expect(summarizeRolloutSamples(samples, [{ at: 500, pod: 'rethinkdb-1', event: 'ready' }]).readyTooEarly).toEqual(['rethinkdb-1']);
    expect(summarizeRolloutSamples(samples, [{ at: 1200, pod: 'rethinkdb-1', event: 'ready' }]).readyTooEarly).toEqual([]);
    expect(summarizeRolloutSamples(samples, [{ at: 500, pod: 'rethinkdb-2', event: 'ready' }]).readyTooEarly).toEqual([]);
  });
});

describe('failuresPerPod', () => {
  test('when ops fail, then each counts for the pod whose stop came last before it, in stop order', () => {
    const records = [
      { startMs: 500, ok: false }, { startMs: 1500, ok: false }, { startMs: 1600, ok: true }, { startMs: 2500, ok: false }, { startMs: 9000, ok: false },
    ];
    expect(failuresPerPod(records, [{ at: 12000, pod: 'rethinkdb-1' }, { at: 11000, pod: 'rethinkdb-2' }], 10000)).toEqual([
      { pod: 'rethinkdb-2', failed: 1 }, { pod: 'rethinkdb-1', failed: 2 },
    ]);
  });
});
