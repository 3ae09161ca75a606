// Pure: the latency trigger (seed 001, Xu, Malladi, Awasthi: a monitor of each service's tail latency that flags an
// anomaly when it departs from its own baseline). The manager's prober (src/rethinkdb/prober.js) already asks every
// server `r.expr(1)` every SUSPICION_PROBE_INTERVAL_MS on a connection of its own; the time each answer takes is the
// server's latency as a client sees it: a server starved of CPU by a neighbour, or behind a congested network link,
// answers late, whatever its CPU metrics say. Each window (LATENCY_WINDOW_MS) gives every server a p90 of those
// times; a server whose p90 is at least LATENCY_FACTOR times its own baseline, and LATENCY_MIN_DELTA_MS above it,
// for LATENCY_CONSECUTIVE_WINDOWS windows in a row, is anomalous, and the trigger raises a PERFWARNING for its pod,
// which demotes its primaries as the CPU rule's does. It ends once the server has been back under the thresholds for
// LATENCY_CLEAR_COOLDOWN_SECONDS.

// Each window's p90 moves the baseline this much of the way towards it (an exponentially weighted mean: about the
// last 20 windows count), only while the server is neither anomalous nor warned nor moving data: the baseline never
// learns the anomaly it is there to find.
export const BASELINE_WEIGHT = 0.05;
// A window with fewer answers than this for a server gives it no verdict (a server answering in 400 ms gives two or
// three a second; one that answers nothing is the suspicion's, src/policy/suspicion.js).
export const MIN_SAMPLES = 3;

// Nearest rank: the smallest value with at least q of the values at or below it.
export function percentile(values, q) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

// entries: [{ serverId, name, pod, samples: [ms], waitingMs }] for one window (the answers' times, and how long the
// probe still unanswered at the window's end has waited, or null: a probe that waits counts as an answer that late,
// so that a server answering in 2 s shows in the window it is slow in). -> [{ serverId, name, pod, n, p50Ms, p90Ms }],
// the percentiles null with fewer than MIN_SAMPLES values.
export function summarizeLatencyWindow(entries) {
  return entries.map((e) => {
    const values = [...e.samples, ...(e.waitingMs === null || e.waitingMs === undefined ? [] : [e.waitingMs])];
    const enough = values.length >= MIN_SAMPLES;
    return {
      serverId: e.serverId, name: e.name, pod: e.pod ?? null, n: values.length,
      p50Ms: enough ? round(percentile(values, 0.5)) : null, p90Ms: enough ? round(percentile(values, 0.9)) : null,
    };
  });
}

// Whether RethinkDB is moving data, which loads the servers it copies from and to, and would read as an anomaly
// (src/monitor/latency-trigger.js): a replica of a table not ready in the last cluster read (a backfill, a
// reconfiguration under way), or a migration of the manager's on record. -> the reason, or null.
export function dataMoving({ cluster, migrations }) {
  if (migrations.length > 0) return `a migration of ${migrations.map((m) => m.server ?? m.serverId ?? m.pod).join(', ')}'s replicas is under way`;
  const busy = (cluster?.tables ?? []).filter((t) => t.shards.length > 0 && !t.allReplicasReady);
  return busy.length > 0 ? `replicas of ${busy.map((t) => `${t.db}.${t.name}`).slice(0, 3).join(', ')} are not all ready (a backfill or a reconfiguration)` : null;
}

export const initialLatencyState = () => ({ servers: {} });

// previous: the state after the last window; window: summarizeLatencyWindow's answer. options:
//   now; factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs (the settings);
//   warnedPods: the pods with a perf warning of any source (not raised again); ownWarnedPods: those the trigger
//   raised itself, as persisted (a restarted manager or a new leader ends them too); silent: the serverIds the
//   prober suspects (the suspicion acts on them: a silent server is no slow one); moving: dataMoving's reason or null.
// -> { state, decisions: [{ type: 'raise' | 'clear', pod, serverId, reason, evidence? }], held: reason or null }.
// Nothing is raised while half the servers with a verdict or more are anomalous at once (load everywhere, or the
// manager's own host is slow: a demotion would only move primaries between slow servers), nor while data moves.
export function decideLatencyStep(previous, window, options) {
  const {
    now, factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs,
    warnedPods = [], ownWarnedPods = [], silent = new Set(), moving = null,
  } = options;
  const warned = new Set(warnedPods);
  const own = new Set(ownWarnedPods);
  const servers = {};
  const decisions = [];
  const verdicts = [];
  for (const w of window) {
    const before = previous.servers[w.serverId] ?? {
      baselineMs: null, learned: 0, streak: 0, raised: false, clearSince: null,
    };
    const raised = before.raised || (w.pod !== null && own.has(w.pod));
    const state = { ...before, raised, p50Ms: w.p50Ms, p90Ms: w.p90Ms, anomalous: null };
    if (w.p90Ms !== null) {
      const ready = before.learned >= warmupWindows && before.baselineMs !== null;
      const anomalous = ready && w.p90Ms >= factor * before.baselineMs && w.p90Ms - before.baselineMs >= minDeltaMs;
      state.anomalous = anomalous;
      verdicts.push({ w, anomalous });
      if (anomalous) {
        state.streak = before.streak + 1;
        state.clearSince = null;
      } else {
        state.streak = 0;
        if (!raised && !moving) {
          state.baselineMs = round(before.baselineMs === null ? w.p90Ms : before.baselineMs + BASELINE_WEIGHT * (w.p90Ms - before.baselineMs));
          state.learned = before.learned + 1;
        }
        if (raised) {
          state.clearSince = before.clearSince ?? now;
          if (now - state.clearSince >= clearCooldownMs) {
            state.raised = false;
            state.clearSince = null;
            if (w.pod !== null) {
              decisions.push({
                type: 'clear', pod: w.pod, serverId: w.serverId,
                reason: `${w.name} answers in ${ms(w.p90Ms)} (p90), under the thresholds for ${Math.round((now - (before.clearSince ?? now)) / 1000)} s (cooldown ${clearCooldownMs / 1000} s)`,
              });
            }
          }
        }
      }
    }
    servers[w.serverId] = state;
  }
  const anomalousCount = verdicts.filter((v) => v.anomalous).length;
  let held = null;
  if (anomalousCount > 0 && anomalousCount * 2 >= verdicts.length) {
    held = `${anomalousCount} of ${verdicts.length} servers answer slowly at once: load everywhere, or the manager's own host; nothing raised`;
  } else if (anomalousCount > 0 && moving) {
    held = `${moving}; nothing raised while data moves`;
  }
  for (const { w, anomalous } of verdicts) {
    const state = servers[w.serverId];
    if (held || !anomalous || state.raised || state.streak < consecutiveWindows) continue;
    if (w.pod === null || warned.has(w.pod) || silent.has(w.serverId)) continue;
    state.raised = true;
    const base = state.baselineMs;
    decisions.push({
      type: 'raise', pod: w.pod, serverId: w.serverId,
      evidence: {
        p90Ms: w.p90Ms, p50Ms: w.p50Ms, probes: w.n, baselineMs: base, windows: state.streak,
      },
      reason: `${w.name} answers the manager's probes in ${ms(w.p90Ms)} (p90 of ${w.n} in the last window), ${(w.p90Ms / base).toFixed(1)}x its baseline of ${ms(base)}`
        + ` for ${state.streak} windows in a row (thresholds ${factor}x and +${minDeltaMs} ms)`,
    });
  }
  // A server missing from this window (not listed for a moment, or gone) keeps its state if the trigger raised its
  // warning: a warning ends only on a window that shows the server answering in time again (or by an operator).
  for (const [serverId, state] of Object.entries(previous.servers)) if (!servers[serverId] && state.raised) servers[serverId] = state;
  return { state: { servers }, decisions, held };
}

function round(x) {
  return Math.round(x * 100) / 100;
}

function ms(x) {
  return `${x < 10 ? x.toFixed(1) : Math.round(x)} ms`;
}
