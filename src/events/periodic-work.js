// The manager's periodic work: one tick of named jobs every second, and the monitor's poll on its own timer. Nothing
// runs before this replica leads and has loaded its persisted state. Each job runs on its own (src/lib/periodic.js):
// one that fails is logged with its name and runs again next tick. Work retried on a later tick waits in the retry
// book (src/lib/retry.js), not here.

import { runJobs } from '../lib/periodic.js';

const idle = () => ({
  expired: [], heartbeat: null, retried: [], votes: [], nodes: [], holds: [], readiness: null, levelling: null, polled: null,
});

export function createPeriodicWork({
  work, marks, events, actions, maintenance, readinessGate, monitor, metrics, config, logger,
}) {
  const log = logger.child({ module: 'manager' });
  // In order: expire perf warnings (and retry restores), end departures (and restore the heartbeat timeout), retry
  // unfinished migrations that are due, give back the votes a Raft leadership move still owes, retry node maintenance
  // signals that failed (and look again at nodes still signalled), release eviction drains whose eviction never
  // happened, set the pods' readiness gates, level the primaries once a rollout that deferred hand-backs has ended,
  // count the hand-backs owed; then, when asked, poll the metrics.
  const jobs = [
    { name: 'expired', run: () => events.expireDue(), fallback: [], failure: 'perf warning expiry failed' },
    { name: 'heartbeat', run: () => events.restoreHeartbeatDue(), fallback: null, failure: 'heartbeat restore failed; retried next tick' },
    { name: 'retried', run: () => actions.retryDueMigrations(), fallback: [], failure: 'migration retry failed' },
    { name: 'votes', run: () => actions.restoreOwedVotes(), fallback: [], failure: 'owed votes not given back; retried next tick' },
    { name: 'nodes', run: () => maintenance.retryDueNodes(), fallback: [], failure: 'node maintenance retry failed; retried next tick' },
    { name: 'holds', run: () => maintenance.expireEvictionHolds(), fallback: [], failure: 'eviction holds not checked; retried next tick' },
    { name: 'readiness', run: () => readinessGate.reconcile(), fallback: null, failure: 'readiness gates not set; retried next tick' },
    { name: 'levelling', run: () => events.levelAfterRollout(), fallback: null, failure: 'levelling after the rollout failed; retried next tick' },
    { name: 'handBacksOwed', run: async () => metrics.setHandBacksOwed((await marks.handBacks()).length), fallback: null, failure: 'hand-backs owed not counted' },
  ];
  const pollJob = { name: 'polled', run: () => (monitor.view().enabled ? monitor.pollOnce() : null), fallback: null, failure: 'monitor poll failed' };

  async function tick({ poll = true } = {}) {
    if (!work.started()) return idle();
    const unsaved = marks.retryUnsaved();
    if (unsaved.length > 0) log.info({ unsaved }, 'writing again the state a failed annotation write left unsaved');
    const {
      expired, heartbeat, retried, votes, nodes, holds, readiness, levelling, polled = null,
    } = await runJobs(poll ? [...jobs, pollJob] : jobs, log);
    return {
      expired, heartbeat, retried, votes, nodes, holds, readiness, levelling, polled,
    };
  }

  // What runs on timers while the process lives: the tick every second, and the monitor's poll at
  // MONITOR_POLL_INTERVAL_MS when the monitor is on. Each does nothing until this replica leads and has loaded its state.
  function timers() {
    return [
      { name: 'tick', intervalMs: 1000, run: () => tick({ poll: false }) },
      ...(monitor.view().enabled ? [{ name: 'monitor', intervalMs: config.monitor.pollIntervalMs, run: () => work.started() && monitor.pollOnce() }] : []),
    ];
  }

  return { tick, timers };
}
