// The latency trigger (src/policy/latency.js): every LATENCY_WINDOW_MS (the work queue's `latency` key, while this
// replica leads) it takes the answer times of the prober's direct probes, asks the policy, and raises or ends the
// PERFWARNINGs it decides, through the same events as the CPU rule's. Its view is /v1/monitor's `latency`.

import {
  dataMoving, decideLatencyStep, initialLatencyState, summarizeLatencyWindow,
} from '../policy/latency.js';
import { LATENCY, warningSourceOf } from '../policy/requesters.js';

// The manager's work queue key (src/manager.js).
export const LATENCY_KEY = 'latency';
const DECISION_HISTORY_LENGTH = 20;

export function createLatencyTrigger({
  prober, events, marks, recentCluster, config, clock, logger, metrics = null,
}) {
  const log = logger.child({ module: 'latency-trigger' });
  const settings = config.latency;
  let state = initialLatencyState();
  const view = {
    enabled: settings.enabled && prober !== null,
    windowMs: settings.windowMs,
    thresholds: {
      factor: settings.factor, minDeltaMs: settings.minDeltaMs, consecutiveWindows: settings.consecutiveWindows,
      warmupWindows: settings.warmupWindows, clearCooldownSeconds: settings.clearCooldownSeconds,
    },
    windows: 0,
    lastWindowAt: null,
    held: null,
    servers: [],
    lastDecisions: [],
  };

  // One window: its decisions applied, one at a time. A decision that fails is logged and kept in the view; the
  // state still counts it as taken (the next raise comes after the cooldown, as the CPU rule's).
  async function reconcile() {
    if (!view.enabled) return {};
    const window = summarizeLatencyWindow(prober.takeLatencies());
    const warnings = await marks.perfWarnings();
    const step = decideLatencyStep(state, window, {
      now: clock.now(),
      factor: settings.factor,
      minDeltaMs: settings.minDeltaMs,
      consecutiveWindows: settings.consecutiveWindows,
      warmupWindows: settings.warmupWindows,
      clearCooldownMs: settings.clearCooldownSeconds * 1000,
      warnedPods: warnings.map((w) => w.pod),
      ownWarnedPods: warnings.filter((w) => w.source === warningSourceOf(LATENCY)).map((w) => w.pod),
      silent: new Set(prober.suspects()),
      moving: dataMoving({ cluster: recentCluster(), migrations: await marks.migrations() }),
    });
    state = step.state;
    const results = [];
    for (const decision of step.decisions) results.push({ time: new Date(clock.now()).toISOString(), ...(await apply(decision)) });
    if (step.held && step.held !== view.held) log.info({ held: step.held }, 'latency trigger holds off');
    const servers = window.map((w) => ({
      server: w.name, pod: w.pod, probes: w.n, p50Ms: w.p50Ms, p90Ms: w.p90Ms,
      baselineMs: state.servers[w.serverId]?.baselineMs ?? null, anomalous: state.servers[w.serverId]?.anomalous ?? null,
      streak: state.servers[w.serverId]?.streak ?? 0, raised: state.servers[w.serverId]?.raised ?? false,
    }));
    Object.assign(view, {
      windows: view.windows + 1, lastWindowAt: new Date(clock.now()).toISOString(), held: step.held, servers,
      lastDecisions: [...view.lastDecisions, ...results].slice(-DECISION_HISTORY_LENGTH),
    });
    metrics?.recordLatencyWindow({ servers, decisions: results });
    return { decisions: results };
  }

  async function apply(decision) {
    log.info({
      decision: decision.type, pod: decision.pod, evidence: decision.evidence, reason: decision.reason,
    }, 'latency trigger decision');
    try {
      const result = decision.type === 'raise'
        ? await events.raiseFromLatency({ pod: decision.pod, reason: decision.reason })
        : await events.clearFromLatency({ pod: decision.pod, reason: decision.reason });
      return { ...describe(decision), result: summarize(result) };
    } catch (err) {
      log.warn({ decision: decision.type, pod: decision.pod, err: err.message }, 'latency trigger decision failed');
      return { ...describe(decision), error: err.message };
    }
  }

  // A replica that stops leading forgets the baselines: whoever leads next learns its own (its probes, its network).
  function reset() {
    state = initialLatencyState();
  }

  return { reconcile, reset, view: () => structuredClone(view) };
}

const describe = ({ type, pod, reason, evidence }) => ({
  type, pod, reason, ...(evidence ? { evidence } : {}),
});

// What /v1/monitor keeps of an answer: the outcome of the demotion or the restore, not the whole report.
function summarize(result) {
  if (!result) return null;
  if (result.event === 'PERFWARNING') return { event: result.event, outcomes: result.pods.map((p) => `${p.pod}: ${p.outcome}`) };
  return { event: result.event, ended: result.ended, reason: result.reason };
}
