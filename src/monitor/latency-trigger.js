// The latency trigger (src/policy/latency.js): every LATENCY_WINDOW_MS (the work queue's `latency` key, while this
// replica leads) it takes the answer times of the prober's probes, asks the policy, and raises or ends the
// PERFWARNINGs it decides, through the same events as the CPU rule's. Its view is /v1/monitor's `latency`. With the
// disk probe on, it also keeps the probes' tables (src/policy/disk-probe.js): every PROBE_TABLES_EVERY windows it
// makes the missing ones, places them, and drops those of servers gone for LOSS_RESTORE_AFTER_SECONDS.

import {
  dataMoving, decideLatencyStep, forgetRaise, initialLatencyState, summarizeLatencyWindow,
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

  // One window: its decisions applied, one at a time. A decision that fails is logged and kept in the view: a raise
  // is forgotten (the next anomalous window raises again); an end is tried again after another cooldown, since the
  // warning of ours is still on record.
  async function reconcile() {
    if (!view.enabled) return {};
    const entries = prober.takeLatencies().map((e) => ({ ...e, pod: podOf(e) }));
    if (diskProbe && view.windows % PROBE_TABLES_EVERY === 0) await keepProbeTables([...new Set(entries.map((e) => e.name))]);
    const window = summarizeLatencyWindow(entries, { windowMs: settings.windowMs });
    const warnings = await marks.perfWarnings();
    const step = decideLatencyStep(state, window, {
      now: clock.now(),
      factor: settings.factor,
      minDeltaMs: settings.minDeltaMs,
      consecutiveWindows: settings.consecutiveWindows,
      warmupWindows: settings.warmupWindows,
      clearCooldownMs: settings.clearCooldownSeconds * 1000,
      warnedPods: warnings.map((w) => w.pod),
      ownWarnings: warnings.filter((w) => w.source === warningSourceOf(LATENCY)).map((w) => ({ pod: w.pod, baselines: w.baselines ?? null })),
      silent: new Set(prober.suspects()),
      moving: dataMoving({ cluster: recentCluster(), migrations: await marks.migrations() }),
    });
    state = step.state;
    const results = [];
    for (const decision of step.decisions) {
      const decidedAt = new Date(clock.now()).toISOString();
      const applied = await apply(decision);
      // A raise whose warning was not written is forgotten: the next window raises again.
      if (decision.type === 'raise' && applied.error) state = forgetRaise(state, decision.serverId);
      // time: when it was handled (the demotion or the restore done); decidedAt: when the window decided it.
      results.push({ time: new Date(clock.now()).toISOString(), decidedAt, ...applied });
    }
    if (step.held && step.held !== view.held) log.info({ held: step.held }, 'latency trigger holds off');
    const servers = window.map((w) => {
      const server = state.servers[w.serverId];
      const signal = server?.signals[w.signal];
      return {
        server: w.name, pod: w.pod, signal: w.signal, probes: w.n, valueMs: signal?.valueMs ?? null, p50Ms: w.p50Ms, p90Ms: w.p90Ms,
        baselineMs: signal?.baselineMs ?? null, anomalous: signal?.anomalous ?? null, streak: signal?.streak ?? 0, raised: server?.raised ?? false,
      };
    });
    log.debug({ window: servers.map((x) => `${x.server} ${x.signal} ${x.valueMs} base ${x.baselineMs}${x.anomalous ? ' !' : ''}`) }, 'latency window');
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
        ? await events.raiseFromLatency({ pod: decision.pod, reason: decision.reason, baselines: decision.baselines })
        : await events.clearFromLatency({ pod: decision.pod, reason: decision.reason });
      return { ...describe(decision), result: summarize(result) };
    } catch (err) {
      log.warn({ decision: decision.type, pod: decision.pod, err: err.message }, 'latency trigger decision failed');
      return { ...describe(decision), error: err.message };
    }
  }

  // The probe tables of the servers probed now (names), made, placed and dropped as planProbeTables says, each on its
  // own: one that fails (logged, shown) does not keep the others from being kept; the next look tries it again.
  async function keepProbeTables(servers) {
    const db = settings.diskProbeDb;
    const failed = [];
    const attempt = async (what, fn) => {
      try { await fn(); return true; } catch (err) { failed.push(`${what}: ${err.message}`); return false; }
    };
    const plan = (tables) => planProbeTables({
      servers: servers.map((name) => ({ name })), tables, missingSince, now: clock.now(), dropAfterMs,
    });
    let step = null;
    await attempt('read', async () => { step = plan(await store.readProbeTables(db)); });
    if (step) {
      ({ missingSince } = step);
      for (const { table } of step.create) await attempt(`create ${table}`, () => store.createProbeTable(db, table));
      if (step.create.length > 0) await attempt('read', async () => { step = { ...plan(await store.readProbeTables(db)), drop: step.drop }; });
      for (const { tableId, table, server } of step.place) await attempt(`place ${table} on ${server}`, () => store.placeProbeTable(tableId, server));
      for (const { tableId, table, reason } of step.drop) {
        log.info({ table: `${db}.${table}`, reason }, 'dropping a disk probe table');
        await attempt(`drop ${table}`, () => store.dropProbeTable(tableId));
      }
      if (step.create.length + step.place.length + step.drop.length > 0) {
        log.info({ created: step.create.map((c) => c.table), placed: step.place.map((p) => `${p.table} on ${p.server}`), dropped: step.drop.map((d) => d.table) }, 'disk probe tables kept');
      }
    }
    if (failed.length > 0) log.warn({ failed }, 'disk probe tables not all kept; tried again later');
    view.diskProbe.lastTables = servers.length;
    view.diskProbe.lastError = failed.length > 0 ? failed.join('; ') : null;
  }

  // The pod a probed server runs in: POD_SERVER_OVERRIDES' pod for its name, else its hostname (a StatefulSet pod's).
  const overridden = new Map(Object.entries(config.podServerOverrides ?? {}).map(([pod, server]) => [server, pod]));
  const podOf = (entry) => overridden.get(entry.name) ?? entry.pod ?? null;

  // A replica that stops leading forgets the baselines: whoever leads next learns its own (its probes, its network),
  // and judges a server under a warning of ours by the baselines the warning carries.
  function reset() {
    state = initialLatencyState();
    Object.assign(view, { servers: [], held: null });
    metrics?.recordLatencyWindow({ servers: [], decisions: [] });
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
