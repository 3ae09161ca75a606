// Pure: rolling restarts and upgrades as one event. A StatefulSet that rolls stops every RethinkDB pod in turn, each
// a few seconds after the previous one is Ready again; handled as independent PRESTOP / POSTSTART pairs, every
// primary may change hands several times in one rollout, and the next stop may come while the returning server is
// still backfilling. The decisions here: whether a rollout is under way, what a PRESTOP must wait for, where its
// primaries go, when the hand-back runs, and whether a RethinkDB pod is ready. No I/O and no clock: callers pass `now`.

import { createView, hasLiveMajority, votingReplicas } from '../planner/eligibility.js';

// The pod condition the manager sets on RethinkDB pods that list it in spec.readinessGates (the chart does): a pod
// is Ready only when its containers are and this condition is True.
export const REPLICAS_READY_CONDITION = 'rethinkdb-manager.io/replicas-ready';

// A StatefulSet's rollout as the manager reads it. sts: { name, generation, observedGeneration, replicas,
// updatedReplicas, currentRevision, updateRevision, strategy: { type, partition } } (null: not read, e.g. no Kubernetes
// API); pods: [{ name, revision }] (revision: the pod's controller-revision-hash). Returns { inProgress, updated,
// reason }: updated are the pods already on the new revision (they will not be stopped again by this rollout).
// - RollingUpdate: under way while the controller has not seen the latest spec, or while the revisions differ (the
//   controller makes the update revision current once every pod is updated and Ready; the last pod's POSTSTART comes
//   before that). With a partition, until the pods at and above it are updated. A scale-up (revisions equal, new
//   pods made on the current revision) is not a rollout.
// - OnDelete: pods are replaced by hand, one at a time and with no end the controller knows of, so there is no
//   rollout to wait for: each POSTSTART gives back as outside one.
export function rolloutOf(sts, pods = []) {
  if (!sts) return { inProgress: false, updated: [], reason: 'the StatefulSet was not read: rollouts are not recognised' };
  const updated = sts.updateRevision ? pods.filter((p) => p.revision === sts.updateRevision).map((p) => p.name).sort() : [];
  if (sts.strategy?.type === 'OnDelete') {
    return { inProgress: false, updated, reason: `statefulset ${sts.name} updates OnDelete: no rollout the controller ends` };
  }
  if (Number.isFinite(sts.generation) && Number.isFinite(sts.observedGeneration) && sts.observedGeneration < sts.generation) {
    return { inProgress: true, updated, reason: `statefulset ${sts.name} changed and its controller has not acted on it yet` };
  }
  const partition = sts.strategy?.partition ?? 0;
  const target = Math.max(0, sts.replicas - partition);
  const counts = `${sts.updatedReplicas ?? 0} of ${target} pods on revision ${sts.updateRevision}${partition > 0 ? ` (partition ${partition})` : ''}`;
  // Every pod may be updated while the last is not Ready yet: the rollout ends when the controller says so (the
  // revisions equal). With a partition they never become equal: it ends once the pods above it are updated.
  const differ = Boolean(sts.updateRevision && sts.currentRevision && sts.currentRevision !== sts.updateRevision);
  if (differ && !(partition > 0 && (sts.updatedReplicas ?? 0) >= target)) {
    return { inProgress: true, updated, reason: `statefulset ${sts.name} is rolling out: ${counts}` };
  }
  return { inProgress: false, updated, reason: `no rollout of statefulset ${sts.name} under way (${counts})` };
}

// The shards ({ tableId, table, shard }) that would be left without a live, ready voting majority if `serverId`
// stopped now: a returning replica still backfilling does not count. PRESTOP waits for these (decidePrestopWait).
export function shardsShortWithout(cluster, serverId) {
  const view = createView(cluster);
  const gone = new Set([serverId]);
  const short = [];
  for (const table of cluster.tables) {
    for (const shard of table.shards) {
      if (!votingReplicas(shard).includes(serverId)) continue;
      if (!hasLiveMajority(view, shard, { gone })) short.push({ tableId: table.id, table: `${table.db}.${table.name}`, shard: shard.index });
    }
  }
  return short;
}

// PRESTOP: wait (within waitLeftMs, what the hook's deadline leaves for waiting) while stopping the server would
// leave a shard without a ready voting majority, so that the stop does not stall the shard's writes until a
// backfill ends. A shard that cannot regain a majority whatever this server does (two of its three replicas lost)
// is not waited for: the stop takes nothing more from it than it has lost already.
// Returns { wait, short, reason }.
export function decidePrestopWait(cluster, { serverId, serverName, waitLeftMs }) {
  const view = createView(cluster);
  const short = shardsShortWithout(cluster, serverId).filter((s) => {
    const shard = cluster.tables.find((t) => t.id === s.tableId).shards[s.shard];
    // Without this server, could the shard have a ready majority once the others' backfills end? Count the connected voters.
    return connectedMajority(view, shard, serverId);
  });
  if (short.length === 0) return { wait: false, short, reason: `every shard keeps a ready voting majority without ${serverName}` };
  const list = short.slice(0, 5).map((s) => `${s.table} shard ${s.shard}`).join(', ') + (short.length > 5 ? ` and ${short.length - 5} more` : '');
  if (waitLeftMs <= 0) {
    return { wait: false, short, reason: `without ${serverName}, ${list} would have no ready voting majority (a replica still backfilling); the deadline leaves no time to wait` };
  }
  return { wait: true, short, reason: `without ${serverName}, ${list} would have no ready voting majority (a replica still backfilling): wait for the backfill` };
}

// How long a PRESTOP's wait for a ready majority may last: PRESTOP_MAJORITY_WAIT_SECONDS, and never into the last
// PRESTOP_DEMOTE_RESERVE_MS of what the decision's deadline leaves (leftMs; undefined: no deadline), which the
// demotion after it needs.
export const PRESTOP_DEMOTE_RESERVE_MS = 5000;

// What a decision's deadline leaves (leftMs) before the demotion's reserve: what a PRESTOP may spend on anything before
// its demotion. null: no deadline.
export function spareBeforeDemotionMs(leftMs) {
  return leftMs === undefined ? null : Math.max(0, leftMs - PRESTOP_DEMOTE_RESERVE_MS);
}
export function prestopWaitBudgetMs({ maxWaitSeconds, leftMs }) {
  const cap = maxWaitSeconds * 1000;
  const spare = spareBeforeDemotionMs(leftMs);
  return spare === null ? cap : Math.min(cap, spare);
}

// A PRESTOP's wait that ends without reading the cluster, or null: a dry run moves no primary, so after its demotion
// nothing catches up.
export function prestopWaitSkipped({ phase, dryRun }) {
  return dryRun && phase === 'after-demote'
    ? { outcome: 'none', short: [], reason: 'a dry run moves no primary, so no secondary has a new primary to catch up with' }
    : null;
}

// A PRESTOP's wait when the cluster could not be read (RethinkDB stalls while a frozen server is still counted in):
// it ends, not the hook; before the demotion, the demotion goes ahead, after it the hook answers with what the
// demotion did. from: the wait's first decision (null: the first read failed). Its outcome, `unread`, is not
// `gave_up`: the wait was cut short by the cluster, not by its budget.
export function prestopWaitUnread({ phase, from, message }) {
  const goesOn = phase === 'after-demote' ? 'the hook answers without waiting' : 'the demotion goes ahead';
  return { outcome: 'unread', short: from?.short ?? [], reason: `${from ? `${from.reason}; ` : ''}the cluster could not be read (${message}), so ${goesOn}` };
}

// The end of a PRESTOP's wait: waited when every shard that was short at the start has a ready voting majority
// without the server again; gave_up otherwise (the budget ran out, or a shard lost its majority another way).
export function prestopWaitOutcome(cluster, { serverId, initialShort }) {
  const still = new Set(shardsShortWithout(cluster, serverId).map((s) => `${s.tableId}:${s.shard}`));
  return initialShort.some((s) => still.has(`${s.tableId}:${s.shard}`)) || initialShort.some((s) => lostMajority(cluster, s, serverId)) ? 'gave_up' : 'waited';
}

// Whether a shard has lost its voting majority among connected servers (so that it is no longer "short" only because
// nobody could bring it back).
function lostMajority(cluster, { tableId, shard: index }, serverId) {
  const view = createView(cluster);
  const shard = cluster.tables.find((t) => t.id === tableId)?.shards[index];
  if (!shard) return false;
  return !connectedMajority(view, shard, serverId);
}

// Whether the shard's voters that are connected, `except` aside, are a majority of its voters.
function connectedMajority(view, shard, except = null) {
  const voters = votingReplicas(shard);
  return voters.filter((id) => id !== except && view.isConnected(id)).length * 2 > voters.length;
}

// PRESTOP during a rollout: where the stopping server's primaries should go. targets: the servers of pods already
// updated by this rollout (they will not stop again in it), preferred over those still to stop; homes: the shards
// that servers restarted earlier in the rollout are owed back ([{ tableId, shard, serverId }]), so that a primary
// goes straight back to its own server when that one is a candidate: each primary then moves at most twice in a
// rollout (off its server, and back). Outside a rollout: no preference.
export function prestopPreference(rollout, { updatedServerIds = [], owed = [] }) {
  if (!rollout?.inProgress) return null;
  return { targets: [...updatedServerIds], homes: owedHomes(owed) };
}

// The shards owed back, one server each: the earliest debt wins (a shard demoted again from the server it was moved
// to during the rollout is still its first owner's).
export function owedHomes(owed) {
  const homes = new Map();
  for (const o of [...owed].sort((a, b) => String(a.since).localeCompare(String(b.since)))) {
    for (const d of o.demoted ?? []) {
      const key = `${d.tableId}:${d.shard}`;
      if (!homes.has(key)) homes.set(key, { tableId: d.tableId, shard: d.shard, serverId: o.serverId });
    }
  }
  return [...homes.values()];
}

// Once no rollout is under way, the hand-backs the POSTSTARTs of the rollout deferred run as one levelling instead
// of one per pod. owed: [{ serverId, serverName, demoted, since }] (the hand-back marks). The levelling goes by counts
// with the owed homes preferred: the fewest handovers that level the primaries, and of equal plans the one that does
// not move a primary already back home (planRebalancePrimaries), so that each primary moves at most twice in the
// rollout where the layout allows. Returns { action: 'none' | 'wait' | 'level', reason, intents }.
// rollout null (the StatefulSet could not be read) is no end: the debts wait for a read that shows one.
export function decideRolloutLevelling({ rollout, owed }) {
  if (owed.length === 0) return { action: 'none', reason: 'no hand-back is owed', intents: [] };
  const names = owed.map((o) => o.serverName).sort().join(', ');
  if (!rollout) return { action: 'wait', reason: `hand-backs owed to ${names} wait: the StatefulSet could not be read`, intents: [] };
  if (rollout.inProgress) return { action: 'wait', reason: `hand-backs owed to ${names} wait for the rollout to end: ${rollout.reason}`, intents: [] };
  const reason = `the rollout has ended (${rollout.reason}): one levelling of the primaries gives ${names} back what the rollout took`;
  return {
    action: 'level',
    reason,
    intents: [
      { type: 'rebalance-primaries', prefer: owedHomes(owed), byLoad: false, reason },
      { type: 'settle-hand-backs', servers: owed.map((o) => o.serverId) },
    ],
  };
}

// Whether a RethinkDB pod is ready (its readiness gate, REPLICAS_READY_CONDITION): its server is connected and every
// replica it holds is ready (its backfill done), so that the StatefulSet controller, a PodDisruptionBudget and
// `kubectl drain` do not take the next server while a shard is short of up-to-date replicas.
// - A replica that cannot become ready because of other servers (its shard has lost its voting majority, or its
//   configured primary is disconnected) does not hold the pod: waiting for it would wait for someone else.
// - unreadySince (ms, null: none yet) and maxUnreadyMs: a pod whose connected server has had replicas that are not
//   ready for that long becomes ready anyway, and stays so, so that a backfill that never ends does not stop a rollout
//   forever; the reason says so.
// serverId: the pod's server (null: none found, e.g. not joined yet). Returns { ready, reason, waitingFor }.
export function decidePodReadiness(cluster, { serverId, pod, unreadySince = null, now, maxUnreadyMs }) {
  const view = createView(cluster);
  if (!serverId || !view.isConnected(serverId)) {
    return { ready: false, reason: `no connected RethinkDB server for pod ${pod} yet`, waitingFor: [] };
  }
  const waitingFor = [];
  for (const table of cluster.tables) {
    for (const shard of table.shards) {
      if (!shard.replicas.includes(serverId)) continue;
      const state = shard.states[serverId];
      if (state === 'ready' || blockedElsewhere(view, shard, serverId)) continue;
      waitingFor.push({ table: `${table.db}.${table.name}`, shard: shard.index, state: state ?? 'not seen' });
    }
  }
  const name = view.nameOf(serverId);
  if (waitingFor.length === 0) return { ready: true, reason: `${name} is connected and every replica it holds is ready`, waitingFor };
  const list = waitingFor.slice(0, 3).map((w) => `${w.table} shard ${w.shard} (${w.state})`).join(', ') + (waitingFor.length > 3 ? ` and ${waitingFor.length - 3} more` : '');
  if (unreadySince !== null && now - unreadySince >= maxUnreadyMs) {
    return {
      ready: true, waitingFor,
      reason: `${name} still has replicas that are not ready (${list}) after ${Math.round((now - unreadySince) / 1000)} s; ready anyway (READINESS_MAX_WAIT_SECONDS) so that a rollout is not held forever`,
    };
  }
  return { ready: false, reason: `${name} has replicas that are not ready yet: ${list}`, waitingFor };
}

// The shard's readiness depends on other servers: too few of its voters are connected for a majority, or nobody
// acts as its primary and its configured primary (not this server) is disconnected (an election, or none possible).
// A shard that another server serves after a failover is not blocked: this replica backfills from it.
function blockedElsewhere(view, shard, serverId) {
  if (!connectedMajority(view, shard)) return true;
  const acting = shard.acting.filter((id) => id !== serverId && view.isConnected(id));
  return acting.length === 0 && shard.primary !== serverId && !view.isConnected(shard.primary);
}
