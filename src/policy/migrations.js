// Pure: moving a server's replicas off (an operator's migrate-replicas-off, a long perf warning), and when an
// unfinished migration is retried (the retry is a mark persisted on the pod, so that it survives a change of leader).

import { backoffMs } from '../lib/retry.js';
import { createView, isSettling } from '../planner/eligibility.js';

// migrate-replicas-off asked by an operator: the server is marked draining (no replica comes back, no primary goes
// there), its primaries are demoted (a shard whose replica cannot move, for want of another server, must not keep its
// primary on a server being emptied; a moved shard's primary would move at its finalize anyway, so this costs no
// handover more), then its replicas move off one at a time.
export function decideMigrateReplicasOff({ server, reason = null }) {
  const why = reason ?? 'migrate-replicas-off';
  return {
    action: 'migrate-replicas-off',
    intents: [
      { type: 'mark-draining', servers: [server], origin: { kind: 'operator' }, reason: why },
      { type: 'demote', servers: [server], mark: 'draining', reason: why },
      { type: 'migrate-replicas-off', server, reason },
    ],
  };
}

// A replica move whose finalize did not happen: is the nonvoting replica its stage added taken out again?
// - its finalize was refused by the plan (a decision: nothing was written) and its own stage wrote the replica: yes,
//   else it would stay with nothing to finish it, taking every write's replication and voting for nothing;
// - its stage wrote nothing (the replica was there before: a half-done move's, which the next migration finishes): no;
// - its finalize's write was sent and its outcome is unknown (the replica may vote by now): no.
export function decideAfterRefusedFinalize({ planRefused, stageWrote }) {
  if (!planRefused) return { unstage: false, reason: 'the finalizing write was sent; its outcome is unknown' };
  if (!stageWrote) return { unstage: false, reason: 'this move staged nothing: the replica was there before it' };
  return { unstage: true, reason: 'the finalize was refused and this move staged the replica' };
}

// A migration that ended unfinished: retried later (with backoff) when RethinkDB or Kubernetes was unavailable
// (a 503), or when it left work undone while its tables were still settling (an election or a catch-up under
// way: the work may be possible in a moment); null when it is done, or failed for good. cluster: read after
// the migration ended (null when that read failed: then it counts as settling).
export function decideMigrationRetry({ report, failure, cluster, tableIds = [], attempt, now, retry }) {
  if (failure && failure.statusCode !== 503) return null;
  if (report && report.notDone.length === 0 && report.skipped.length === 0) return null;
  if (report && cluster) {
    const view = createView(cluster);
    if (!cluster.tables.some((t) => tableIds.includes(t.id) && t.shards.some((s) => isSettling(view, s)))) return null;
  }
  return { attempt, at: new Date(now + backoffMs(attempt, retry)).toISOString(), reason: failure ? failure.message : 'the cluster was still settling' };
}
