// The latency trigger (src/policy/latency.js): every LATENCY_WINDOW_MS (the work queue's `latency` key, while this
// replica leads) it takes the answer times of the prober's probes, asks the policy, and raises or ends the
// PERFWARNINGs it decides, through the same events as the CPU rule's. Its view is /v1/monitor's `latency`. With the
// disk probe on, it also keeps the probes' tables (src/policy/disk-probe.js): every PROBE_TABLES_EVERY windows it
// makes the missing ones, places them, and drops those of servers gone for LOSS_RESTORE_AFTER_SECONDS.

import {
  dataMoving, decideLatencyStep, initialLatencyState, summarizeLatencyWindow,
} from '../policy/latency.js';
import { planProbeTables } from '../policy/disk-probe.js';
import { LATENCY, warningSourceOf } from '../policy/requesters.js';

// The manager's work queue key (src/manager.js).
export const LATENCY_KEY = 'latency';
const DECISION_HISTORY_LENGTH = 20;
export const PROBE_TABLES_EVERY = 10;

export function createLatencyTrigger({
  prober, events, marks, store, recentCluster, config, clock, logger, metrics = null,
}) {
  const log = logger.child({ module: 'latency-trigger' });
  const settings = config.latency;
  const diskProbe = settings.diskProbeIntervalMs > 0;
  const dropAfterMs = config.lossRestore.afterSeconds > 0 ? config.lossRestore.afterSeconds * 1000 : Infinity;
  let state = initialLatencyState();
  let missingSince = new Map();
  const view = {
    enabled: settings.enabled && prober !== null,
    windowMs: settings.windowMs,
    thresholds: {
      factor: settings.factor, minDeltaMs: settings.minDeltaMs, consecutiveWindows: settings.consecutiveWindows,
      warmupWindows: settings.warmupWindows, clearCooldownSeconds: settings.clearCooldownSeconds,
    },
    diskProbe: diskProbe ? { db: settings.diskProbeDb, intervalMs: settings.diskProbeIntervalMs, lastTables: null, lastError: null } : null,
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
    const entries = prober.takeLatencies();
    if (diskProbe && view.windows % PROBE_TABLES_EVERY === 0) await keepProbeTables([...new Set(entries.map((e) => e.name))]);
    const window = summarizeLatencyWindow(entries);
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
    const servers = window.map((w) => {
      const server = state.servers[w.serverId];
      const signal = server?.signals[w.signal];
      return {
        server: w.name, pod: w.pod, signal: w.signal, probes: w.n, p50Ms: w.p50Ms, p90Ms: w.p90Ms,
        baselineMs: signal?.baselineMs ?? null, anomalous: signal?.anomalous ?? null, streak: signal?.streak ?? 0, raised: server?.raised ?? false,
      };
    });
    log.debug({ window: servers.map((x) => `${x.server} ${x.signal} p90 ${x.p90Ms} base ${x.baselineMs}${x.anomalous ? ' !' : ''}`) }, 'latency window');
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

  // The probe tables of the servers probed now (names), made, placed and dropped as planProbeTables says. A failure is
  // logged and shown; the next look tries again.
  async function keepProbeTables(servers) {
    const db = settings.diskProbeDb;
    try {
      const plan = (tables) => planProbeTables({
        servers: servers.map((name) => ({ name })), tables, missingSince, now: clock.now(), dropAfterMs,
      });
      let step = plan(await store.readProbeTables(db));
      for (const { table } of step.create) await store.createProbeTable(db, table);
      if (step.create.length > 0) step = plan(await store.readProbeTables(db));
      for (const { tableId, server } of step.place) await store.placeProbeTable(tableId, server);
      for (const { tableId, table, reason } of step.drop) {
        log.info({ table: `${db}.${table}`, reason }, 'dropping a disk probe table');
        await store.dropProbeTable(tableId);
      }
      ({ missingSince } = step);
      if (step.create.length + step.place.length + step.drop.length > 0) {
        log.info({ created: step.create.map((c) => c.table), placed: step.place.map((p) => `${p.table} on ${p.server}`), dropped: step.drop.map((d) => d.table) }, 'disk probe tables kept');
      }
      view.diskProbe.lastTables = servers.length;
      view.diskProbe.lastError = null;
    } catch (err) {
      log.warn({ err: err.message }, 'disk probe tables not kept; tried again later');
      view.diskProbe.lastError = err.message;
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
