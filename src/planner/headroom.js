// Pure (planner): targets chosen by headroom (seed 001, Xu, Malladi, Awasthi: a weighted reward over each candidate node's
// headroom decides where work goes). With HEADROOM_TARGETS on, where a demoted primary or a moved replica goes is
// chosen among the candidates the planner's safety rules allow (never fewer, never others) by a score of each
// candidate's headroom, then by the planner's counts among those close to the best.
//
// Each server's headroom, from what the manager measures (a part is left out when it is not measured):
//   cpu      1 - its pod's CPU use over its limit (the monitor's last poll, `own`);
//   node     1 - its node's CPU use over its allocatable CPU (the monitor's last poll, `interference`);
//   latency  1 at its baseline, 0 at the latency trigger's threshold: 1 - (ratio - 1) / (LATENCY_FACTOR - 1), where
//            ratio is the worst of its probes' last value over their baselines (the latency trigger's last window: a
//            disk or network neighbour shows here and nowhere else); a value less than LATENCY_MIN_DELTA_MS above its
//            baseline counts as the baseline (a probe answered in 1 ms against 0.5 ms is no lack of room).
// Each part is clamped to [0, 1]; the score is their weighted mean (HEADROOM_WEIGHTS) over the parts known for that
// server. Memory, disk throughput and network throughput are not in the metrics API, so they are not parts.

export const HEADROOM_PARTS = ['cpu', 'node', 'latency'];

const clamp = (x) => Math.min(1, Math.max(0, x));
const round = (x) => Math.round(x * 1000) / 1000;

// signals: { own, interference, latencyRatio } (each a number or null); weights: { cpu, node, latency }; factor: the
// latency trigger's. -> { score, parts } (score null when no part is known).
export function headroomOf({ own = null, interference = null, latencyRatio = null }, weights, { factor = 4 } = {}) {
  const parts = {};
  if (Number.isFinite(own)) parts.cpu = round(clamp(1 - own));
  if (Number.isFinite(interference)) parts.node = round(clamp(1 - interference));
  if (Number.isFinite(latencyRatio) && factor > 1) parts.latency = round(clamp(1 - (latencyRatio - 1) / (factor - 1)));
  const known = HEADROOM_PARTS.filter((p) => p in parts && weights[p] > 0);
  const total = known.reduce((sum, p) => sum + weights[p], 0);
  return { score: total > 0 ? round(known.reduce((sum, p) => sum + weights[p] * parts[p], 0) / total) : null, parts };
}

// The servers' signals joined from what the manager last measured: monitor pods ([{ pod, own, interference }], the
// monitor's view, by pod) and latency rows ([{ server, signal, valueMs, baselineMs }], the latency trigger's view, by
// server name), for the cluster's servers ([{ id, name, hostname }]; a pod is a server's hostname, as in a
// StatefulSet: POD_SERVER_OVERRIDES are not applied here). minDeltaMs: LATENCY_MIN_DELTA_MS. -> Map serverId ->
// signals (servers with no measure are left out).
export function headroomSignals({
  servers, pods = [], latency = [], minDeltaMs = 0,
}) {
  const byPod = new Map(pods.map((p) => [p.pod, p]));
  const signals = new Map();
  for (const s of servers) {
    const pod = s.hostname ? byPod.get(s.hostname) : undefined;
    const ratios = latency.filter((l) => l.server === s.name && Number.isFinite(l.valueMs) && l.baselineMs > 0)
      .map((l) => (l.valueMs - l.baselineMs < minDeltaMs ? 1 : l.valueMs / l.baselineMs));
    const entry = {
      own: pod?.own ?? null, interference: pod?.interference ?? null, latencyRatio: ratios.length > 0 ? round(Math.max(...ratios)) : null,
    };
    if (entry.own !== null || entry.interference !== null || entry.latencyRatio !== null) signals.set(s.id, entry);
  }
  return signals;
}

// Each measured server's { score, parts } (headroomOf over headroomSignals): Map serverId -> { score, parts }.
export function headroomScores({
  servers, pods = [], latency = [], weights, factor, minDeltaMs = 0,
}) {
  return new Map([...headroomSignals({
    servers, pods, latency, minDeltaMs,
  })].map(([id, signals]) => [id, headroomOf(signals, weights, { factor })]));
}

// What a plan takes as its `headroom` option: inputs (null: HEADROOM_TARGETS off, or { pods, latency, weights, factor,
// tolerance }) scored for the cluster's servers. -> null or { scores, tolerance }.
export function headroomOption(inputs, servers) {
  return inputs && { scores: headroomScores({ servers, ...inputs }), tolerance: inputs.tolerance };
}

// Of the candidates (server ids the planner allows), the one to take: those whose score is within `tolerance` of the
// best score are equally roomy, and of them the one with the fewest items so far (counts; ties to the lower name).
// Every candidate must have a score: with one unmeasured, null (the caller goes by counts alone, as without headroom).
// -> { id, score, parts, among } or null.
export function pickByHeadroom(candidates, counts, scores, { tolerance, nameOf }) {
  if (candidates.length === 0 || candidates.some((id) => !Number.isFinite(scores.get(id)?.score))) return null;
  const best = Math.max(...candidates.map((id) => scores.get(id).score));
  const pool = candidates.filter((id) => scores.get(id).score >= best - tolerance);
  let pick = null;
  for (const id of pool) {
    const count = counts.get(id) ?? 0;
    const bestCount = pick === null ? Infinity : (counts.get(pick) ?? 0);
    if (pick === null || count < bestCount || (count === bestCount && nameOf(id) < nameOf(pick))) pick = id;
  }
  const { score, parts } = scores.get(pick);
  return {
    id: pick, score, parts, among: candidates.map((id) => ({ server: nameOf(id), score: scores.get(id).score })),
  };
}
