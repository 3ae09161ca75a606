// Pure: what the manager does once RethinkDB has failed over on its own, from a server that crashed or vanished
// without notice (no PRESTOP). RethinkDB elects another replica to act for each shard whose configured primary it has
// dropped, but leaves the configured primary in table_config, and hands the shard back to it the moment it returns: a
// handover nobody planned, which clients meet as "too many primary replicas available" and "lost contact". So, once the
// failover is done, the acting primaries become the configured ones (planAdoptActingPrimaries: no handover), and the
// returning server gets primaries back only when the manager levels them, under holds (POSTSTART).

import { planAdoptActingPrimaries } from '../planner/primary-planner.js';

// cluster: one read; draining: the ids with a draining mark; enabled: FAILOVER_ADOPT.
// -> { reason, intents, waiting }: waiting lists the shards whose configured primary is lost and that cannot be adopted
// yet ([{ tableId, shard, reason }]: no acting primary yet, or an acting one that may not be primary).
export function decideFailover(cluster, { draining = [], enabled = true } = {}) {
  const lost = cluster.servers.filter((s) => !s.connected);
  if (!enabled) return { reason: 'FAILOVER_ADOPT is off', intents: [], waiting: [] };
  if (lost.length === 0) return { reason: 'every server in the table configs is connected', intents: [], waiting: [] };
  const plan = planAdoptActingPrimaries(cluster, { draining });
  const names = lost.map((s) => s.name).join(', ');
  if (plan.changes.length === 0) {
    return {
      reason: plan.skipped.length > 0 ? `${names} disconnected; no acting primary to adopt yet` : `${names} disconnected; it is no shard's configured primary`,
      intents: [], waiting: plan.skipped,
    };
  }
  const shards = plan.changes.reduce((n, c) => n + c.moves.length, 0);
  const reason = `${names} disconnected and RethinkDB has failed over: ${shards} shard${shards === 1 ? '' : 's'} in ${plan.changes.length} `
    + `table${plan.changes.length === 1 ? '' : 's'} get their acting primary as configured primary, so that a return hands nothing back unplanned`;
  return { reason, intents: [{ type: 'adopt-acting-primaries', reason }], waiting: plan.skipped };
}
