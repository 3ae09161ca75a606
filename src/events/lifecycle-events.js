// The use-cases of a pod's lifecycle: what PRESTOP and POSTSTART mean, the levelling once a rollout that deferred
// hand-backs has ended, and the heartbeat timeout given back once no departure needs it. Each reads the cluster once,
// asks the pure policy (src/policy/lifecycle.js, rollout.js, heartbeat.js) for a decision (a reason and intents), and
// has the executor run the intents.
//   PRESTOP      demote every primary on the pod's server (and keep it draining);
//   POSTSTART    wait for the new server to join, then restore a lost server's placement or add capacity.

import { hookActor, managerActor } from '../audit/actor.js';
import { appError } from '../errors.js';
import { findServerForPod } from '../cluster/cluster-model.js';
import { createDeadline } from '../lib/clock.js';
import { decideHeartbeatAtShutdown, decideHeartbeatRestore, decideSteadyHeartbeat } from '../policy/heartbeat.js';
import { decidePoststart, decidePrestop, primariesOffAfter } from '../policy/lifecycle.js';
import { OPERATOR, releasableDrain } from '../policy/requesters.js';
import { decideRolloutLevelling, prestopPreference, rolloutOf } from '../policy/rollout.js';
import { resultOf } from './executor.js';
import { describeDecision } from './intent-types.js';

// How often the configured heartbeat timeout (HEARTBEAT_TIMEOUT_SECONDS) is checked while no departure owns it.
const STEADY_HEARTBEAT_CHECK_MS = 30000;

export function createLifecycleEvents({
  store, marks, operations, kube, executor, targets, config, clock, logger, audit = null, metrics = null,
}) {
  const log = logger.child({ module: 'events' });
  const { existingPod, serversForPods } = targets;

  // ctx: the operation context (src/actions/operation-context.js) the route made; its deadline is the hook's, made when
  // the request came: the reads below count against it.
  async function prestop({ pod }, ctx = {}) {
    const { actor = hookActor('prestop', pod), dryRun = false, deadline = null } = ctx;
    const { cluster, targets: [{ server }] } = await serversForPods([pod]);
    const heartbeat = { seconds: config.prestop.heartbeatTimeoutSeconds, windowSeconds: config.prestop.heartbeatWindowSeconds };
    // Without a Kubernetes API nothing says the pod exists: a name no server answers to is a mistake (a mistyped hook
    // must not look like success), and nothing changed.
    if (!server && !kube) throw appError('podHasNoServer', { pod, known: targets.knownPods(cluster) });
    if (!server) {
      const decision = decidePrestop({ pod, server, heartbeat, moveRaftLeader: config.prestop.moveRaftLeader });
      log.warn({ pod, reason: decision.reason }, 'preStop: nothing to demote');
      return { event: 'PRESTOP', pod, server: null, decision: describeDecision(decision), outcome: 'nothing_to_do', primariesOff: true, reason: decision.reason };
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
      if (['waited', 'gave_up', 'unread'].includes(wait.outcome)) recordWait({ server, pod, actor, majorityWait: wait, when });
    }
    const primariesOff = primariesOffAfter(report);
    log.info({ pod, server: server.name, outcome: report.outcome, primariesOff, reason: decision.reason }, 'preStop handled');
    return {
      event: 'PRESTOP', pod, server: server.name, decision: describeDecision(decision), outcome: report.outcome, primariesOff, report, majorityWait, settleWait,
      ...(heartbeatResult ? { heartbeat: heartbeatResult } : {}),
      ...(raftLeadership ? { raftLeadership } : {}),
    };
  }

  // A PRESTOP that waited for a ready majority (before or after its demotion): an audit record (an Event on the pod, a
  // Warning when it gave up or could not read the cluster), the metric and a log line.
  function recordWait({ server, pod, actor, majorityWait, when }) {
    const { outcome, waitedMs, short, reason } = majorityWait;
    metrics?.recordPrestopWait({ outcome, seconds: waitedMs / 1000 });
    audit?.record({
      actor, action: 'wait-for-majority', target: { server: server.name }, pod, reason: `${when}: ${reason}`, durationMs: waitedMs,
      outcome: { waited: 'completed', gave_up: 'timed_out', unread: 'failed' }[outcome],
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
  // ctx: actor and requester (who asked, and of which kind).
  async function poststart({ pod }, { actor = hookActor('poststart', pod), requester = OPERATOR } = {}) {
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
    return { event: 'POSTSTART', pod, server: server.name, decision: describeDecision(decision), ...result, durationMs: clock.now() - startedAt };
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
      if (deadline.expired()) throw appError('joinTooSlow', { pod, seconds: config.deadlines.poststartJoinSeconds });
      await clock.sleep(config.waitPollIntervalMs);
    }
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
  // heartbeat timeout back once none is left. Reads the cluster while a departure exists; with none, and
  // HEARTBEAT_TIMEOUT_SECONDS set, at most every STEADY_HEARTBEAT_CHECK_MS, to keep the configured value.
  let steadyCheckedAt = -Infinity;
  async function restoreHeartbeatDue() {
    const departures = await marks.departures();
    if (departures.length === 0) return keepSteadyHeartbeat();
    const cluster = await store.readCluster();
    const decision = decideHeartbeatRestore(cluster, { departures, now: clock.now() });
    if (decision.intents.length === 0) return null;
    await executor.run(decision.intents, { actor: managerActor('heartbeat'), pod: null });
    log.info({ reason: decision.reason }, 'departures ended');
    const set = decision.intents.find((i) => i.type === 'set-heartbeat');
    return { event: 'HEARTBEAT_RESTORE', reason: decision.reason, heartbeatTimeoutSecs: set?.seconds ?? null };
  }

  async function keepSteadyHeartbeat() {
    const seconds = config.heartbeat?.timeoutSeconds ?? 0;
    if (!seconds || clock.now() - steadyCheckedAt < STEADY_HEARTBEAT_CHECK_MS) return null;
    steadyCheckedAt = clock.now();
    const cluster = await store.readCluster();
    const decision = decideSteadyHeartbeat({ current: cluster.heartbeatTimeoutSecs, departures: [], seconds });
    if (decision.intents.length === 0) return null;
    await executor.run(decision.intents, { actor: managerActor('heartbeat'), pod: null });
    log.info({ reason: decision.reason }, 'heartbeat timeout set to the configured value');
    return { event: 'HEARTBEAT_STEADY', reason: decision.reason, heartbeatTimeoutSecs: seconds };
  }

  // At shutdown, while still leading: departures no successor can read give the heartbeat timeout back now
  // (decideHeartbeatAtShutdown). Reads the cluster only while a departure exists.
  async function restoreHeartbeatAtShutdown() {
    const departures = await marks.departures();
    if (departures.length === 0) return null;
    const cluster = await store.readCluster();
    const decision = decideHeartbeatAtShutdown({ current: cluster.heartbeatTimeoutSecs, departures });
    if (decision.intents.length > 0) await executor.run(decision.intents, { actor: managerActor('heartbeat'), pod: null });
    log.info({ reason: decision.reason }, 'departures at shutdown');
    const set = decision.intents.find((i) => i.type === 'set-heartbeat');
    return { event: 'HEARTBEAT_RESTORE', reason: decision.reason, heartbeatTimeoutSecs: set?.seconds ?? null };
  }

  return {
    prestop, poststart, levelAfterRollout, restoreHeartbeatDue, restoreHeartbeatAtShutdown,
  };
}
