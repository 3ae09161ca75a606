// What each infrastructure event does, in terms of the policy and the actions:
//   PRESTOP      demote every primary on the pod's server (and keep it draining);
//   POSTSTART    wait for the new server to join, then restore a lost server's placement or add capacity;
//   PERFWARNING  demote primaries (short or unknown duration) and also migrate replicas (long), until it ends.

import { AppError } from '../errors.js';
import { findServer, findServerForPod } from '../cluster/cluster-model.js';
import { createDeadline } from '../lib/clock.js';
import { votingReplicas } from '../planner/eligibility.js';
import {
  decidePerfWarning, decidePerfWarningEnd, decidePoststart, decidePrestop,
} from '../policy/policy.js';

export function createHooks({ store, actions, marks, operations, kube, config, clock, logger }) {
  const log = logger.child({ module: 'hooks' });

  // The manager's own connection leaves servers about to stop or be drained (and those already marked), so
  // that it is not cut off when they go. Failing to move it costs nothing but a log line.
  async function steerAwayFrom(serverIds) {
    const moved = await store.steerAwayFrom([...new Set([...(await marks.drainingIds()), ...serverIds])])
      .catch((err) => ({ moved: false, reason: err.message }));
    if (moved.moved) log.info({ from: moved.from, to: moved.to }, 'connection moved off a server about to be drained');
  }

  // The pod, or POD_NOT_FOUND; null when there is no Kubernetes API to ask.
  async function existingPod(podName) {
    if (!kube) return null;
    return kube.getPod(podName).catch((err) => {
      if (err.code === 'NOT_FOUND') throw new AppError('POD_NOT_FOUND', `pod "${podName}" does not exist in namespace ${config.kubernetes.namespace}`);
      throw err;
    });
  }

  // The pod's RethinkDB server: by hostname (= pod name in a StatefulSet), canonical address, pod IP, or override.
  async function serverForPod(podName) {
    const pod = await existingPod(podName);
    const cluster = await store.readCluster();
    const server = findServerForPod(cluster, { podName, podIp: pod?.podIp ?? null, overrides: config.podServerOverrides });
    return { pod, server, cluster };
  }

  async function prestop({ pod, dryRun = false, deadlineSeconds, actor = `hook:prestop:${pod}` }) {
    const { server } = await serverForPod(pod);
    const decision = decidePrestop({ pod, server });
    if (!server) {
      log.warn({ pod, reason: decision.reason }, 'preStop: nothing to demote');
      return { event: 'PRESTOP', pod, server: null, decision, outcome: 'nothing_to_do', primariesOff: true, reason: decision.reason };
    }
    if (!dryRun) await steerAwayFrom([server.id]);
    const report = await actions.movePrimariesFromServer({ server: server.name, dryRun, deadlineSeconds, reason: decision.reason, actor, via: 'prestop' });
    if (!dryRun) await marks.noteDemoted(server.id, 'draining', report.changes);
    const primariesOff = report.skipped.length === 0 && report.notDone.length === 0 && report.settled !== false;
    log.info({ pod, server: server.name, outcome: report.outcome, primariesOff, reason: decision.reason }, 'preStop handled');
    return { event: 'PRESTOP', pod, server: server.name, decision, outcome: report.outcome, primariesOff, report };
  }

  // Answers at once with an operation; the work (join, decide, act) runs in the background.
  // byPod: the pod itself called (not an operator); it may then release only a drain its own PRESTOP set.
  // A pod that does not exist is refused before any operation starts (each would poll for its join deadline).
  async function poststart({ pod, actor = `hook:poststart:${pod}`, byPod = false }) {
    await existingPod(pod);
    const running = operations.list().find((op) => op.kind === 'poststart' && op.params.pod === pod && op.status === 'running');
    if (running) return { event: 'POSTSTART', pod, operation: running, repeated: true };
    const op = operations.start('poststart', { pod }, (operation) => runPoststart(operation, { pod, actor, byPod }));
    return { event: 'POSTSTART', pod, operation: op, repeated: false };
  }

  async function runPoststart(op, { pod, actor, byPod }) {
    const startedAt = clock.now();
    const step = (name) => { const s = { step: name, status: 'running', detail: null }; op.steps.push(s); return s; };
    const join = step('wait-for-join');
    const server = await waitForJoin(pod);
    join.status = 'done';
    join.detail = `${server.name} joined`;
    const cluster = await store.readCluster();
    const mark = await marks.getDraining(server.id);
    // An operator's drain (release-server undoes it) outlives the pod's restarts; a PRESTOP's does not.
    const draining = mark && (!byPod || mark.via === 'prestop') ? mark : null;
    const decision = decidePoststart(cluster, { serverId: server.id, wasDraining: Boolean(draining), giveBack: config.poststart.giveBack });
    op.steps.push({ step: 'decide', status: 'done', detail: decision.reason, kind: decision.kind });
    log.info({ pod, server: server.name, kind: decision.kind, reason: decision.reason }, 'postStart decision');
    if (decision.release) await marks.release(server.id);
    if (decision.replaces) await marks.release(decision.replaces);
    const act = step(decision.kind);
    const prefer = (draining?.demoted ?? []).map((d) => ({ ...d, serverId: server.id }));
    const result = await poststartAction(decision, server, actor, prefer);
    act.status = 'done';
    act.detail = result.outcome;
    return { event: 'POSTSTART', pod, server: server.name, decision, ...result, durationMs: clock.now() - startedAt };
  }

  async function poststartAction(decision, server, actor, prefer) {
    const reason = decision.reason;
    if (decision.kind === 'returning' && !decision.actions.includes('rebalance-primaries')) {
      return { outcome: 'completed', replicasReady: null, rebalance: null, changes: [], skipped: [], notDone: [] };
    }
    if (decision.kind === 'returning') {
      const ready = await waitForReplicasReady(server.id);
      const rebalance = await actions.rebalancePrimaries({ reason, actor, pod: null, prefer });
      return { outcome: ready ? rebalance.outcome : 'partial', replicasReady: ready, rebalance, changes: rebalance.changes, skipped: rebalance.skipped, notDone: rebalance.notDone };
    }
    const started = decision.kind === 'replacement'
      ? await actions.replaceServer({ lost: decision.replaces, server: server.id, reason, actor })
      : await actions.addServer({ server: server.name, reason, actor });
    const inner = await operations.wait(started.operation.id);
    return { outcome: inner.report?.outcome ?? inner.status, operationId: inner.id, changes: inner.report?.changes ?? [], skipped: inner.report?.skipped ?? [], notDone: inner.report?.notDone ?? [] };
  }

  async function waitForJoin(pod) {
    const deadline = createDeadline(clock, config.deadlines.poststartJoinSeconds * 1000);
    for (;;) {
      const podInfo = kube ? await kube.getPod(pod).catch(() => null) : null;
      const cluster = await store.readCluster().catch(() => null);
      const server = cluster && findServerForPod(cluster, { podName: pod, podIp: podInfo?.podIp ?? null, overrides: config.podServerOverrides });
      if (server) return server;
      if (deadline.expired()) throw new AppError('DEADLINE_EXCEEDED', `no RethinkDB server for pod ${pod} joined within ${config.deadlines.poststartJoinSeconds} s`);
      await clock.sleep(config.waitPollIntervalMs);
    }
  }

  async function waitForReplicasReady(serverId) {
    const deadline = createDeadline(clock, config.deadlines.migrationSeconds * 1000);
    for (;;) {
      const cluster = await store.readCluster();
      const pending = cluster.tables.flatMap((t) => t.shards.filter((s) => votingReplicas(s).includes(serverId) && s.states[serverId] !== 'ready'));
      if (pending.length === 0) return true;
      if (deadline.expired()) return false;
      await clock.sleep(config.waitPollIntervalMs);
    }
  }

  // The pods a warning names: one pod, or every RethinkDB pod on a node.
  async function podsOf({ pod, node }) {
    if (pod) return [pod];
    if (!kube) throw new AppError('KUBERNETES_UNAVAILABLE', 'no Kubernetes API is configured, so a node cannot be resolved to pods');
    if (!(await kube.nodeExists(node))) throw new AppError('NODE_NOT_FOUND', `Kubernetes node "${node}" does not exist`);
    return (await kube.listRethinkDbPodsOnNode(node)).map((p) => p.name);
  }

  // byPod: the pod itself raised it (source hook), so that it may withdraw it again, and only it.
  // Every server the warning names is marked first and demoted in one plan, so that no shard's primary is handed
  // to a server the same warning is about to demote (a node-wide warning makes one handover per shard).
  async function perfwarning({ pod, node, durationSeconds = null, reason = null, source: given = 'operator', signal = null, actor = given, byPod = false }) {
    const source = byPod ? 'hook' : given;
    const decision = decidePerfWarning({ durationSeconds, longSeconds: config.perfwarning.longSeconds });
    const names = await podsOf({ pod, node });
    const pods = await Promise.all(names.map(existingPod));
    const cluster = await store.readCluster();
    const targets = names.map((name, i) => ({
      pod: name, server: findServerForPod(cluster, { podName: name, podIp: pods[i]?.podIp ?? null, overrides: config.podServerOverrides }),
    }));
    const warned = targets.filter((t) => t.server);
    const now = clock.now();
    const warning = {
      source, signal, reason: reason ?? null, durationSeconds, long: decision.long, decision: decision.reason,
      since: new Date(now).toISOString(), expiresAt: Number.isFinite(durationSeconds) ? new Date(now + durationSeconds * 1000).toISOString() : null,
    };
    for (const t of warned) {
      await marks.setPerfWarning(t.server.id, warning, { serverName: t.server.name, pod: t.pod });
      await marks.clearRestore(t.server.id);
    }
    const why = `${reason ? `${reason}: ` : ''}${decision.reason}`;
    if (warned.length > 0) await steerAwayFrom(warned.map((t) => t.server.id));
    const demotion = warned.length > 0
      ? await actions.movePrimariesFromServers({ servers: warned.map((t) => t.server.id), node, reason: why, actor, mark: false })
      : null;
    const results = [];
    for (const t of targets) {
      if (!t.server) {
        results.push({ pod: t.pod, server: null, outcome: 'nothing_to_do', reason: 'no connected RethinkDB server matches this pod' });
        continue;
      }
      await marks.noteDemoted(t.server.id, 'perfwarning', demotion.changes.filter((c) => c.from === t.server.name));
      const migration = decision.long ? await actions.migrateReplicasOff({ server: t.server.id, reason: why, actor, mark: false }) : null;
      results.push({
        pod: t.pod, server: t.server.name, outcome: demotion.outcome, demotion,
        migration: migration ? { id: migration.operation.id, status: migration.operation.status, href: `/v1/operations/${migration.operation.id}` } : null,
        expiresAt: warning.expiresAt,
      });
    }
    log.info({ pod, node, durationSeconds, source, long: decision.long, reason: decision.reason }, 'perf warning handled');
    return { event: 'PERFWARNING', target: pod ? { pod } : { node }, source, decision, pods: results };
  }

  // Ends a warning now (DELETE, expiry, or the monitor) and restores primaries once the pod is healthy.
  // byPod: the pod itself asks; it may end only a warning it raised.
  async function endPerfWarning({ pod, reason = 'perf warning withdrawn', actor = 'operator', onlySource: given = null, byPod = false }) {
    const onlySource = byPod ? 'hook' : given;
    // The pod may be gone (the monitor clears warnings of vanished pods); the warning is found by pod name then.
    const { server, cluster } = await serverForPod(pod).catch(async (err) => {
      if (err.code !== 'POD_NOT_FOUND') throw err;
      return { server: null, cluster: await store.readCluster() };
    });
    const serverId = server?.id ?? (await marks.perfWarnings()).find((w) => w.pod === pod)?.serverId;
    const warning = serverId ? await marks.getPerfWarning(serverId) : null;
    if (!warning || (onlySource && warning.source !== onlySource)) {
      return { event: 'PERFWARNING_END', pod, ended: false, reason: `no active perf warning${onlySource ? ` from ${onlySource}` : ''} for pod ${pod}` };
    }
    await marks.clearPerfWarning(serverId);
    const restored = await restore({ serverId, warning: { ...warning, serverName: server?.name }, cluster, reason, actor, pod });
    return { event: 'PERFWARNING_END', pod, ended: true, reason, restore: restored };
  }

  async function restore({ serverId, warning, cluster, reason, actor, pod }) {
    const decision = decidePerfWarningEnd(cluster, { serverId, warning });
    const why = `${reason}: ${decision.reason}`;
    if (decision.action === 'wait') {
      // Persisted, so that a restarted manager still gives the primaries back.
      await marks.setRestore(serverId, { warning, reason, actor }, { serverName: warning.serverName, pod });
      return { action: 'wait', reason: why };
    }
    await marks.clearRestore(serverId);
    const server = findServer(cluster, serverId);
    if (decision.action === 'add-server') {
      const started = await actions.addServer({ server: server.name, reason: why, actor });
      return { action: 'add-server', reason: why, operation: { id: started.operation.id, href: `/v1/operations/${started.operation.id}` } };
    }
    const prefer = (warning.demoted ?? []).map((d) => ({ ...d, serverId }));
    const report = await actions.rebalancePrimaries({ reason: why, actor, pod, prefer });
    return { action: 'rebalance-primaries', reason: why, outcome: report.outcome, changes: report.changes };
  }

  // Called periodically: end expired warnings, and retry restores that waited for a healthy pod.
  async function expireDue() {
    const now = clock.now();
    const ended = [];
    for (const w of await marks.perfWarnings()) {
      if (w.expiresAt && Date.parse(w.expiresAt) <= now) {
        ended.push(await endPerfWarning({ pod: w.pod, reason: `perf warning expired (${w.durationSeconds} s)`, actor: 'manager:expiry' }));
      }
    }
    for (const pending of await marks.restores()) {
      const cluster = await store.readCluster();
      const { serverId, pod, warning, reason, actor } = pending;
      ended.push({ event: 'PERFWARNING_RESTORE_RETRY', pod, restore: await restore({ serverId, warning, cluster, reason, actor, pod }) });
    }
    return ended;
  }

  return {
    prestop, poststart, perfwarning, endPerfWarning, expireDue,
    pendingRestores: async () => (await marks.restores()).map(({ serverId, pod, reason, persisted }) => ({ serverId, pod, reason, persisted })),
    poststartRunning: () => operations.list().some((op) => op.kind === 'poststart' && op.status === 'running'),
  };
}
