// Pure: the latency trigger (seed 001, Xu, Malladi, Awasthi: a monitor of each service's tail latency that flags an
// anomaly when it departs from its own baseline). Two signals per server, each measured by the manager's prober
// (src/rethinkdb/prober.js) on its own connection to the server:
// - 'reply': `r.expr(1)`, every SUSPICION_PROBE_INTERVAL_MS. A server starved of CPU by a neighbour, or behind a
//   congested network link, answers late, whatever its CPU metrics say;
// - 'disk' (LATENCY_DISK_PROBE_INTERVAL_MS): a durable write to a table whose one replica is on the server. RethinkDB
//   does its disk I/O on threads of its own, so a server whose disk a neighbour saturates answers `r.expr(1)` in time,
//   and only a write that waits for its own disk shows it.
// Each window (LATENCY_WINDOW_MS) gives every server a value per signal (QUANTILES); one at least LATENCY_FACTOR
// times its own baseline, and LATENCY_MIN_DELTA_MS above it, is anomalous; anomalous for LATENCY_CONSECUTIVE_WINDOWS
// windows in a row, the trigger raises a PERFWARNING for its pod, which demotes its primaries as the CPU rule's does.
// It ends once the server has been back under the thresholds for LATENCY_CLEAR_COOLDOWN_SECONDS.

// Each window's value moves the baseline this much of the way towards it (an exponentially weighted mean: about the
// last 20 windows count), only while the server is neither anomalous nor warned (by anyone) nor moving data, and
// (after the warm-up) only a window under LEARN_BELOW times it: the baseline never learns the anomaly it is there to
// find.
export const BASELINE_WEIGHT = 0.05;
// A window at this many times the baseline or more is not learned (once the warm-up is over), anomalous or not: an
// interference that sets in over a few windows would otherwise raise the baseline ahead of itself and never reach
// LATENCY_FACTOR times it. A lasting change below LATENCY_FACTOR is then never learned, and raises nothing.
export const LEARN_BELOW = 2;
// A window with fewer answers than this for a probe judges it only if the slowest (a probe still unanswered counts
// with its wait) is anomalous: few answers because each took long.
export const MIN_SAMPLES = 3;
// The quantile of a window's answers each probe is judged by: the reply probe's 20 answers a second by their p90; the
// disk probe's four by their median, so that one slow write (a neighbour's burst) is not a slow window.
export const QUANTILES = { reply: 0.9, disk: 0.5 };

// Nearest rank: the smallest value with at least q of the values at or below it.
export function percentile(values, q) {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

// entries: [{ serverId, name, pod, signal, samples: [ms], waitingMs }] for one window, one per server and signal
// ('reply' or 'disk'): the answers' times, and how long the probe still unanswered at the window's end has waited (or
// null). windowMs: the window's length. -> [{ serverId, name, pod, signal, n, quantile, valueMs, maxMs, p50Ms, p90Ms,
// stalled }]:
// - valueMs: the signal's quantile of the answers (QUANTILES), null with fewer than MIN_SAMPLES;
// - stalled: a probe has waited the whole window or more; valueMs is then at least that wait. A shorter wait is not
//   counted (its answer is, in the window it comes in: counted in both, one slow answer would be two slow windows);
// - maxMs: the slowest answer or wait, for a window with few answers.
export function summarizeLatencyWindow(entries, { windowMs }) {
  return entries.map((e) => {
    const signal = e.signal ?? 'reply';
    const quantile = QUANTILES[signal];
    const waiting = e.waitingMs ?? null;
    const stalled = waiting !== null && waiting >= windowMs;
    const enough = e.samples.length >= MIN_SAMPLES;
    const value = enough ? percentile(e.samples, quantile) : null;
    const all = [...e.samples, ...(waiting === null ? [] : [waiting])];
    return {
      serverId: e.serverId, name: e.name, pod: e.pod ?? null, signal, n: e.samples.length, quantile, stalled,
      valueMs: stalled ? round(Math.max(value ?? 0, waiting)) : (value === null ? null : round(value)),
      maxMs: all.length > 0 ? round(Math.max(...all)) : null,
      p50Ms: enough ? round(percentile(e.samples, 0.5)) : null, p90Ms: enough ? round(percentile(e.samples, 0.9)) : null,
    };
  });
}

// Replica states of RethinkDB's table_status that mean data is moving to that replica.
const MOVING_STATES = new Set(['backfilling', 'transitioning']);

// Whether RethinkDB is moving data, which loads the servers it copies from and to, and would read as an anomaly
// (src/monitor/latency-trigger.js): a replica backfilling or transitioning in the last cluster read, or a migration
// of the manager's on record. A replica only disconnected is no data moving. -> the reason, or null.
export function dataMoving({ cluster, migrations }) {
  if (migrations.length > 0) return `a migration of ${migrations.map((m) => m.server ?? m.serverName ?? m.serverId ?? m.pod).join(', ')}'s replicas is under way`;
  const busy = (cluster?.tables ?? []).filter((t) => t.shards.some((sh) => Object.values(sh.states ?? {}).some((state) => MOVING_STATES.has(state))));
  return busy.length > 0 ? `replicas of ${busy.map((t) => `${t.db}.${t.name}`).slice(0, 3).join(', ')} are backfilling or transitioning` : null;
}

export const initialLatencyState = () => ({ servers: {} });

// What each signal measures, in a reason: 'reply' (the direct probe, r.expr(1)) and 'disk' (the disk probe, a durable
// write to a table whose one replica is on the server: src/policy/disk-probe.js).
const MEASURES = {
  reply: "answers the manager's probes",
  disk: 'writes its disk probe (a durable write to a table on it alone)',
};

// How a window's value was taken, in a reason.
function howTaken(w, value) {
  if (w.stalled) return `a probe unanswered for ${ms(value)}`;
  if (w.valueMs === null) return `the slowest of ${w.n} answers in the last window, few because slow`;
  return `${w.quantile === 0.5 ? 'median' : `p${Math.round(w.quantile * 100)}`} of ${w.n} in the last window`;
}

// previous: the state after the last window; window: summarizeLatencyWindow's answer, an entry per server and signal.
// options:
//   now; factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs (the settings);
//   warnedPods: the pods with a perf warning of any source (neither raised again nor learned from); ownWarnings:
//   [{ pod, baselines }] those the trigger raised itself, as persisted (a restarted manager or a new leader ends them
//   too; baselines: { signal: ms } as they were at the raise, which such a leader starts from instead of learning the
//   slow level); silent: the serverIds the prober suspects (the suspicion acts on them: a silent server is no slow
//   one); moving: dataMoving's reason or null.
// -> { state, decisions: [{ type: 'raise' | 'clear', pod, serverId, reason, evidence?, baselines? }], held: reason or null }.
// Each signal of each server has its own baseline and streak; a server is raised once, on the first signal anomalous
// for consecutiveWindows windows, and cleared once its signals with a learned baseline all have a verdict and no
// anomaly (at least one), for clearCooldownMs. A raised server stays raised until then even if its warning ends otherwise (an
// operator's DELETE is not fought by raising again while it is slow; a raise that failed is forgotten by
// forgetRaise). Nothing is raised on a signal while half the servers with a verdict on it or more are
// anomalous on it at once (load everywhere, a disk they share, or the manager's own host: a demotion would only move
// primaries between slow servers), nor while data moves (and streaks start again after it).
export function decideLatencyStep(previous, window, options) {
  const {
    now, factor, minDeltaMs, consecutiveWindows, warmupWindows, clearCooldownMs,
    warnedPods = [], ownWarnings = [], silent = new Set(), moving = null,
  } = options;
  const warned = new Set(warnedPods);
  const own = new Map(ownWarnings.map((w) => [w.pod, w]));
  const servers = {};
  const decisions = [];
  const verdicts = []; // { w, anomalous, value } per server and signal with a verdict
  const byServer = new Map();
  for (const w of window) byServer.set(w.serverId, [...(byServer.get(w.serverId) ?? []), w]);
  const slow = (value, baseline) => value >= factor * baseline && value - baseline >= minDeltaMs;
  for (const [serverId, entries] of byServer) {
    const { pod, name } = entries[0];
    const before = previous.servers[serverId] ?? { raised: false, clearSince: null, signals: {} };
    const warning = pod === null ? undefined : own.get(pod);
    const raised = before.raised || Boolean(warning);
    const signals = { ...before.signals };
    let blocked = false; // a signal with a learned baseline and no verdict this window (slow to answer at all)
    let judged = false; // a signal with a learned baseline and a verdict
    for (const w of entries) {
      let was = before.signals[w.signal] ?? { baselineMs: null, learned: 0, streak: 0 };
      // A warning of ours that this state does not know (a new leader): its baselines as at the raise, learned.
      const seeded = warning?.baselines?.[w.signal];
      if (was.baselineMs === null && Number.isFinite(seeded)) was = { ...was, baselineMs: seeded, learned: warmupWindows };
      const ready = was.learned >= warmupWindows && was.baselineMs !== null;
      let value = w.valueMs;
      if (value === null && ready && w.maxMs !== null && slow(w.maxMs, was.baselineMs)) value = w.maxMs;
      const sig = {
        ...was, valueMs: value, p50Ms: w.p50Ms, p90Ms: w.p90Ms, anomalous: null,
      };
      if (ready && value === null) blocked = true;
      if (ready && value !== null) judged = true;
      if (value !== null) {
        sig.anomalous = ready && slow(value, was.baselineMs);
        sig.streak = sig.anomalous && !moving ? was.streak + 1 : 0;
        const learnable = !ready || value < LEARN_BELOW * was.baselineMs;
        if (!sig.anomalous && !raised && !moving && !warned.has(pod) && learnable) {
          sig.baselineMs = round(was.baselineMs === null ? value : was.baselineMs + BASELINE_WEIGHT * (value - was.baselineMs));
          sig.learned = was.learned + 1;
        }
        verdicts.push({ w, anomalous: sig.anomalous, value });
      }
      signals[w.signal] = sig;
    }
    const anomalous = entries.some((w) => signals[w.signal].anomalous);
    const state = { raised, clearSince: raised ? before.clearSince : null, signals };
    if (anomalous) state.clearSince = null;
    else if (raised && judged && !blocked) {
      state.clearSince = before.clearSince ?? now;
      if (now - state.clearSince >= clearCooldownMs) {
        state.raised = false;
        state.clearSince = null;
      }
      // Only a warning of ours that is still there is ended (an operator may have ended it, or the pod lost it).
      if (!state.raised && warning) {
        const shown = entries.map((w) => `${w.signal === 'reply' ? 'answers' : 'writes its disk probe'} in ${ms(signals[w.signal].valueMs)}`).join(', ');
        decisions.push({
          type: 'clear', pod, serverId,
          reason: `${name} ${shown}, under the thresholds for ${Math.round((now - (before.clearSince ?? now)) / 1000)} s (cooldown ${clearCooldownMs / 1000} s)`,
        });
      }
    }
    servers[serverId] = state;
  }
  // Per signal: too many servers slow at once holds that signal's raises.
  const heldSignals = new Map();
  for (const signal of new Set(verdicts.map((v) => v.w.signal))) {
    const judged = verdicts.filter((v) => v.w.signal === signal);
    const count = judged.filter((v) => v.anomalous).length;
    if (count > 0 && count * 2 >= judged.length) {
      heldSignals.set(signal, `${count} of ${judged.length} servers are slow at once on the ${signal} probe: load everywhere, a shared resource, or the manager's own host; nothing raised on it`);
    }
  }
  const anyAnomalous = verdicts.some((v) => v.anomalous);
  const held = [...heldSignals.values(), ...(anyAnomalous && moving ? [`${moving}; nothing raised while data moves`] : [])].join('; ') || null;
  for (const { w, anomalous, value } of verdicts) {
    const state = servers[w.serverId];
    const sig = state.signals[w.signal];
    if (!anomalous || moving || heldSignals.has(w.signal) || state.raised || sig.streak < consecutiveWindows) continue;
    if (w.pod === null || warned.has(w.pod) || silent.has(w.serverId)) continue;
    state.raised = true;
    const base = sig.baselineMs;
    decisions.push({
      type: 'raise', pod: w.pod, serverId: w.serverId,
      evidence: {
        signal: w.signal, valueMs: value, quantile: w.quantile, p50Ms: w.p50Ms, p90Ms: w.p90Ms, probes: w.n, baselineMs: base, windows: sig.streak,
      },
      baselines: Object.fromEntries(Object.entries(state.signals).filter(([, x]) => x.baselineMs !== null).map(([k, x]) => [k, x.baselineMs])),
      reason: `${w.name} ${MEASURES[w.signal]} in ${ms(value)} (${howTaken(w, value)}), ${(value / base).toFixed(1)}x its baseline of ${ms(base)}`
        + ` for ${sig.streak} windows in a row (thresholds ${factor}x and +${minDeltaMs} ms)`,
    });
  }
  // A server missing from this window (not listed for a moment, or gone) keeps its state while its warning of ours is
  // in force: the warning ends only on windows that show the server answering in time again (or by an operator).
  for (const [serverId, state] of Object.entries(previous.servers)) if (!servers[serverId] && state.raised) servers[serverId] = state;
  return { state: { servers }, decisions, held };
}

// The state after a raise that failed (its warning was not written): the server is not raised, its streak goes on, so
// the next window raises again.
export function forgetRaise(state, serverId) {
  const server = state.servers[serverId];
  return server ? { servers: { ...state.servers, [serverId]: { ...server, raised: false, clearSince: null } } } : state;
}

function round(x) {
  return Math.round(x * 100) / 100;
}

function ms(x) {
  return `${x < 10 ? x.toFixed(1) : Math.round(x)} ms`;
}
