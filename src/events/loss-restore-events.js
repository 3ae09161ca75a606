// The use-case of a server lost for good: reconciled as the work queue's `loss-restore` key while this replica leads.
// Each look reads the cluster once, notes since when each server the table configs name has been disconnected, asks
// the policy (src/policy/loss-restore.js) and has the executor start what it decides: the lost server's replicas
// recreated on the others (migrate-replicas-off, one replica at a time, recorded so that a restarted manager resumes
// it). The wait is visible: GET /v1/cluster's `lostServers`, the log when it changes, and the metrics.
//
// The time a server was first seen disconnected is kept in memory, and only while the looks go on: a replica that
// starts leading, or leads again after a gap (it did not look meanwhile, and a server may have come and gone), counts
// again from its first look. It waits longer, never less.

import { managerActor } from '../audit/actor.js';
import { decideLossRestore, trackLost } from '../policy/loss-restore.js';
import { resultOf } from './executor.js';

export const LOSS_RESTORE_KEY = 'loss-restore';

export function createLossRestoreEvents({
  store, marks, executor, config, clock, logger, metrics,
}) {
  const log = logger.child({ module: 'events' });
  let lostSince = new Map();
  let lastLookAt = null;
  let waiting = [];
  let lastLogged = '';

  // How often the key looks: a tenth of the wait, between 1 s and 10 s.
  const checkMs = () => Math.max(1000, Math.min(10000, Math.round(config.lossRestore.afterSeconds * 100) || 10000));

  async function reconcileLossRestore() {
    const cluster = await store.readCluster();
    const now = clock.now();
    if (lastLookAt !== null && now - lastLookAt > 3 * checkMs()) lostSince = new Map();
    lastLookAt = now;
    lostSince = trackLost(cluster, lostSince, now);
    const migrating = (await marks.migrations()).map((m) => m.serverId);
    const decision = decideLossRestore(cluster, {
      lostSince, now, afterMs: config.lossRestore.afterSeconds * 1000, migrating,
    });
    waiting = decision.waiting;
    metrics?.setLostServers?.(lostSince.size);
    const said = JSON.stringify(decision.waiting.map((w) => [w.server, w.restoreAt, w.reason.replace(/\d+ (s|min)\b/g, '')]));
    if (said !== lastLogged && decision.waiting.length > 0) log.info({ waiting: decision.waiting.map(describeWait) }, 'lost servers wait');
    lastLogged = said;
    if (decision.intents.length === 0) return { event: 'LOSS_RESTORE', action: 'none', reason: decision.reason };
    log.warn({ reason: decision.reason }, 'a lost server\'s replicas are recreated elsewhere');
    metrics?.countLossRestore?.();
    const done = await executor.run(decision.intents, { actor: managerActor('loss-restore'), pod: null, snapshot: cluster });
    const started = resultOf(done, 'migrate-replicas-off');
    return {
      event: 'LOSS_RESTORE', action: 'migrate-replicas-off', reason: decision.reason, operation: started?.operation?.id ?? null,
    };
  }

  return {
    reconcileLossRestore,
    checkMs,
    // For GET /v1/cluster: each lost server, since when, and when (and why not yet) its replicas are recreated.
    view: () => waiting.map(describeWait),
  };
}

function describeWait(w) {
  return {
    serverId: w.serverId, server: w.server, since: new Date(w.since).toISOString(),
    restoreAt: w.restoreAt === null ? null : new Date(w.restoreAt).toISOString(), reason: w.reason,
  };
}
