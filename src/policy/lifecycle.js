// Pure: what a pod's lifecycle and an operator's drain lead to: PRESTOP (demote the stopping server's primaries),
// POSTSTART (restore, replace or add a server), an operator's drain and its release. Every decision carries a reason,
// which the events layer logs, puts in the Kubernetes Event and returns to the caller, and the intents that carry it
// out: plain objects the executor (src/events/executor.js) runs in order. No I/O and no clock: callers pass `now`.
// A server in an intent is { id, name, pod }.

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
