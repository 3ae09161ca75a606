// Pure: what Kubernetes' node maintenance means for RethinkDB, ahead of any preStop. A cordon or a drain taint on
// a node drains that node's servers in one plan (the signal is level-based: the node's state is compared with the
// drains the node already caused, so a repeat, a restarted manager or a missed watch event converge to the same
// marks); its end releases them. An eviction of a RethinkDB pod (kubectl drain, the cluster autoscaler) is
// admitted once that pod's primaries are off, and refused, with the reason, while it cannot be done safely.
// No I/O and no clock. A server in an intent is { id, name, pod }.

import {
  createView, hasLiveMajority, isLiveReady, primaryIneligibility, votingReplicas,
} from '../planner/eligibility.js';
import { drainIntents, primariesOffAfter } from './lifecycle.js';

// The taints that announce a node's drain: the one Kubernetes puts on a cordoned node, and the cluster autoscaler's
// before it deletes a node (NODE_DRAIN_TAINTS).
export const DEFAULT_DRAIN_TAINTS = Object.freeze(['node.kubernetes.io/unschedulable', 'ToBeDeletedByClusterAutoscaler']);

// node: { name, unschedulable, taints: [{ key, effect }] }. The signal that asks to drain it, or null.
export function nodeDrainSignal(node, { taints = DEFAULT_DRAIN_TAINTS } = {}) {
  if (node.unschedulable) return { kind: 'cordon', key: null, text: `node ${node.name} is cordoned (spec.unschedulable)` };
  const taint = node.taints.find((t) => taints.includes(t.key));
  if (!taint) return null;
  return { kind: 'taint', key: taint.key, text: `node ${node.name} has the taint ${taint.key}${taint.effect ? `:${taint.effect}` : ''}` };
}

// node: as above; targets: the node's RethinkDB pods and their servers ([{ pod, server or null }]); drains: every
// draining mark ([{ serverId, serverName, pod, origin }]); giveBack: POSTSTART_GIVE_BACK, which the end of a node's
// maintenance follows as a returning pod's POSTSTART does; leaving: the servers whose pods are being deleted.
// Returns { action: 'drain-node' | 'end-node-drain' | 'none', signal, reason, intents, servers }.
export function decideNodeMaintenance({
  node, targets, drains, taints = DEFAULT_DRAIN_TAINTS, giveBack = 'balance', leaving = [],
}) {
  const signal = nodeDrainSignal(node, { taints });
  const byNode = drains.filter((d) => d.origin?.kind === 'node' && d.origin.node === node.name);
  if (signal) {
    const drainingIds = new Set(drains.map((d) => d.serverId));
    const servers = targets.filter((t) => t.server && !drainingIds.has(t.server.id)).map((t) => t.server);
    if (servers.length === 0) {
      const why = targets.some((t) => t.server) ? 'its RethinkDB servers are draining already' : 'no connected RethinkDB server runs there';
      return { action: 'none', signal, reason: `${signal.text}, and ${why}`, intents: [], servers: [] };
    }
    const reason = `${signal.text}: its pods will be evicted; demote the primaries on ${servers.map((s) => s.name).join(', ')} now, before any preStop`;
    const origin = { kind: 'node', node: node.name, signal: signal.key ?? signal.kind };
    return {
      action: 'drain-node', signal, reason, servers,
      intents: drainIntents({ servers, origin, reason, node: node.name, pods: targets.map((t) => t.pod) }),
    };
  }
  if (byNode.length === 0) return { action: 'none', signal: null, reason: `node ${node.name} is schedulable and drained nothing`, intents: [], servers: [] };
  const servers = byNode.map((d) => ({ id: d.serverId, name: d.serverName, pod: d.pod }));
  // A server whose pod is stopping meanwhile (evicted, or its preStop running) stays drained, now as its pod's own
  // drain, which its POSTSTART releases: the rebalance must not hand primaries to a server about to stop.
  const stopping = servers.filter((s) => leaving.includes(s.id));
  const names = servers.map((s) => s.name).join(', ');
  const reason = `node ${node.name} is schedulable again: release ${names}`
    + (stopping.length > 0 ? ` (${stopping.map((s) => s.name).join(', ')} stays drained while its pod stops)` : '')
    + (giveBack === 'never' ? ' (POSTSTART_GIVE_BACK=never: the primaries stay where they are)' : ' and level the primaries again');
  const prefer = giveBack === 'never' ? [] : byNode.filter((d) => !leaving.includes(d.serverId))
    .flatMap((d) => (d.demoted ?? []).map((x) => ({ ...x, serverId: d.serverId })));
  return {
    action: 'end-node-drain', signal: null, reason, servers,
    intents: [
      { type: 'release', servers: servers.map((s) => s.id) },
      ...(stopping.length > 0 ? [{ type: 'mark-draining', servers: stopping, origin: { kind: 'eviction' }, reason: `${reason}; its pod is stopping` }] : []),
      ...(giveBack === 'never' ? [] : [{ type: 'rebalance-primaries', prefer, byLoad: giveBack === 'balance', reason }]),
    ],
  };
}

// An eviction of `pod` (its server: { id, name, pod } or null) asked through the API server, on the cluster as read
// now. drains: every draining mark ([{ serverId, origin }]); keptOff: the servers no primary may go to (draining or
// under a perf warning); stopping: the servers whose pods are being deleted or whose eviction was just admitted.
// A server draining because its pod is stopping or being evicted (origin prestop or eviction), or in `stopping`,
// counts as leaving, as a disconnected one does.
// Allowed when nothing is lost by it: its server's primaries can move and every shard it votes in keeps a live,
// ready majority without it and without the servers already leaving. Refused while that is not so but could become
// so (a replica catching up, another pod leaving first): the caller retries, as for a PodDisruptionBudget. A shard
// that cannot keep a majority without this server even with every replica healthy (one or two voters) never could,
// so it does not block the eviction; the answer names it.
// Returns { allowed, reason, intents, refusals: [text], unavoidable: [text] }.
export function decideEviction(cluster, {
  pod, server, drains = [], keptOff = drains.map((d) => d.serverId), stopping = [],
}) {
  if (!server) {
    return {
      allowed: true, reason: `no connected RethinkDB server matches pod ${pod}: it holds no primary and counts in no majority`,
      intents: [], refusals: [], unavoidable: [],
    };
  }
  const leaving = new Set([...drains.filter((d) => ['prestop', 'eviction'].includes(d.origin?.kind)).map((d) => d.serverId), ...stopping]);
  leaving.delete(server.id);
  const view = createView(cluster, { draining: keptOff });
  const refusals = [];
  const unavoidable = [];
  const unavoidableShards = [];
  for (const table of cluster.tables) {
    table.shards.forEach((shard, index) => {
      const voters = votingReplicas(shard);
      if (!voters.includes(server.id) && !shard.acting.includes(server.id)) return;
      const label = `${table.db}.${table.name}[${index}]`;
      const others = voters.filter((id) => id !== server.id);
      if (others.length * 2 <= voters.length) {
        if (voters.includes(server.id)) unavoidable.push(`${label} has ${voters.length} voting replica(s): it has no majority while ${server.name} is away`);
        unavoidableShards.push({ tableId: table.id, table: label.slice(0, label.lastIndexOf('[')), shard: index });
        return;
      }
      if (!hasLiveMajority(view, shard, { gone: new Set([...leaving, server.id]) })) {
        const missing = others.filter((id) => !isLiveReady(view, shard, id) || leaving.has(id)).map((id) => `${view.nameOf(id)} (${whyNotLive(view, shard, id, leaving)})`);
        refusals.push(`${label} would lose its majority: besides ${server.name}, ${missing.join(', ')}`);
        return;
      }
      const holds = shard.primary === server.id || shard.acting.includes(server.id);
      if (holds && !others.some((id) => primaryIneligibility(view, shard, id) === null && !leaving.has(id))) {
        refusals.push(`${label} has no other replica that may take its primary (${others.map((id) => `${view.nameOf(id)}: ${whyNotPrimary(view, shard, id, leaving)}`).join(', ')})`);
      }
    });
  }
  if (refusals.length > 0) {
    return {
      allowed: false, intents: [], refusals, unavoidable, unavoidableShards,
      reason: `evicting pod ${pod} now is not safe, retry later: ${refusals.slice(0, 3).join('; ')}${refusals.length > 3 ? `; and ${refusals.length - 3} more shard(s)` : ''}`,
    };
  }
  const reason = `pod ${pod} is being evicted: demote the primaries on ${server.name} before the eviction is admitted`
    + (unavoidable.length > 0 ? ` (unavoidable: ${unavoidable.slice(0, 3).join('; ')})` : '');
  return {
    allowed: true, reason, refusals, unavoidable, unavoidableShards,
    intents: drainIntents({ servers: [server], origin: { kind: 'eviction' }, reason }),
  };
}

// Whether a demotion for an eviction is done: every shard moved, except those that could never move (one or two
// voters: the planner skips them for want of another eligible replica). A report names tables as db.name.
export function evictionDemotionDone(decision, report) {
  const unavoidable = new Set(decision.unavoidableShards.map((u) => `${u.table}:${u.shard}`));
  const left = report.skipped.filter((x) => !unavoidable.has(`${x.table}:${x.shard}`));
  return { done: primariesOffAfter({ ...report, skipped: left }), left: [...left, ...report.notDone] };
}

// An eviction review's states, in order: 'deciding' (reading the cluster and deciding), 'demoting' (the executor
// moves the pod's primaries), 'answered' (the API server has its answer; nothing more is done for this review).
// What the webhook answers when the review has not decided by its deadline, from the state it had then: a demotion
// under way refuses the eviction for now (429: kubectl drain retries, and the retry finds the demotion done); before
// that, nothing was changed, so the eviction goes ahead unchecked, as the webhook's failurePolicy Ignore does when
// the manager is down.
export function evictionAfterDeadline(phase) {
  return phase === 'demoting' ? 'refuse' : 'allow-unchecked';
}

// Whether a review may still act: not once the API server has been answered.
export function evictionReviewMayAct(phase) {
  return phase !== 'answered';
}

// Eviction drains that outlived evictionHoldSeconds while their pod was neither deleted nor being deleted: the
// eviction was refused after the demotion began (or by the PodDisruptionBudget after the webhook) and nobody
// retried. Their servers are released. pods: the RethinkDB pods now ([{ name, deleting }]).
export function expiredEvictionDrains({ drains, pods, now, holdSeconds }) {
  const byName = new Map(pods.map((p) => [p.name, p]));
  return drains.filter((d) => d.origin?.kind === 'eviction' && d.pod && byName.has(d.pod) && !byName.get(d.pod).deleting
    && Date.parse(d.since) + holdSeconds * 1000 <= now);
}

// What ends eviction drains that expired (expiredEvictionDrains): their servers released, and the primaries levelled.
export function decideEvictionHoldExpiry(expired, { holdSeconds }) {
  const reason = `the eviction of ${expired.map((d) => d.pod).join(', ')} did not happen within ${holdSeconds} s: release and level the primaries`;
  return {
    reason,
    intents: [{ type: 'release', servers: expired.map((d) => d.serverId) }, { type: 'rebalance-primaries', reason }],
  };
}

function whyNotLive(view, shard, id, leaving) {
  if (!view.isConnected(id)) return 'disconnected';
  if (leaving.has(id)) return 'leaving: its pod is stopping or being evicted';
  return `replica ${shard.states[id] ?? 'state unknown'}`;
}

function whyNotPrimary(view, shard, id, leaving) {
  return leaving.has(id) ? 'leaving' : primaryIneligibility(view, shard, id);
}
