// The use-cases of PERFWARNING: a warning raised (by an operator, a predictor or the monitor) demotes the pod's
// primaries (short or unknown duration) and also migrates its replicas (long), until it ends; its end, its expiry,
// the monitor's escalation of a long hot-spot, and the monitor's scale-out. Each reads the cluster once, asks the pure
// policy (src/policy/perf-warnings.js, monitor.js) for a decision, and has the executor run the intents.

import { LATENCY_ACTOR, MONITOR_ACTOR, managerActor } from '../audit/actor.js';
import { scaleOutIntents } from '../policy/monitor.js';
import { decidePerfWarning, decidePerfWarningEnd, decidePerfWarningEscalation } from '../policy/perf-warnings.js';
import {
  endableWarningSource, LATENCY, MONITOR, OPERATOR, warningSourceOf,
} from '../policy/requesters.js';
import { resultOf } from './executor.js';
import { describeDecision } from './intent-types.js';

export function createPerfWarningEvents({
  store, marks, executor, targets, config, clock, logger, audit = null,
}) {
  const log = logger.child({ module: 'events' });
  const { serversForPods } = targets;

  // One pod, or every RethinkDB pod on a node. The warning's source says who raised it ('hook' for the pod itself),
  // so that the pod (or the monitor) may withdraw it again, and only it.
  // Every server the warning names is marked first and demoted in one plan, so that no shard's primary is handed
  // to a server the same warning is about to demote (a node-wide warning makes one handover per shard).
  // ctx (here and below): the operation context (src/actions/operation-context.js): actor and requester.
  async function perfwarning({
    pod, node, durationSeconds = null, reason = null, signal = null, baselines = null,
  }, { actor = 'operator', requester = OPERATOR } = {}) {
    const source = warningSourceOf(requester);
    const { cluster, targets: found } = pod ? await serversForPods([pod]) : await targets.serversOnNode(node);
    const servers = found.filter((t) => t.server).map((t) => t.server);
    const decision = decidePerfWarning({
      durationSeconds, longSeconds: config.perfwarning.longSeconds, servers, node: node ?? null, reason, now: clock.now(), source, signal,
      moveRaftLeader: config.perfwarning.moveRaftLeader, baselines,
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
    return { event: 'PERFWARNING', target: pod ? { pod } : { node }, source, decision: describeDecision(decision), pods: results };
  }

  // Ends a warning now (DELETE, expiry, or the monitor) and restores primaries once the pod is healthy. A pod or
  // the monitor may end only a warning it raised.
  async function endPerfWarning({ pod, reason = 'perf warning withdrawn' }, { actor = 'operator', requester = OPERATOR } = {}) {
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
  async function endPerfWarningsOnNode({ node, reason }, ctx = {}) {
    const { requester = OPERATOR } = ctx;
    const { targets: found } = await targets.serversOnNode(node);
    const pods = [];
    for (const t of found) {
      const result = await endPerfWarning({ pod: t.pod, reason }, ctx);
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
        ended.push(await endPerfWarning({ pod: w.pod, reason: `perf warning expired (${w.durationSeconds} s)` }, { actor: managerActor('expiry') }));
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
  const fromMonitor = { actor: MONITOR_ACTOR, requester: MONITOR };
  const raiseFromMonitor = ({ pod, signal, reason }) => perfwarning({ pod, signal, reason: `monitor: ${reason}` }, fromMonitor);

  const clearFromMonitor = ({ pod, reason }) => endPerfWarning({ pod, reason: `monitor: hot-spot ended, ${reason}` }, fromMonitor);

  // The latency trigger's (src/monitor/latency-trigger.js): the same warning of unknown duration, its own source, so
  // that the CPU rule neither ends it nor is ended by it. Not escalated to the long path: that is the CPU rule's.
  const fromLatency = { actor: LATENCY_ACTOR, requester: LATENCY };
  const raiseFromLatency = ({ pod, reason, baselines = null }) => perfwarning({
    pod, signal: 'latency', reason: `latency: ${reason}`, baselines,
  }, fromLatency);
  const clearFromLatency = ({ pod, reason }) => endPerfWarning({ pod, reason: `latency: ${reason}` }, fromLatency);

  return {
    perfwarning, endPerfWarning, endPerfWarningsOnNode, expireDue, raiseFromMonitor, clearFromMonitor, escalateFromMonitor, scaleOutFromMonitor,
    raiseFromLatency, clearFromLatency,
  };
}
