// The use-cases of infrastructure events: what PRESTOP, POSTSTART, PERFWARNING and its end, a warning's expiry,
// and the monitor's raise and clear mean. Each reads the cluster once, asks the pure policy for a decision
// (a reason and intents), and has the executor run the intents. Routes and the monitor call these and nothing
// else decides what an event means.
//   PRESTOP      demote every primary on the pod's server (and keep it draining);
//   POSTSTART    wait for the new server to join, then restore a lost server's placement or add capacity;
//   PERFWARNING  demote primaries (short or unknown duration) and also migrate replicas (long), until it ends.

import { MONITOR_ACTOR, hookActor, managerActor } from '../audit/actor.js';
import { AppError } from '../errors.js';
import { findServerForPod } from '../cluster/cluster-model.js';
import { createDeadline } from '../lib/clock.js';
import { decideHeartbeatRestore } from '../policy/heartbeat.js';
import { decidePoststart, decidePrestop, primariesOffAfter } from '../policy/lifecycle.js';
import { scaleOutIntents } from '../policy/monitor.js';
import { decidePerfWarning, decidePerfWarningEnd, decidePerfWarningEscalation } from '../policy/perf-warnings.js';
import { endableWarningSource, MONITOR, OPERATOR, releasableDrain, warningSourceOf } from '../policy/requesters.js';
import { decideRolloutLevelling, prestopPreference, rolloutOf } from '../policy/rollout.js';
import { resultOf } from './executor.js';
import { intentIs } from './intent-types.js';

// requester (POSTSTART, PERFWARNING and its end): who asks, { kind: 'pod' | 'operator' | 'monitor' } (src/policy/requesters.js);
// a pod may undo only what it did itself. actor: who acted, for the audit trail.
export function createEvents({
  store, marks, operations, kube, executor, targets, config, clock, logger, audit = null, metrics = null,
}) {
  const log = logger.child({ module: 'events' });
  const { existingPod, serversForPods } = targets;

  // deadline: the hook's (src/lib/clock.js), made by the route when the request came: the reads below count against it.
  async function prestop({ pod, dryRun = false, deadline = null, actor = hookActor('prestop', pod) }) {
    const { cluster, targets: [{ server }] } = await serversForPods([pod]);
    const heartbeat = { seconds: config.prestop.heartbeatTimeoutSeconds, windowSeconds: config.prestop.heartbeatWindowSeconds };
    if (!server) {
      const decision = decidePrestop({ pod, server, heartbeat, moveRaftLeader: config.prestop.moveRaftLeader });
      log.warn({ pod, reason: decision.reason }, 'preStop: nothing to demote');
      return { event: 'PRESTOP', pod, server: null, decision: describe(decision), outcome: 'nothing_to_do', primariesOff: true, reason: decision.reason };
    }
    // The preference is the rollout-aware rule's (POSTSTART_DURING_ROLLOUT=defer); `now` keeps the old behaviour whole.
    const rollout = config.poststart.duringRollout === 'defer' ? await readRollout() : null;
    const updatedServerIds = rollout ? serversOfPods(cluster, rollout.pods, rollout.state.updated) : [];
    const prefer = prestopPreference(rollout?.state, { updatedServerIds, owed: await marks.handBacks() });
    const decision = decidePrestop({
      pod, server, heartbeat, moveRaftLeader: config.prestop.moveRaftLeader, prefer, majorityWaitSeconds: config.prestop.majorityWaitSeconds,
    });
    const done = await executor.run(decision.intents, { actor, pod, dryRun, deadline, snapshot: cluster });
    const report = resultOf(done, 'demote');
    const heartbeatResult = resultOf(done, 'lower-heartbeat');
    const [raftLeadership] = resultOf(done, 'move-raft-leadership')?.reports ?? [];
    const waitOf = (phase) => done.find((d) => d.intent.type === 'wait-for-majority' && d.intent.phase === phase)?.result
      ?? { outcome: 'off', waitedMs: 0, short: [], reason: 'PRESTOP_MAJORITY_WAIT_SECONDS is 0' };
    const majorityWait = waitOf('before-demote');
    const settleWait = waitOf('after-demote');
    for (const [wait, when] of [[majorityWait, 'before its demotion'], [settleWait, 'after its demotion']]) {
      if (wait.outcome === 'waited' || wait.outcome === 'gave_up') recordWait({ server, pod, actor, majorityWait: wait, when });
    }
    const primariesOff = primariesOffAfter(report);
    log.info({ pod, server: server.name, outcome: report.outcome, primariesOff, reason: decision.reason }, 'preStop handled');
    return {
      event: 'PRESTOP', pod, server: server.name, decision: describe(decision), outcome: report.outcome, primariesOff, report, majorityWait, settleWait,
      ...(heartbeatResult ? { heartbeat: heartbeatResult } : {}),
      ...(raftLeadership ? { raftLeadership } : {}),
    };
  }

  // A PRESTOP that waited for a ready majority (before or after its demotion): an audit record (an Event on the pod, a
  // Warning when it gave up), the metric and a log line.
  function recordWait({ server, pod, actor, majorityWait, when }) {
    const { outcome, waitedMs, short, reason } = majorityWait;
    metrics?.recordPrestopWait({ outcome, seconds: waitedMs / 1000 });
    audit?.record({
      actor, action: 'wait-for-majority', target: { server: server.name }, pod, reason: `${when}: ${reason}`, durationMs: waitedMs,
      outcome: outcome === 'waited' ? 'completed' : 'timed_out',
      notDone: outcome === 'waited' ? [] : short.map((s) => ({ table: s.table, shard: s.shard, reason: 'no ready voting majority without this server' })),
    });
    log.info({ pod, server: server.name, when, outcome, waitedMs, short: short.length }, 'preStop waited for a ready majority');
  }

  // The StatefulSet's rollout ({ state: rolloutOf's answer, pods }), or null when it cannot be read (no Kubernetes API,
  // or an error): a PRESTOP and a POSTSTART then act as outside a rollout, and the levelling waits.
  async function readRollout() {
    const read = await targets.statefulSetRollout().catch((err) => {
      log.warn({ err: err.message }, 'the StatefulSet could not be read');
      return null;
    });
    return read ? { state: rolloutOf(read.statefulSet, read.pods), pods: read.pods } : null;
  }

  // The ids of the servers of the named pods.
  function serversOfPods(cluster, pods, names) {
    const wanted = new Set(names);
    return targets.serversOf(cluster, pods.filter((p) => wanted.has(p.name))).filter((t) => t.server).map((t) => t.server.id);
  }

  // Answers at once with an operation; the work (join, decide, act) runs in the background.
  // A pod that does not exist is refused before any operation starts (each would poll for its join deadline).
  async function poststart({ pod, actor = hookActor('poststart', pod), requester = OPERATOR }) {
    await existingPod(pod);
    const running = operations.list().find((op) => op.kind === 'poststart' && op.params.pod === pod && op.status === 'running');
    if (running) return { event: 'POSTSTART', pod, operation: running, repeated: true };
    const op = operations.start('poststart', { pod }, (operation) => runPoststart(operation, { pod, actor, requester }));
    return { event: 'POSTSTART', pod, operation: op, repeated: false };
  }

  // Decides on the read that found the server joined; the intents plan on it too.
  async function runPoststart(op, { pod, actor, requester }) {
    const startedAt = clock.now();
    const step = (name) => { const s = { step: name, status: 'running', detail: null }; op.steps.push(s); return s; };
    const join = step('wait-for-join');
    const { server, cluster, podNode } = await waitForJoin(pod);
    join.status = 'done';
    join.detail = `${server.name} joined`;
    const draining = releasableDrain(requester, await marks.getDraining(server.id), { podNode });
    const rollout = config.poststart.duringRollout === 'defer' ? (await readRollout())?.state ?? null : null;
    const decision = decidePoststart(cluster, {
      serverId: server.id, wasDraining: Boolean(draining), giveBack: config.poststart.giveBack, demoted: draining?.demoted ?? [], rollout, pod,
    });
    op.steps.push({ step: 'decide', status: 'done', detail: decision.reason, kind: decision.kind });
    log.info({ pod, server: server.name, kind: decision.kind, reason: decision.reason }, 'postStart decision');
    const act = step(decision.kind);
    const result = poststartResult(await executor.run(decision.intents, { actor, pod: null, snapshot: cluster }));
    act.status = 'done';
    act.detail = result.outcome;
    return { event: 'POSTSTART', pod, server: server.name, decision: describe(decision), ...result, durationMs: clock.now() - startedAt };
  }

  function poststartResult(done) {
    const rebalance = resultOf(done, 'rebalance-primaries');
    const ready = resultOf(done, 'wait-for-replicas-ready');
    const owed = resultOf(done, 'owe-hand-back');
    if (owed) {
      return {
        outcome: ready?.ready === false ? 'partial' : 'deferred', replicasReady: ready?.ready ?? null, rebalance: null, handBackOwed: owed.owed,
        changes: [], skipped: [], notDone: [],
      };
    }
    if (rebalance) {
      return {
        outcome: ready?.ready === false ? 'partial' : rebalance.outcome, replicasReady: ready?.ready ?? null, rebalance,
        changes: rebalance.changes, skipped: rebalance.skipped, notDone: rebalance.notDone,
      };
    }
    const inner = resultOf(done, 'replace-server') ?? resultOf(done, 'add-server');
    if (!inner) return { outcome: 'completed', replicasReady: null, rebalance: null, changes: [], skipped: [], notDone: [] };
    return { outcome: inner.report?.outcome ?? inner.status, operationId: inner.id, changes: inner.report?.changes ?? [], skipped: inner.report?.skipped ?? [], notDone: inner.report?.notDone ?? [] };
  }

  // The joined server, the cluster it was found in, and the node the pod runs on (null without Kubernetes).
  async function waitForJoin(pod) {
    const deadline = createDeadline(clock, config.deadlines.poststartJoinSeconds * 1000);
    for (;;) {
      const podInfo = kube ? await kube.getPod(pod).catch(() => null) : null;
      const cluster = await store.readCluster().catch(() => null);
      const server = cluster && findServerForPod(cluster, { podName: pod, podIp: podInfo?.podIp ?? null, overrides: config.podServerOverrides });
      if (server) return { server, cluster, podNode: podInfo?.nodeName ?? null };
      if (deadline.expired()) throw new AppError('DEADLINE_EXCEEDED', `no RethinkDB server for pod ${pod} joined within ${config.deadlines.poststartJoinSeconds} s`);
      await clock.sleep(config.waitPollIntervalMs);
    }
  }

  // One pod, or every RethinkDB pod on a node. The warning's source says who raised it ('hook' for the pod itself),
  // so that the pod (or the monitor) may withdraw it again, and only it.
  // Every server the warning names is marked first and demoted in one plan, so that no shard's primary is handed
  // to a server the same warning is about to demote (a node-wide warning makes one handover per shard).
  async function perfwarning({
    pod, node, durationSeconds = null, reason = null, signal = null, actor = 'operator', requester = OPERATOR,
  }) {
    const source = warningSourceOf(requester);
    const { cluster, targets: found } = pod ? await serversForPods([pod]) : await targets.serversOnNode(node);
    const servers = found.filter((t) => t.server).map((t) => t.server);
    const decision = decidePerfWarning({
      durationSeconds, longSeconds: config.perfwarning.longSeconds, servers, node: node ?? null, reason, now: clock.now(), source, signal,
      moveRaftLeader: config.perfwarning.moveRaftLeader,
    });
    const { warning } = decision;
    const done = await executor.run(decision.intents, { actor, pod: pod ?? null, snapshot: cluster });
    const demotion = resultOf(done, 'demote');
    const migrations = done.filter((d) => d.intent.type === 'migrate-replicas-off');
    const raftReports = resultOf(done, 'move-raft-leadership')?.reports ?? [];
    const results = found.map((t) => {
      if (!t.server) return { pod: t.pod, server: null, outcome: 'nothing_to_do', reason: 'no connected RethinkDB server matches this pod' };
      const started = migrations.find((m) => m.intent.server.id === t.server.id)?.result.operation;
      const migration = started ? { id: started.id, status: started.status } : null;
      return {
        pod: t.pod, server: t.server.name, outcome: demotion.outcome, demotion,
        raftLeadership: raftReports.find((rep) => rep.target?.server === t.server.name) ?? null,
        migration, expiresAt: warning.expiresAt,
      };
    });
    log.info({ pod, node, durationSeconds, source, long: decision.long, reason: decision.reason }, 'perf warning handled');
    return { event: 'PERFWARNING', target: pod ? { pod } : { node }, source, decision: describe(decision), pods: results };
  }

  // Ends a warning now (DELETE, expiry, or the monitor) and restores primaries once the pod is healthy. A pod or
  // the monitor may end only a warning it raised.
  async function endPerfWarning({ pod, reason = 'perf warning withdrawn', actor = 'operator', requester = OPERATOR }) {
    const onlySource = endableWarningSource(requester);
    // The pod may be gone (the monitor clears warnings of vanished pods); the warning is found by pod name then.
    const { cluster, targets: [{ server }] } = await serversForPods([pod]).catch(async (err) => {
      if (err.code !== 'POD_NOT_FOUND') throw err;
      return { cluster: await store.readCluster(), targets: [{ server: null }] };
    });
    const serverId = server?.id ?? (await marks.perfWarnings()).find((w) => w.pod === pod)?.serverId;
    const warning = serverId ? await marks.getPerfWarning(serverId) : null;
    if (!warning || (onlySource && warning.source !== onlySource)) {
      return { event: 'PERFWARNING_END', pod, ended: false, reason: `no active perf warning${onlySource ? ` from ${onlySource}` : ''} for pod ${pod}` };
    }
    const decision = decidePerfWarningEnd(cluster, { serverId, warning: { ...warning, serverName: server?.name }, reason, migrating: await migrating(serverId) });
    const done = await executor.run([{ type: 'clear-perf-warning', server: { id: serverId } }, ...decision.intents], { actor, pod, snapshot: cluster });
    return { event: 'PERFWARNING_END', pod, ended: true, reason, restore: restoreResult(decision, done) };
  }

  // A node's warnings (a node-wide PERFWARNING marks each of its pods): each pod's ended as endPerfWarning ends it; the
  // pods without a warning the requester may end are left out. ended: whether any was.
  async function endPerfWarningsOnNode({ node, reason, actor = 'operator', requester = OPERATOR }) {
    const { targets: found } = await targets.serversOnNode(node);
    const pods = [];
    for (const t of found) {
      const result = await endPerfWarning({ pod: t.pod, reason, actor, requester });
      if (result.ended) pods.push(result);
    }
    const source = endableWarningSource(requester);
    return {
      event: 'PERFWARNING_END', node, ended: pods.length > 0, pods,
      reason: pods.length > 0 ? reason : `no active perf warning${source ? ` from ${source}` : ''} on any RethinkDB pod of node ${node}`,
    };
  }

  // The action of a migration of the server's replicas under way or due for a retry (its record is on the pod until
  // it ends), or null.
  const migrating = async (serverId) => (await marks.getMigration(serverId))?.action ?? null;

  function restoreResult(decision, done) {
    const why = decision.intents[0]?.reason ?? decision.reason;
    if (decision.action === 'wait') return { action: 'wait', reason: `${why}: ${decision.reason}` };
    if (decision.action === 'add-server') {
      const op = resultOf(done, 'add-server');
      return { action: 'add-server', reason: why, operation: { id: op.id, status: op.status } };
    }
    const report = resultOf(done, 'rebalance-primaries');
    return { action: 'rebalance-primaries', reason: why, outcome: report.outcome, changes: report.changes };
  }

  // Called periodically: end expired warnings, and retry restores that wait for a healthy server.
  async function expireDue() {
    const now = clock.now();
    const ended = [];
    for (const w of await marks.perfWarnings()) {
      if (w.expiresAt && Date.parse(w.expiresAt) <= now) {
        ended.push(await endPerfWarning({ pod: w.pod, reason: `perf warning expired (${w.durationSeconds} s)`, actor: managerActor('expiry') }));
      }
    }
    for (const pending of await marks.restores()) {
      const cluster = await store.readCluster();
      const { serverId, pod, warning, reason, actor } = pending;
      const decision = decidePerfWarningEnd(cluster, { serverId, warning, reason, migrating: await migrating(serverId) });
      const done = await executor.run(decision.intents, { actor, pod, snapshot: cluster });
      ended.push({ event: 'PERFWARNING_RESTORE_RETRY', pod, restore: restoreResult(decision, done) });
    }
    return ended;
  }

  // Called periodically: once no rollout is under way, the hand-backs its POSTSTARTs deferred run as one levelling
  // (decideRolloutLevelling). Reads the StatefulSet only while a hand-back is owed.
  async function levelAfterRollout() {
    const owed = await marks.handBacks();
    if (owed.length === 0) return null;
    const decision = decideRolloutLevelling({ rollout: (await readRollout())?.state ?? null, owed });
    if (decision.action !== 'level') return { event: 'ROLLOUT_LEVELLING', action: decision.action, reason: decision.reason };
    log.info({ reason: decision.reason, owed: owed.map((o) => o.serverName) }, 'rollout ended: levelling the primaries once');
    const done = await executor.run(decision.intents, { actor: managerActor('rollout'), pod: null });
    const report = resultOf(done, 'rebalance-primaries');
    return { event: 'ROLLOUT_LEVELLING', action: 'level', reason: decision.reason, outcome: report.outcome, changes: report.changes };
  }

  // Called periodically: ends the departures of servers that have left (or outstayed their window), and puts the
  // heartbeat timeout back once none is left. Reads the cluster only while a departure exists.
  async function restoreHeartbeatDue() {
    const departures = await marks.departures();
    if (departures.length === 0) return null;
    const cluster = await store.readCluster();
    const decision = decideHeartbeatRestore(cluster, { departures, now: clock.now() });
    if (decision.intents.length === 0) return null;
    await executor.run(decision.intents, { actor: managerActor('heartbeat'), pod: null });
    log.info({ reason: decision.reason }, 'departures ended');
    const set = decision.intents.find((i) => i.type === 'set-heartbeat');
    return { event: 'HEARTBEAT_RESTORE', reason: decision.reason, heartbeatTimeoutSecs: set?.seconds ?? null };
  }

  // A warning the monitor raised that has lasted PERFWARNING_LONG_SECONDS with the pod still hot: the long path
  // (decidePerfWarningEscalation).
  async function escalateFromMonitor({ pod, reason }) {
    const { cluster, targets: [{ server }] } = await serversForPods([pod]);
    const warning = server ? await marks.getPerfWarning(server.id) : null;
    const decision = decidePerfWarningEscalation({
      servers: server ? [server] : [], warning, pod, longSeconds: config.perfwarning.longSeconds, reason: `monitor: ${reason}`, now: clock.now(),
    });
    const refuse = (why) => ({ event: 'PERFWARNING_ESCALATION', pod, escalated: false, reason: why });
    if (!decision.escalate) return refuse(decision.reason);
    const done = await executor.run(decision.intents, { actor: MONITOR_ACTOR, pod, snapshot: cluster });
    const migration = resultOf(done, 'migrate-replicas-off');
    const started = migration?.operation ?? null;
    // The warning may have ended (DELETE) while the demotion ran: then no migration started, and nothing is long.
    if (!started) return { ...refuse(migration?.skipped ?? 'no migration started'), demotion: resultOf(done, 'demote') };
    log.info({ pod, migration: started.id, reason: decision.reason }, 'monitor escalated a long hot-spot: replicas migrate off');
    return {
      event: 'PERFWARNING_ESCALATION', pod, escalated: true, reason: decision.reason,
      demotion: resultOf(done, 'demote'), migration: { id: started.id, status: started.status },
    };
  }

  // The monitor's scale-out (uniform overload): one more RethinkDB pod, through the executor. Its own POSTSTART then adds
  // the server (audited on that pod); this record is the monitor's decision, on no pod, so it has no Kubernetes Event.
  async function scaleOutFromMonitor({ to, reason }) {
    const startedMs = clock.now();
    const record = (outcome, notDone = []) => audit?.record({
      actor: MONITOR_ACTOR, action: 'scale-out', target: { replicas: to }, reason, outcome, notDone, durationMs: clock.now() - startedMs,
    });
    try {
      const done = await executor.run(scaleOutIntents({ to, reason }), { actor: MONITOR_ACTOR, pod: null });
      record('completed');
      return resultOf(done, 'scale-statefulset');
    } catch (err) {
      record('failed', [{ reason: err.message }]);
      throw err;
    }
  }

  // The monitor's raise and clear: a hot-spot held long enough is a warning of unknown duration from the
  // monitor; its clearing ends only a warning the monitor raised.
  const raiseFromMonitor = ({ pod, signal, reason }) => perfwarning({ pod, requester: MONITOR, signal, reason: `monitor: ${reason}`, actor: MONITOR_ACTOR });
  const clearFromMonitor = ({ pod, reason }) => endPerfWarning({ pod, reason: `monitor: hot-spot ended, ${reason}`, actor: MONITOR_ACTOR, requester: MONITOR });

  return {
    prestop, poststart, perfwarning, endPerfWarning, endPerfWarningsOnNode, expireDue, restoreHeartbeatDue, levelAfterRollout, raiseFromMonitor, clearFromMonitor, escalateFromMonitor, scaleOutFromMonitor,
    pendingRestores: async () => (await marks.restores()).map(({ serverId, pod, reason, persisted }) => ({ serverId, pod, reason, persisted })),
    poststartRunning: () => operations.list().some((op) => op.kind === 'poststart' && op.status === 'running'),
  };
}

// A decision as callers see it: the reason and the actions it leads to (the intents of ./intent-types.js that are
// actions), without the intents' internals.
function describe(decision) {
  const { intents, ...rest } = decision;
  const names = intents.filter((i) => intentIs(i.type, 'action'))
    .map((i) => (i.type === 'demote' ? `move-primaries-from-${i.node ? 'node' : 'server'}` : i.type));
  return { ...rest, actions: [...new Set(names)] };
}
