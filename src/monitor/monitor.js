// The metrics monitor: polls PodMetrics and NodeMetrics, computes each pod's utilization two ways, and lets
// the policy decide. A skewed hot-spot that holds for N polls raises PERFWARNING; one still hot
// PERFWARNING_LONG_SECONDS after that is escalated to the long path (its replicas move off); one that stays clear for a
// cooldown ends it; uniform overload scales the StatefulSet out by one. Polls never overlap, and a failed
// poll is logged and counted while the loop goes on.

import {
  busyPodsOf, decideMonitorStep, freshPods, initialMonitorState, scaleOutSettled,
} from '../policy/monitor.js';
import { MONITOR, warningSourceOf } from '../policy/requesters.js';
import { evaluateHotspots, utilizationSamples } from './hotspot.js';

// How many of the latest decisions /v1/monitor keeps (a poll without decisions adds none).
const DECISION_HISTORY_LENGTH = 20;

export function createMonitor({ kube, events, marks, config, clock, logger, metrics = null }) {
  const log = logger.child({ module: 'monitor' });
  const settings = config.monitor;
  let state = initialMonitorState();
  let polling = false;
  const scale = { inFlight: null, lastAt: null };
  const view = {
    enabled: settings.enabled && Boolean(kube),
    pollIntervalMs: settings.pollIntervalMs,
    thresholds: { hotUtilization: settings.hotUtilization, hotSkew: settings.hotSkew, consecutivePolls: settings.consecutivePolls, immediateUtilization: settings.immediateUtilization, clearCooldownSeconds: settings.clearCooldownSeconds },
    polls: 0,
    failures: 0,
    skippedOverlaps: 0,
    lastPollAt: null,
    lastError: null,
    averages: null,
    uniform: false,
    pods: [],
    lastDecisions: [],
    scaleOut: scale,
  };

  async function readMetrics() {
    const [pods, podMetrics, nodeMetrics] = await Promise.all([kube.listRethinkDbPods(), kube.listPodMetrics(), kube.listNodeMetrics()]);
    const nodeNames = [...new Set(pods.map((p) => p.nodeName).filter(Boolean))];
    const nodes = await Promise.all(nodeNames.map((n) => kube.getNode(n).catch(() => ({ name: n, allocatableCpuCores: null }))));
    return { pods, podMetrics, nodes, nodeMetrics };
  }

  async function pollOnce() {
    if (polling) {
      view.skippedOverlaps += 1;
      return { skipped: 'the previous poll is still running' };
    }
    polling = true;
    try {
      const usage = await readMetrics();
      const evaluation = evaluateHotspots(utilizationSamples(usage), settings);
      await settleScaleOut();
      const warnings = await marks.perfWarnings();
      const warnedPods = warnings.map((w) => w.pod);
      const monitorWarnings = warnings.filter((w) => w.source === warningSourceOf(MONITOR)).map((w) => ({ pod: w.pod, since: w.since, long: Boolean(w.long) }));
      const currentReplicas = (await kube.getStatefulSetScale()).replicas;
      const step = decideMonitorStep(state, evaluation, {
        now: clock.now(), consecutivePolls: settings.consecutivePolls, immediateUtilization: settings.immediateUtilization, clearCooldownMs: settings.clearCooldownSeconds * 1000, warnedPods,
        longMs: config.perfwarning.longSeconds * 1000, monitorWarnings,
        scaleOut: { enabled: settings.scaleOut, inFlight: Boolean(scale.inFlight), lastAt: scale.lastAt, cooldownMs: settings.scaleOutCooldownSeconds * 1000, replicas: currentReplicas, maxReplicas: settings.maxReplicas },
      });
      state = step.state;
      const results = [];
      for (const decision of step.decisions) results.push({ time: new Date(clock.now()).toISOString(), ...(await apply(decision)) });
      Object.assign(view, {
        polls: view.polls + 1, lastPollAt: new Date(clock.now()).toISOString(), lastError: null,
        averages: evaluation.averages, uniform: evaluation.uniform,
        pods: evaluation.samples.map((s) => ({ ...s, hot: evaluation.hot.find((h) => h.pod === s.pod)?.signal ?? null, ...(state.pods[s.pod] ?? {}) })),
        lastDecisions: [...view.lastDecisions, ...results].slice(-DECISION_HISTORY_LENGTH),
      });
      metrics?.recordPoll({ evaluation, decisions: results });
      return { evaluation, decisions: results };
    } catch (err) {
      view.failures += 1;
      metrics?.recordPollFailure();
      view.lastError = { time: new Date(clock.now()).toISOString(), message: err.message };
      log.warn({ err: err.message, failures: view.failures }, 'monitor poll failed; the loop goes on');
      return { error: err.message };
    } finally {
      polling = false;
    }
  }

  async function apply(decision) {
    log.info({ decision: decision.type, pod: decision.pod, signal: decision.signal, reason: decision.reason }, 'monitor decision');
    try {
      if (decision.type === 'raise') {
        const result = await events.raiseFromMonitor({ pod: decision.pod, signal: decision.signal, reason: decision.reason });
        return { ...decision, result };
      }
      if (decision.type === 'escalate') {
        const result = await events.escalateFromMonitor({ pod: decision.pod, reason: decision.reason });
        return { ...decision, result };
      }
      if (decision.type === 'clear') {
        const result = await events.clearFromMonitor({ pod: decision.pod, reason: decision.reason });
        return { ...decision, result };
      }
      if (decision.type === 'scale-out') return { ...decision, result: await scaleOut(decision) };
      return decision;
    } catch (err) {
      log.warn({ decision: decision.type, pod: decision.pod, err: err.message }, 'monitor decision failed');
      return { ...decision, error: err.message };
    }
  }

  // One more RethinkDB pod, through the events and the executor; in flight from now (settleScaleOut).
  async function scaleOut(decision) {
    scale.inFlight = { to: decision.to, since: new Date(clock.now()).toISOString() };
    scale.lastAt = clock.now();
    return events.scaleOutFromMonitor({ to: decision.to, reason: decision.reason });
  }

  // A scale-out is in flight until its pods are Ready and no POSTSTART is still bringing one in (scaleOutSettled).
  async function settleScaleOut() {
    if (!scale.inFlight) return;
    const { readyReplicas } = await kube.getStatefulSetRollout();
    if (scaleOutSettled({ to: scale.inFlight.to, readyReplicas, poststartRunning: events.poststartRunning() })) scale.inFlight = null;
  }

  // A replica that stops leading forgets its streaks: if it leads again, it starts from the marks on the pods, not
  // from what it saw in an earlier term (a hot streak or a clear cooldown that no longer describes the pods).
  function reset() {
    state = initialMonitorState();
  }

  // The pods the last poll found busy (busyPodsOf): the prober waits longer before it suspects their servers.
  const busyPods = () => busyPodsOf({
    pods: view.pods, lastPollAt: view.lastPollAt, now: clock.now(), pollIntervalMs: settings.pollIntervalMs, hotUtilization: settings.hotUtilization,
  });

  // The pods' load as the last poll found it, while it is recent (freshPods): what targets are chosen by (headroom).
  const recentPods = () => freshPods({
    pods: view.pods, lastPollAt: view.lastPollAt, now: clock.now(), pollIntervalMs: settings.pollIntervalMs,
  });

  return {
    pollOnce, reset, busyPods, recentPods, view: () => structuredClone(view),
  };
}
