// Pure: which action an infrastructure event leads to, and why. Every decision carries a reason, which the
// events layer logs, puts in the Kubernetes Event and returns to the caller, and the intents that carry it out:
// plain objects the executor (src/events/executor.js) runs in order. No I/O and no clock: callers pass `now`.
// A server in an intent is { id, name, pod }.

import { backoffMs } from '../lib/retry.js';
import { createView, isSettling, unreadyReplicasOf } from '../planner/eligibility.js';

// Who asks, as a structured value: { kind: 'pod', pod } (a pod acting for itself, through its hooks),
// { kind: 'operator' } or { kind: 'monitor' }. A pod or the monitor may undo only what it did itself.
export const OPERATOR = Object.freeze({ kind: 'operator' });
export const MONITOR = Object.freeze({ kind: 'monitor' });

// The source a warning raised by the requester is marked with ('hook' for a pod).
export function warningSourceOf(requester) {
  return { pod: 'hook', operator: 'operator', monitor: 'monitor' }[requester.kind];
}

// The only source of warnings the requester may end (null: any, for an operator).
export function endableWarningSource(requester) {
  return requester.kind === 'operator' ? null : warningSourceOf(requester);
}

// The draining mark a POSTSTART releases: an operator's drain (release-server undoes it) outlives the pod's
// restarts, so the pod itself releases only one its own PRESTOP set. (A mark written before origins were
// structured says so in `via`.)
// A drain that came from the pod's own eviction is the pod's as well. A drain that came from its node's
// maintenance (a cordon or a drain taint) is released by the pod only once it runs on another node (podNode):
// the node's uncordon releases it otherwise.
export function releasableDrain(requester, mark, { podNode = null } = {}) {
  if (!mark) return null;
  const origin = mark.origin?.kind ?? (mark.via === 'prestop' ? 'prestop' : 'operator');
  if (requester.kind !== 'pod' || origin === 'prestop' || origin === 'eviction') return mark;
  return origin === 'node' && podNode && podNode !== mark.origin.node ? mark : null;
}

// Draining servers, whoever asks: the manager's own connection leaves them, they are marked draining (origin:
// { kind: 'prestop' } when the pod is stopping, { kind: 'operator' } when an operator asked; a pod's own POSTSTART
// may undo only the former), and their primaries are demoted in one plan, what each lost kept with its mark.
// node, pods: the node they share and its pods, when that is why they are named together.
// prefer (prestopPreference in ./rollout.js, during a rollout): the targets and homes the demotion's plan prefers.
export function drainIntents({ servers, origin, reason, node = null, pods = null, prefer = null }) {
  // The mark first: from then on every plan, another drain's or PRESTOP's included, keeps its servers off (read under
  // each table's lock), so that none hands them a primary while the manager's connection moves.
  return [
    { type: 'mark-draining', servers, origin, reason },
    { type: 'move-connection', servers },
    { type: 'demote', servers, node, pods, mark: 'draining', reason, ...(prefer ? { prefer } : {}) },
  ];
}

// The seconds a preStop's action may spend of the hook's deadlineMs. It stops starting writes then, and still reads
// the cluster once or twice more (the wait, the heartbeat) before it answers: on 1,000 tables a read took 0.65 s and
// the writes in flight at the deadline about 1 s each, so it gets 85% (17 s of 20 s), not all but one second.
export function prestopActionSeconds(deadlineMs) {
  return Math.max(1, Math.floor((deadlineMs * 0.85) / 1000));
}

// PRESTOP: the pod is about to stop; demote every primary on its server (paper III, IV-B2).
// heartbeat: { seconds, windowSeconds } (PRESTOP_HEARTBEAT_*): also lower the cluster's heartbeat timeout until
// the server has left (seconds 0: off); see decideHeartbeatLowering.
// moveRaftLeader (PRESTOP_MOVE_RAFT_LEADER): then also move the Raft leadership of the tables the server leads, while
// it is still there: every write asks that leader for the table's config, so writes wait for an election once it has
// gone (after a silent loss, for the heartbeat timeout first).
// prefer: during a rollout, where the primaries should rather go (prestopPreference in ./rollout.js).
// majorityWaitSeconds (PRESTOP_MAJORITY_WAIT_SECONDS, 0: off): once the server is marked, and before its demotion, wait
// while stopping it would leave a shard without a ready voting majority (decidePrestopWait in ./rollout.js); and the
// same again after the demotion, since a handover has the new primary's secondaries catch up with it for a moment (on
// real 2.4.4 servers, `backfilling` for about half a second): the server should not stop before they have.
export function decidePrestop({
  pod, server, heartbeat = { seconds: 0 }, moveRaftLeader = false, prefer = null, majorityWaitSeconds = 0,
}) {
  if (!server) {
    return { action: 'none', reason: `no connected RethinkDB server matches pod ${pod}, so it holds no primaries to demote`, intents: [] };
  }
  const during = prefer ? ' (a rollout is under way: to pods it has already restarted first, and to their own servers)' : '';
  const reason = `pod ${pod} is stopping: demote the primaries on ${server.name}${during} so that no shard waits for an election`;
  // The heartbeat is lowered just before the demotion rather than after it: a new primary that freezes the moment it
  // is named (SIGSTOP, a hung node) stalls the system tables until RethinkDB drops it, and the drain can hand its
  // shard on only then (measured on 2.4.4: 13 to 14 s at the default 10 s timeout, past a 20 s hook's 17 s budget).
  const lower = heartbeat.seconds > 0 ? [{ type: 'lower-heartbeat', server, seconds: heartbeat.seconds, windowSeconds: heartbeat.windowSeconds }] : [];
  return {
    action: 'move-primaries-from-server',
    reason,
    intents: [
      ...aroundDemotion(drainIntents({ servers: [server], origin: { kind: 'prestop' }, reason, prefer }), { server, maxWaitSeconds: majorityWaitSeconds, just: lower }),
      ...(moveRaftLeader ? [{ type: 'move-raft-leadership', servers: [server], whileMarked: 'draining', reason: `${reason}; then move the Raft leadership of the tables it leads` }] : []),
    ],
  };
}

// Whether a PRESTOP's demotion left the server without primaries, from its report: nothing skipped, nothing left
// undone, and every new primary seen acting (settled false: one had not taken over by the deadline; null: a dry run,
// which plans and so is judged on its plan).
export function primariesOffAfter(report) {
  return report.skipped.length === 0 && report.notDone.length === 0 && report.settled !== false;
}

// The drain's intents with, around its demotion: the waits for a ready majority before it and after it (none when
// the wait is off), and `just`, the intents that go just before it (after the wait).
function aroundDemotion(intents, { server, maxWaitSeconds, just = [] }) {
  const at = intents.findIndex((i) => i.type === 'demote');
  const wait = (phase) => (maxWaitSeconds > 0 ? [{ type: 'wait-for-majority', server, maxWaitSeconds, phase }] : []);
  return [...intents.slice(0, at), ...wait('before-demote'), ...just, intents[at], ...wait('after-demote'), ...intents.slice(at + 1)];
}

// The operator's drain (move-primaries-from-server, move-primaries-from-node): the servers stay draining until
// release-server, whatever their pods do. reason: the operator's, else the action's name.
export function decideOperatorDrain({ servers, node = null, pods = null, reason = null }) {
  const action = node ? 'move-primaries-from-node' : 'move-primaries-from-server';
  return { action, intents: drainIntents({ servers, node, pods, origin: { kind: 'operator' }, reason: reason ?? action }) };
}

// release-server: the draining mark goes, then (unless rebalance is false) primaries are evened out, which gives
// the released server its share.
export function decideRelease({ server, rebalance = true, reason = null }) {
  return {
    action: 'release-server',
    intents: [
      { type: 'release', servers: [server.id] },
      ...(rebalance ? [{ type: 'rebalance-primaries', reason: reason ?? `release ${server.name}` }] : []),
    ],
  };
}

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

// A server that drops off the network after PRESTOP (a node powered off rather than a clean SIGTERM) stalls
// writes on every shard it replicates, primary or not, until the others' heartbeat timeout declares it gone
// (10 s by default; measured on 2.4.4, see docs/evaluation/README.md). So from PRESTOP until the server has left,
// the cluster's heartbeat timeout is lowered to `seconds`. The value it goes back to is the one before the
// first lowering (a second pod stopping meanwhile keeps that value, not the lowered one).
// current: the cluster's heartbeat_timeout_secs now (null when unknown); departures: the servers it is lowered
// for already ([{ originalSecs, loweredSecs, until }]). Returns the departure mark to set (null: nothing to do)
// and the value to write (null: none).
export function decideHeartbeatLowering({ current, departures = [], seconds, windowSeconds, now }) {
  if (!Number.isFinite(current)) return { departure: null, write: null, reason: 'the cluster\'s heartbeat timeout is unknown, so it is left alone' };
  const originalSecs = departures[0]?.originalSecs ?? current;
  if (originalSecs <= seconds) {
    return { departure: null, write: null, reason: `the heartbeat timeout is already ${current} s (not above ${seconds} s)` };
  }
  const departure = { originalSecs, loweredSecs: seconds, until: new Date(now + windowSeconds * 1000).toISOString() };
  return {
    departure, write: current === seconds ? null : seconds,
    reason: `heartbeat timeout ${current} s → ${seconds} s until the server has left (at most ${windowSeconds} s), `
      + 'so that a silent loss stalls its shards for about that long instead',
  };
}

// Called every tick while departures exist: a departure ends when its server has disconnected (the purpose is
// served: a clean stop or a detected loss) or its window has passed. Once none is left, the heartbeat goes back
// to its original value, unless someone else changed it meanwhile (it is no longer the value the manager set).
export function decideHeartbeatRestore(cluster, { departures, now }) {
  const connected = new Set(cluster.servers.filter((s) => s.connected).map((s) => s.id));
  const active = departures.filter((d) => connected.has(d.serverId) && Date.parse(d.until) > now);
  const ended = departures.filter((d) => !active.includes(d));
  if (ended.length === 0) return { intents: [], reason: `${active.length} departing servers still connected` };
  const why = ended.map((d) => `${d.serverName} ${connected.has(d.serverId) ? 'stayed past its window' : 'has left'}`).join(', ');
  const intents = [];
  let reason = `${why}; heartbeat stays at ${cluster.heartbeatTimeoutSecs} s for ${active.length} other departing servers`;
  if (active.length === 0) {
    const original = Math.max(...departures.map((d) => d.originalSecs));
    const ours = departures.some((d) => d.loweredSecs === cluster.heartbeatTimeoutSecs);
    if (ours && cluster.heartbeatTimeoutSecs !== original) {
      reason = `${why}: heartbeat timeout back to ${original} s`;
      intents.push({ type: 'set-heartbeat', seconds: original, reason });
    } else {
      reason = `${why}: heartbeat timeout left at ${cluster.heartbeatTimeoutSecs} s (${ours ? 'already the original' : 'changed by someone else meanwhile'})`;
    }
  }
  intents.push({ type: 'end-departure', servers: ended.map((d) => d.serverId) });
  return { intents, reason };
}

// POSTSTART: a server joined. It is
// - `returning` when the table configs already list it (the same server back, e.g. after a restart);
// - a `replacement` when the configs list a server that is not connected (a lost server whose replicas must be
//   recreated here), preferring one with the same hostname;
// - an `expansion` otherwise.
// A server that was draining before it went away is released in every case.
// giveBack (POSTSTART_GIVE_BACK): whether a returning server gets its primaries back. Each handover costs clients
// about as many failed operations as a failover (see docs/evaluation/README.md), so giving them back doubles the cost
// of a planned restart. 'always' gives back what it had; 'balance' levels the primaries again but moves the least
// busy shards (an idle shard's handover costs nothing; with no traffic seen, what it had); 'never' leaves the layout
// as the PRESTOP made it.
// demoted: the shards the server lost to its last drain ([{ tableId, shard }]), given back first.
// rollout (rolloutOf in ./rollout.js): while the StatefulSet rolls, a returning server gets nothing back now (the next
// pod stops within seconds, and each hand-back is a handover that fails operations): it is owed its primaries, which
// one levelling gives back once the rollout has ended (decideRolloutLevelling).
export function decidePoststart(cluster, {
  serverId, wasDraining = false, giveBack = 'balance', demoted = [], rollout = null, pod = null,
}) {
  const server = cluster.servers.find((s) => s.id === serverId);
  const ref = { id: server.id, name: server.name };
  const referenced = new Set(cluster.tables.flatMap((t) => t.shards.flatMap((s) => s.replicas)));
  const release = wasDraining ? ` ${server.name} was draining before; it is released.` : '';
  const releases = wasDraining ? [{ type: 'release', servers: [serverId] }] : [];
  if (referenced.has(serverId)) {
    if (giveBack !== 'never' && rollout?.inProgress) {
      const reason = `${server.name} is already in the table configs: it came back during a rollout (${rollout.reason}); its primaries are `
        + `given back in one levelling when the rollout ends, not now (the next pod stops within seconds).${release}`;
      return {
        kind: 'returning', replaces: null, release: wasDraining, deferred: true, reason,
        intents: [...releases, { type: 'wait-for-replicas-ready', server: ref }, { type: 'owe-hand-back', server: ref, pod, demoted, reason }],
      };
    }
    if (giveBack === 'never') {
      return {
        kind: 'returning', replaces: null, release: wasDraining, intents: releases,
        reason: `${server.name} is already in the table configs: it came back; its primaries stay where they are (POSTSTART_GIVE_BACK=never: `
          + `a hand-back would cost another handover).${release}`,
      };
    }
    if (giveBack === 'balance') {
      const reason = `${server.name} is already in the table configs: it came back; once its replicas are ready, primaries are levelled `
        + `again, moving the least busy shards (POSTSTART_GIVE_BACK=balance: a handover fails the operations that reach the shard meanwhile).${release}`;
      return {
        kind: 'returning', replaces: null, release: wasDraining, reason,
        intents: [...releases, { type: 'wait-for-replicas-ready', server: ref }, { type: 'rebalance-primaries', server: ref, prefer: demoted, byLoad: true, reason }],
      };
    }
    const reason = `${server.name} is already in the table configs: it came back, so it gets its primaries back once its replicas are ready.${release}`;
    return {
      kind: 'returning', replaces: null, release: wasDraining, reason,
      intents: [...releases, { type: 'wait-for-replicas-ready', server: ref }, { type: 'rebalance-primaries', server: ref, prefer: demoted, reason }],
    };
  }
  const lost = cluster.servers.filter((s) => !s.connected && referenced.has(s.id));
  if (lost.length > 0) {
    const replaced = lost.find((s) => s.name === server.name || (server.hostname && s.hostname === server.hostname))
      ?? [...lost].sort((a, b) => replicaCount(cluster, b.id) - replicaCount(cluster, a.id) || a.name.localeCompare(b.name))[0];
    const reason = `the table configs still list ${replaced.name}, which is not connected: ${server.name} replaces it `
      + `(its ${replicaCount(cluster, replaced.id)} replicas are recreated here, then primaries are rebalanced).${release}`;
    return {
      kind: 'replacement', replaces: replaced.id, release: wasDraining, reason,
      intents: [...releases, { type: 'release', servers: [replaced.id] }, { type: 'replace-server', lost: replaced.id, server: ref, reason }],
    };
  }
  const reason = `no server is missing, so ${server.name} adds capacity: it takes a fair share of replicas, then of primaries.${release}`;
  return {
    kind: 'expansion', replaces: null, release: wasDraining, reason,
    intents: [...releases, { type: 'add-server', server: ref, reason }],
  };
}

function replicaCount(cluster, serverId) {
  return cluster.tables.reduce((n, t) => n + t.shards.filter((s) => s.replicas.includes(serverId)).length, 0);
}

// PERFWARNING: a short or unknown interference demotes the primaries (IV-B3/4); a long one also moves the
// replicas off, one at a time, so that a second failure cannot leave shards without a live, up-to-date
// majority (IV-B5).
// servers: the servers the warning names (one pod's, or all of a node's), demoted together in one plan;
// reason: why it was raised (prefixed to the decision's own reason); now, source, signal: for the mark the
// servers get (the decision's `warning`), which says when it expires.
// moveRaftLeader: after the demotion, also move the Raft leadership of the tables a warned server leads
// (PERFWARNING_MOVE_RAFT_LEADER): every write asks that leader for the table's config, so a starved leader keeps
// the writes slow wherever the primaries went.
export function decidePerfWarning({
  durationSeconds = null, longSeconds, servers = [], node = null, reason: given = null, now = 0, source = 'operator', signal = null,
  moveRaftLeader = false,
}) {
  const known = Number.isFinite(durationSeconds);
  const long = known && durationSeconds >= longSeconds;
  let reason = `interference of unknown duration: demote the primaries only (cheap, undone when the warning ends)`;
  if (long) reason = `interference expected for ${durationSeconds} s (at least ${longSeconds} s): demote the primaries and migrate the replicas off`;
  else if (known) reason = `interference expected for ${durationSeconds} s (under ${longSeconds} s): demote the primaries only`;
  const why = `${given ? `${given}: ` : ''}${reason}`;
  const warning = {
    source, signal, reason: given ?? null, durationSeconds, long, decision: reason,
    since: new Date(now).toISOString(), expiresAt: known ? new Date(now + durationSeconds * 1000).toISOString() : null,
  };
  const intents = servers.length === 0 ? [] : [
    { type: 'mark-perf-warning', servers, warning },
    { type: 'move-connection', servers },
    { type: 'demote', servers, node, mark: 'perfwarning', reason: why },
    ...(moveRaftLeader ? [{ type: 'move-raft-leadership', servers, reason: `${why}; then move the Raft leadership of the tables it leads` }] : []),
    ...(long ? servers.map((server) => ({ type: 'migrate-replicas-off', server, reason: why })) : []),
  ];
  return { long, reason, warning, intents };
}

// A hot-spot the monitor raised that is still hot PERFWARNING_LONG_SECONDS after its warning: the monitor cannot
// know a hot-spot's duration in advance, so one that has lasted this long is taken for a long one, and handled as an
// announced long warning is: the replicas move off too (IV-B5), one at a time. The demotion runs again first: it
// changes nothing unless primaries came back to the server meanwhile. Only once the migration has started is the
// warning marked long (keeping what was demoted), so that a failure before that leaves it to the next poll, and so
// that its end moves a fair share of replicas back, then primaries.
// Only the monitor's own warning, and once: an operator's or the pod's warning says how long it lasts itself, and a
// long one has its migration already. warning: the server's current mark (null: none); pod: for the refusals.
// Returns { escalate, reason, intents }.
export function decidePerfWarningEscalation({
  servers, warning, pod, longSeconds, reason: given = null, now = 0,
}) {
  const refuse = (reason) => ({ escalate: false, reason, intents: [] });
  if (!warning || warning.source !== warningSourceOf(MONITOR)) return refuse(`no perf warning from the monitor for pod ${pod}`);
  if (warning.long) return refuse(`the warning for pod ${pod} is long already`);
  const heldSeconds = Math.round((now - Date.parse(warning.since)) / 1000);
  const reason = `hot-spot still there ${heldSeconds} s after the warning (at least ${longSeconds} s): a long one, so migrate the replicas off too`;
  const why = `${given ? `${given}: ` : ''}${reason}`;
  return {
    escalate: true,
    reason,
    intents: servers.length === 0 ? [] : [
      { type: 'demote', servers, node: null, mark: 'perfwarning', reason: why },
      ...servers.map((server) => ({ type: 'migrate-replicas-off', server, reason: why, whileWarned: true })),
      { type: 'mark-perf-warning-long', servers, decision: reason, at: new Date(now).toISOString() },
    ],
  };
}

// The end of a perf warning (expiry, DELETE, or the monitor seeing the hot-spot clear): the primaries (and
// after a long warning, the replicas) go back once the server is healthy; until then, a restore waits.
// migrating: the action of a migration of the server's replicas under way (or due for a retry), or null: the
// replicas come back once it has ended, rather than while it still moves them off. A migrate-replicas-off moves them
// off because of the warning (an escalation that had not marked it long yet): its end then brings them back, as a
// long warning's does.
export function decidePerfWarningEnd(cluster, {
  serverId, warning, reason: given = 'perf warning ended', migrating = null,
}) {
  const server = cluster.servers.find((s) => s.id === serverId);
  const ref = { id: serverId, name: server?.name ?? warning.serverName ?? serverId };
  const decide = (action, reason, intents) => ({ action, reason, intents });
  const why = (reason) => `${given}: ${reason}`;
  if (migrating) {
    const reason = `a migration of ${ref.name}'s replicas is still under way; the restore waits until it has ended`;
    const restored = migrating === 'migrate-replicas-off' ? { ...warning, long: true } : warning;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning: restored, reason: given }]);
  }
  if (!server?.connected) {
    const reason = `${warning.serverName ?? serverId} is not connected; primaries return once it is healthy`;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning, reason: given }]);
  }
  const notReady = unreadyReplicasOf(cluster, serverId);
  if (notReady.length > 0) {
    const reason = `${server.name} has ${notReady.length} replicas that are not ready yet; primaries return once they are`;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning, reason: given }]);
  }
  if (warning.long) {
    const reason = `the long hot-spot on ${server.name} ended: move a fair share of replicas back, then primaries`;
    return decide('add-server', reason, [{ type: 'add-server', server: ref, reason: why(reason), clearsRestore: true, wait: false }]);
  }
  // Levelled with the least busy shards (what it had where traffic does not tell them apart): the shard that was
  // hot stays where it is now, rather than cost a second handover.
  const reason = `the hot-spot on ${server.name} ended: give it back its share of primaries, the least busy shards first`;
  return decide('rebalance-primaries', reason, [{
    type: 'rebalance-primaries', server: ref, prefer: warning.demoted ?? [], byLoad: true, reason: why(reason), clearsRestore: true,
  }]);
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

// The monitor's state machine. `evaluation` is this poll's verdict (src/monitor/hotspot.js). A skewed hot-spot
// must hold for `consecutivePolls` polls before a warning is raised, and stay clear for `clearCooldownMs`
// before it is ended. Uniform overload scales out by one, at most one in flight, at most one per cooldown.
// immediateUtilization (0: off): a pod hot on the interference signal at or above it raises on its first poll
// instead of after consecutivePolls: a node that busy for a whole poll interval is no passing spike, and each poll
// waited is a poll interval of slow operations. Not on the pod's own load: a backfill or an index build can hold a
// pod at its limit for a poll, and only interference was measured (docs/evaluation/README.md, on real RethinkDB).
// monitorWarnings ([{ pod, since, long }]): the monitor's own warnings as persisted on the pods. A pod with one counts
// as raised, so that a monitor that did not raise it itself (a restarted manager, a new leader) ends it too.
// longMs (0: off): a pod hot on interference for consecutivePolls polls whose warning from the monitor was raised at
// least longMs ago and is not long yet is escalated (decidePerfWarningEscalation), once: the escalation makes the
// warning long. Not on the pod's own load: moving its replicas off would lower that load, end the warning and bring
// them back.
export function decideMonitorStep(previous, evaluation, options) {
  const {
    now, consecutivePolls, immediateUtilization = 0, clearCooldownMs, warnedPods = [], scaleOut, longMs = 0, monitorWarnings = [],
  } = options;
  const warned = new Set(warnedPods);
  const monitorWarned = new Map(monitorWarnings.map((w) => [w.pod, w]));
  const pods = {};
  const decisions = [];
  const hotByPod = new Map(evaluation.hot.map((h) => [h.pod, h]));
  for (const sample of evaluation.samples) {
    const remembered = previous.pods[sample.pod] ?? { hotStreak: 0, raised: false, clearSince: null, signal: null };
    const before = { ...remembered, raised: remembered.raised || monitorWarned.has(sample.pod) };
    const hot = hotByPod.get(sample.pod);
    const state = { ...before };
    if (hot) {
      state.hotStreak = before.hotStreak + 1;
      state.clearSince = null;
      state.signal = hot.signal;
      const interference = hot.hotOn?.interference;
      const immediate = immediateUtilization > 0 && Number.isFinite(interference) && interference >= immediateUtilization;
      if (!before.raised && !warned.has(sample.pod) && (state.hotStreak >= consecutivePolls || immediate)) {
        state.raised = true;
        const why = state.hotStreak >= consecutivePolls ? hot.reason
          : `${hot.reason}; raised after ${state.hotStreak} of ${consecutivePolls} polls (node ${pct(interference)} busy, at or above ${pct(immediateUtilization)})`;
        decisions.push({ type: 'raise', pod: sample.pod, signal: hot.signal, reason: why });
      }
      const warning = monitorWarned.get(sample.pod);
      const heldMs = warning ? now - Date.parse(warning.since) : 0;
      const stillStarved = Number.isFinite(hot.hotOn?.interference) && state.hotStreak >= consecutivePolls;
      if (warning && !warning.long && stillStarved && longMs > 0 && heldMs >= longMs) {
        decisions.push({
          type: 'escalate', pod: sample.pod, signal: hot.signal, heldSeconds: Math.round(heldMs / 1000),
          reason: `${hot.reason}; still hot ${Math.round(heldMs / 1000)} s after the monitor's warning (PERFWARNING_LONG_SECONDS ${longMs / 1000})`,
        });
      }
    } else {
      state.hotStreak = 0;
      if (before.raised) {
        state.clearSince = before.clearSince ?? now;
        if (now - state.clearSince >= clearCooldownMs) {
          state.raised = false;
          state.clearSince = null;
          decisions.push({ type: 'clear', pod: sample.pod, reason: `clear for ${Math.round((now - (before.clearSince ?? now)) / 1000)} s (cooldown ${clearCooldownMs / 1000} s)` });
        }
      }
    }
    pods[sample.pod] = state;
  }
  for (const [pod, state] of Object.entries(previous.pods)) {
    if (!pods[pod] && state.raised) decisions.push({ type: 'clear', pod, reason: 'the pod is gone' });
  }
  const uniformStreak = evaluation.uniform ? previous.uniformStreak + 1 : 0;
  const scale = decideScaleOut({ uniformStreak, evaluation, consecutivePolls, now, ...scaleOut });
  if (scale) decisions.push(scale);
  return { state: { pods, uniformStreak }, decisions };
}

// The monitor's scale-out (decideScaleOut's 'scale-out') as intents: one more RethinkDB pod. Its own POSTSTART then
// adds the server.
export function scaleOutIntents({ to, reason }) {
  return [{ type: 'scale-statefulset', replicas: to, reason }];
}

function decideScaleOut({ uniformStreak, evaluation, consecutivePolls, now, enabled, inFlight, lastAt, cooldownMs, replicas, maxReplicas }) {
  if (!evaluation.uniform || uniformStreak < consecutivePolls) return null;
  const base = `uniform overload: average utilization ${pct(evaluation.averages.own)} for ${uniformStreak} polls`;
  if (!enabled) return { type: 'scale-out-suppressed', reason: `${base}, but scale-out is disabled` };
  if (inFlight) return { type: 'scale-out-suppressed', reason: `${base}, but a scale-out is already in flight` };
  if (lastAt !== null && now - lastAt < cooldownMs) return { type: 'scale-out-suppressed', reason: `${base}, but the last scale-out was ${Math.round((now - lastAt) / 1000)} s ago (cooldown ${cooldownMs / 1000} s)` };
  if (replicas >= maxReplicas) return { type: 'scale-out-suppressed', reason: `${base}, but the StatefulSet is at its maximum of ${maxReplicas}` };
  return { type: 'scale-out', to: replicas + 1, reason: `${base}: scale the StatefulSet from ${replicas} to ${replicas + 1}` };
}

export const initialMonitorState = () => ({ pods: {}, uniformStreak: 0 });

export function pct(u) {
  return u === null || u === undefined ? 'n/a' : `${Math.round(u * 100)}%`;
}
