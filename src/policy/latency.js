// Pure: the latency trigger (seed 001, Xu, Malladi, Awasthi: a monitor of each service's tail latency that flags an
// anomaly when it departs from its own baseline). Two signals per server, each measured by the manager's prober
// (src/rethinkdb/prober.js) on its own connection to the server:
// - 'reply': `r.expr(1)`, every SUSPICION_PROBE_INTERVAL_MS. A server starved of CPU by a neighbour, or behind a
//   congested network link, answers late, whatever its CPU metrics say;
// - 'disk' (LATENCY_DISK_PROBE_INTERVAL_MS): a durable write to a table whose one replica is on the server. RethinkDB
//   does its disk I/O on threads of its own, so a server whose disk a neighbour saturates answers `r.expr(1)` in time,
//   and only a write that waits for its own disk shows it.
// Each window (LATENCY_WINDOW_MS) gives every server a p90 per signal; one whose p90 is at least LATENCY_FACTOR times
// its own baseline, and LATENCY_MIN_DELTA_MS above it, for LATENCY_CONSECUTIVE_WINDOWS windows in a row, is anomalous,
// and the trigger raises a PERFWARNING for its pod, which demotes its primaries as the CPU rule's does. It ends once
// the server has been back under the thresholds for LATENCY_CLEAR_COOLDOWN_SECONDS.

// Each window's p90 moves the baseline this much of the way towards it (an exponentially weighted mean: about the
// last 20 windows count), only while the server is neither anomalous nor warned nor moving data, and (after the
// warm-up) only a window under LEARN_BELOW times it: the baseline never learns the anomaly it is there to find.
export const BASELINE_WEIGHT = 0.05;
// A window at this many times the baseline or more is not learned (once the warm-up is over), anomalous or not: an
// interference that sets in over a few windows would otherwise raise the baseline ahead of itself and never reach
// LATENCY_FACTOR times it. A lasting change below LATENCY_FACTOR is then never learned, and raises nothing.
export const LEARN_BELOW = 2;
// A window with fewer answers than this for a server gives it no verdict (a server answering in 400 ms gives two or
// three a second; one that answers nothing is the suspicion's, src/policy/suspicion.js).
export const MIN_SAMPLES = 3;

// Nearest rank: the smallest value with at least q of the values at or below it.
export function percentile(values, q) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

// entries: [{ serverId, name, pod, signal, samples: [ms], waitingMs }] for one window, one per server and signal
// ('reply' or 'disk'): the answers' times, and how long the probe still unanswered at the window's end has waited, or
// null (a probe that waits counts as an answer that late, so that a server answering in 2 s shows in the window it is
// slow in). -> [{ serverId, name, pod, signal, n, p50Ms, p90Ms }], the percentiles null with fewer than MIN_SAMPLES values.
export function summarizeLatencyWindow(entries) {
  return entries.map((e) => {
    const values = [...e.samples, ...(e.waitingMs === null || e.waitingMs === undefined ? [] : [e.waitingMs])];
    const enough = values.length >= MIN_SAMPLES;
    return {
      serverId: e.serverId, name: e.name, pod: e.pod ?? null, signal: e.signal ?? 'reply', n: values.length,
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

// What each signal measures, in a reason: 'reply' (the direct probe, r.expr(1)) and 'disk' (the disk probe, a durable
// write to a table whose one replica is on the server: src/policy/disk-probe.js).
const MEASURES = {
  reply: "answers the manager's probes",
  disk: 'writes its disk probe (a durable write to a table on it alone)',
};

// previous: the state after the last window; window: summarizeLatencyWindow's answer, an entry per server and signal.
// options:
//   now; factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs (the settings);
//   warnedPods: the pods with a perf warning of any source (not raised again); ownWarnedPods: those the trigger
//   raised itself, as persisted (a restarted manager or a new leader ends them too); silent: the serverIds the
//   prober suspects (the suspicion acts on them: a silent server is no slow one); moving: dataMoving's reason or null.
// -> { state, decisions: [{ type: 'raise' | 'clear', pod, serverId, reason, evidence? }], held: reason or null }.
// Each signal of each server has its own baseline and streak; a server is raised once, on the first signal anomalous
// for consecutiveWindows windows, and cleared once every signal with a verdict has been under the thresholds for
// clearCooldownMs. Nothing is raised on a signal while half the servers with a verdict on it or more are anomalous on
// it at once (load everywhere, a disk they share, or the manager's own host: a demotion would only move primaries
// between slow servers), nor while data moves.
export function decideLatencyStep(previous, window, options) {
  const {
    now, factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs,
    warnedPods = [], ownWarnedPods = [], silent = new Set(), moving = null,
  } = options;
  const warned = new Set(warnedPods);
  const own = new Set(ownWarnedPods);
  const servers = {};
  const decisions = [];
  const verdicts = []; // { w, anomalous } per server and signal with a verdict
  const byServer = new Map();
  for (const w of window) byServer.set(w.serverId, [...(byServer.get(w.serverId) ?? []), w]);
  for (const [serverId, entries] of byServer) {
    const { pod, name } = entries[0];
    const before = previous.servers[serverId] ?? { raised: false, clearSince: null, signals: {} };
    const raised = before.raised || (pod !== null && own.has(pod));
    const signals = { ...before.signals };
    for (const w of entries) {
      const was = before.signals[w.signal] ?? { baselineMs: null, learned: 0, streak: 0 };
      const sig = {
        ...was, p50Ms: w.p50Ms, p90Ms: w.p90Ms, anomalous: null,
      };
      if (w.p90Ms !== null) {
        const ready = was.learned >= warmupWindows && was.baselineMs !== null;
        sig.anomalous = ready && w.p90Ms >= factor * was.baselineMs && w.p90Ms - was.baselineMs >= minDeltaMs;
        sig.streak = sig.anomalous ? was.streak + 1 : 0;
        if (!sig.anomalous && !raised && !moving && (!ready || w.p90Ms <= LEARN_BELOW * was.baselineMs)) {
          sig.baselineMs = round(was.baselineMs === null ? w.p90Ms : was.baselineMs + BASELINE_WEIGHT * (w.p90Ms - was.baselineMs));
          sig.learned = was.learned + 1;
        }
        verdicts.push({ w, anomalous: sig.anomalous });
      }
      signals[w.signal] = sig;
    }
    const judged = entries.filter((w) => w.p90Ms !== null);
    const anomalous = judged.some((w) => signals[w.signal].anomalous);
    const state = { raised, clearSince: before.clearSince, signals };
    if (anomalous) state.clearSince = null;
    else if (raised && judged.length > 0) {
      state.clearSince = before.clearSince ?? now;
      if (now - state.clearSince >= clearCooldownMs) {
        state.raised = false;
        state.clearSince = null;
        if (pod !== null) {
          const shown = judged.map((w) => `${w.signal === 'reply' ? 'answers' : 'writes its disk probe'} in ${ms(w.p90Ms)}`).join(', ');
          decisions.push({
            type: 'clear', pod, serverId,
            reason: `${name} ${shown} (p90), under the thresholds for ${Math.round((now - (before.clearSince ?? now)) / 1000)} s (cooldown ${clearCooldownMs / 1000} s)`,
          });
        }
      }
    }
    servers[serverId] = state;
  }
  // Per signal: too many servers slow at once holds that signal's raises.
  const heldSignals = new Map();
  for (const signal of new Set(verdicts.map((v) => v.w.signal))) {
    const judged = verdicts.filter((v) => v.w.signal === signal);
    const slow = judged.filter((v) => v.anomalous).length;
    if (slow > 0 && slow * 2 >= judged.length) {
      heldSignals.set(signal, `${slow} of ${judged.length} servers are slow at once on the ${signal} probe: load everywhere, a shared resource, or the manager's own host; nothing raised on it`);
    }
  }
  const anyAnomalous = verdicts.some((v) => v.anomalous);
  const held = [...heldSignals.values(), ...(anyAnomalous && moving ? [`${moving}; nothing raised while data moves`] : [])].join('; ') || null;
  for (const { w, anomalous } of verdicts) {
    const state = servers[w.serverId];
    const sig = state.signals[w.signal];
    if (!anomalous || moving || heldSignals.has(w.signal) || state.raised || sig.streak < consecutiveWindows) continue;
    if (w.pod === null || warned.has(w.pod) || silent.has(w.serverId)) continue;
    state.raised = true;
    const base = sig.baselineMs;
    decisions.push({
      type: 'raise', pod: w.pod, serverId: w.serverId,
      evidence: {
        signal: w.signal, p90Ms: w.p90Ms, p50Ms: w.p50Ms, probes: w.n, baselineMs: base, windows: sig.streak,
      },
      reason: `${w.name} ${MEASURES[w.signal]} in ${ms(w.p90Ms)} (p90 of ${w.n} in the last window), ${(w.p90Ms / base).toFixed(1)}x its baseline of ${ms(base)}`
        + ` for ${sig.streak} windows in a row (thresholds ${factor}x and +${minDeltaMs} ms)`,
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
