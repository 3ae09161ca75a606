// The use-case of a failover RethinkDB did on its own (a server crashed or vanished: no PRESTOP came): reconciled as
// the work queue's `failover` key, which looks again every FAILOVER_CHECK_MS while this replica leads. It reads the
// cluster once, asks the policy (src/policy/failover.js) and has the executor run what it decides: the acting
// primaries become the configured ones, so that the lost server's return hands nothing back unplanned.

import { managerActor } from '../audit/actor.js';
import { decideFailover } from '../policy/failover.js';
import { resultOf } from './executor.js';
import { describeDecision } from './intent-types.js';

export const FAILOVER_KEY = 'failover';

export function createFailoverEvents({
  store, marks, executor, config, clock, logger,
}) {
  const log = logger.child({ module: 'events' });
  // What the last look found waiting (logged when it changes, not at every look).
  let lastWaiting = '';
  let last = null; // { at, cluster }: the last read, which the suspicion key may use

  async function reconcileFailover() {
    if (!config.failover.adopt) return { event: 'FAILOVER', action: 'none', reason: 'FAILOVER_ADOPT is off' };
    const cluster = await store.readCluster();
    last = { at: clock.now(), cluster };
    const decision = decideFailover(cluster, { draining: await marks.drainingIds(), enabled: config.failover.adopt });
    const waiting = JSON.stringify(decision.waiting);
    if (waiting !== lastWaiting && decision.waiting.length > 0) log.info({ reason: decision.reason, waiting: decision.waiting }, 'failover: shards of a lost server wait');
    lastWaiting = waiting;
    if (decision.intents.length === 0) return { event: 'FAILOVER', action: 'none', reason: decision.reason };
    log.info({ reason: decision.reason }, 'failover: adopting the acting primaries');
    const done = await executor.run(decision.intents, { actor: managerActor('failover'), pod: null, snapshot: cluster });
    const report = resultOf(done, 'adopt-acting-primaries');
    return {
      event: 'FAILOVER', action: 'adopt', decision: describeDecision(decision), outcome: report.outcome, changes: report.changes, skipped: report.skipped,
    };
  }

  return { reconcileFailover, lastRead: () => last };
}
