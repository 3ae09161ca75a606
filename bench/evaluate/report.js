// Pure: turns runs into the evaluation's numbers (per run and paired medians and ratios), a text table, and the
// figures' panels. No I/O.

import { bucketPoints, bucketize, summarize } from './stats.js';

// One run's figures: failed ops (by kind), p99 and mean of the whole run and of the steady first seconds.
export function runFigures(run, { steadySeconds = 10 } = {}) {
  const all = summarize(run.records, { t0: run.t0 });
  const steady = summarize(run.records, { t0: run.t0, fromMs: 2000, toMs: steadySeconds * 1000 });
  return {
    scenario: run.scenario,
    arm: run.arm,
    attempted: all.attempted,
    failed: all.failed,
    failedByKind: all.failedByKind,
    p99Ms: all.latency?.p99 ?? null,
    maxMs: all.latency?.max ?? null,
    steadyP99Ms: steady.latency?.p99 ?? null,
    failedAfterEvent: failedAfterEvents(run),
    slowest: slowestOps(run),
    failures: failedOps(run),
    recovery: run.window ? recoveryOf(run, { ...run.window, steadyP99Ms: steady.latency?.p99 ?? null }) : null,
    phases: (run.phases ?? []).map((phase) => phaseFigures(run, phase)),
    events: run.events,
    notes: run.notes,
    counters: run.counters ?? null,
  };
}

// For a scenario with a disturbance window (the events `from` and `to`, e.g. interference on and off): how many
// seconds after its onset the per-second p99 came back within `factor` x the steady p99 and stayed there until
// the window ended (null: it never did), the p99 of the window as a whole, and with `graceS`, the p99 from graceS
// after the onset to the window's end and its ratio to the steady p99 (the hot-spot goal's measure: a per-second
// p99 of 200 ops is the second slowest op of that second, so one hiccup breaks "stayed", not the window's p99).
export function recoveryOf(run, {
  from, to, steadyP99Ms, factor = 2, graceS = null,
}) {
  const start = run.events.find((e) => e.label === from)?.t;
  const end = run.events.find((e) => e.label === to)?.t;
  if (start === undefined || end === undefined || !steadyP99Ms) return null;
  const limit = factor * steadyP99Ms;
  const seconds = bucketize(run.records, { t0: run.t0 })
    .filter((b) => b.tMs / 1000 >= Math.floor(start) && b.tMs / 1000 < end && b.latency?.p99 !== undefined && b.latency?.p99 !== null);
  let recovered = null;
  for (let i = seconds.length - 1; i >= 0 && seconds[i].latency.p99 <= limit; i -= 1) recovered = seconds[i].tMs / 1000;
  const during = summarize(run.records, { t0: run.t0, fromMs: start * 1000, toMs: end * 1000 });
  const afterGrace = graceS === null ? null : summarize(run.records, { t0: run.t0, fromMs: (start + graceS) * 1000, toMs: end * 1000 }).latency?.p99 ?? null;
  return {
    onsetS: start, endS: end, limitMs: limit,
    recoveredAfterS: recovered === null ? null : Math.max(0, recovered - start),
    p99DuringMs: during.latency?.p99 ?? null,
    ...(graceS === null ? {} : { graceS, p99AfterGraceMs: afterGrace, afterGraceRatio: afterGrace === null ? null : afterGrace / steadyP99Ms }),
  };
}

// A named stretch of a run between two events (e.g. a migration): its p99 (overall and per kind of operation) and
// failed ops; null where an event is missing (the arm without the manager has no migration).
export function phaseFigures(run, { name, from, to }) {
  const start = run.events.find((e) => e.label === from)?.t;
  const end = run.events.find((e) => e.label === to)?.t;
  if (start === undefined || end === undefined) return { name, seconds: null, p99Ms: null, maxMs: null, p99ByKind: null, failed: null };
  const s = summarize(run.records, { t0: run.t0, fromMs: start * 1000, toMs: end * 1000 });
  const p99ByKind = Object.fromEntries(Object.entries(s.byKind).map(([kind, k]) => [kind, k.latency?.p99 ?? null]));
  return { name, seconds: end - start, p99Ms: s.latency?.p99 ?? null, maxMs: s.latency?.max ?? null, p99ByKind, failed: s.failed };
}

// The `count` slowest operations that answered (ok or not), each with when it was due (s since t0), how long it took,
// its kind and entry point, how it ended, and the last event before it was due with how long after it: where a run's
// slowest operation came from (the "slowest operation at most 1.0 s").
export function slowestOps(run, { count = 3 } = {}) {
  const answered = run.records.filter((rec) => rec.endMs !== null && rec.endMs !== undefined)
    .map((rec) => ({ rec, ms: rec.endMs - rec.startMs }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, count);
  return placeOps(run, answered);
}

// The first `count` failed operations in the order they were due, described as slowestOps does (ms: null for one
// never answered): when each failure came, so that it can be put against the manager's log (with the run's wall
// clock at t0, where the run gives it).
export function failedOps(run, { count = 50 } = {}) {
  const failed = run.records.filter((rec) => !rec.ok)
    .sort((a, b) => a.startMs - b.startMs)
    .slice(0, count)
    .map((rec) => ({ rec, ms: rec.endMs === null || rec.endMs === undefined ? null : rec.endMs - rec.startMs }));
  return placeOps(run, failed);
}

function placeOps(run, ops) {
  const events = [...run.events].sort((a, b) => a.t - b.t);
  return ops.map(({ rec, ms }) => {
    const atS = (rec.startMs - run.t0) / 1000;
    const before = events.filter((e) => e.t <= atS).at(-1) ?? null;
    return {
      atS: round3(atS), ms: ms === null ? null : Math.round(ms), kind: rec.kind, entry: rec.entry, ok: rec.ok, errorKind: rec.errorKind ?? null,
      after: before ? { event: before.label, byS: round3(atS - before.t) } : null,
    };
  });
}
const round3 = (x) => Math.round(x * 1000) / 1000;

// Failed ops due between each event and the next (the last until the end): where a run's failures came from.
export function failedAfterEvents(run) {
  const events = [...run.events].sort((a, b) => a.t - b.t);
  return events.map((e, i) => {
    const to = i + 1 < events.length ? events[i + 1].t * 1000 : Infinity;
    const s = summarize(run.records, { t0: run.t0, fromMs: e.t * 1000, toMs: to });
    return { after: e.label, failed: s.failed };
  });
}

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return null;
  const mid = Math.floor(v.length / 2);
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
}

// Per scenario: the medians of each arm, the ratio manager / none, and each pair's failed ops.
export function compareArms(figures) {
  const byScenario = new Map();
  for (const f of figures.filter((x) => x.arm === 'none' || x.arm === 'manager')) {
    if (!byScenario.has(f.scenario)) byScenario.set(f.scenario, { none: [], manager: [] });
    byScenario.get(f.scenario)[f.arm].push(f);
  }
  return [...byScenario.entries()].map(([scenario, arms]) => {
    const failed = (arm) => arms[arm].map((f) => f.failed);
    const none = median(failed('none'));
    const manager = median(failed('manager'));
    return {
      scenario,
      runs: Math.min(arms.none.length, arms.manager.length),
      failedNone: failed('none'),
      failedManager: failed('manager'),
      medianFailedNone: none,
      medianFailedManager: manager,
      failedRatio: none ? manager / none : null,
      medianP99None: median(arms.none.map((f) => f.p99Ms)),
      medianP99Manager: median(arms.manager.map((f) => f.p99Ms)),
      managerWorseInAnyPair: arms.manager.some((f, i) => arms.none[i] && f.failed > arms.none[i].failed),
      ...(arms.none.concat(arms.manager).some((f) => f.recovery) ? {
        recoveredAfterNone: arms.none.map((f) => f.recovery?.recoveredAfterS ?? null),
        recoveredAfterManager: arms.manager.map((f) => f.recovery?.recoveredAfterS ?? null),
      } : {}),
      ...(arms.none.concat(arms.manager).some((f) => f.recovery?.graceS !== undefined) ? {
        afterGraceRatioNone: arms.none.map((f) => f.recovery?.afterGraceRatio ?? null),
        afterGraceRatioManager: arms.manager.map((f) => f.recovery?.afterGraceRatio ?? null),
      } : {}),
    };
  });
}

export function formatTable(rows) {
  const head = ['scenario', 'runs', 'failed ops: no manager', 'manager', 'ratio (median)', 'p99 ms: no manager', 'manager'];
  const lines = rows.map((row) => [
    row.scenario, String(row.runs), row.failedNone.join(', '), row.failedManager.join(', '),
    row.failedRatio === null ? 'n/a' : row.failedRatio.toFixed(2), fmt(row.medianP99None), fmt(row.medianP99Manager),
  ]);
  if (rows.some((row) => row.recoveredAfterManager)) {
    head.push('p99 back within 2x steady after (s): no manager', 'manager');
    const secs = (values) => (values ?? []).map((v) => (v === null ? 'never' : v.toFixed(1))).join(', ');
    rows.forEach((row, i) => lines[i].push(secs(row.recoveredAfterNone), secs(row.recoveredAfterManager)));
  }
  if (rows.some((row) => row.afterGraceRatioManager)) {
    head.push('p99 after the grace / steady: no manager', 'manager');
    const ratios = (values) => (values ?? []).map((v) => (v === null ? 'n/a' : `${v.toFixed(2)}x`)).join(', ');
    rows.forEach((row, i) => lines[i].push(ratios(row.afterGraceRatioNone), ratios(row.afterGraceRatioManager)));
  }
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const row = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [row(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

// The arms this evaluation knows, in the order its tables and figures list them: without the manager, the manager,
// the query gate alone (clients through gate/ in front of each entry), and both.
export const ARMS = Object.freeze(['none', 'manager', 'gate', 'manager+gate', 'manager+gate+hold']);
const ARM_LABELS = {
  none: 'no manager', manager: 'manager', gate: 'gate alone', 'manager+gate': 'manager and gate', 'manager+gate+hold': 'manager, gate and holds',
};

// Per scenario and arm, for every arm that ran: each pair's failed ops, their median, the failures by error kind
// (summed over the runs), the slowest operation and the median p99 (what the gate's arms are judged by).
export function compareAllArms(figures) {
  const rows = [];
  const scenarios = [...new Set(figures.map((f) => f.scenario))];
  for (const scenario of scenarios) {
    for (const arm of ARMS) {
      const runs = figures.filter((f) => f.scenario === scenario && f.arm === arm).sort((a, b) => a.pair - b.pair);
      if (runs.length === 0) continue;
      const byKind = {};
      for (const f of runs) for (const [kind, n] of Object.entries(f.failedByKind ?? {})) byKind[kind] = (byKind[kind] ?? 0) + n;
      rows.push({
        scenario, arm, runs: runs.length, failed: runs.map((f) => f.failed), medianFailed: median(runs.map((f) => f.failed)), failedByKind: byKind,
        slowestMs: Math.max(...runs.map((f) => f.maxMs ?? 0)), medianP99Ms: median(runs.map((f) => f.p99Ms)),
        counters: runs.map((f) => f.counters ?? null),
      });
    }
  }
  return rows;
}

export function formatArmsTable(rows) {
  const head = ['scenario', 'arm', 'runs', 'failed ops (each run)', 'median', 'failed by kind (all runs)', 'slowest op ms', 'p99 ms (median)', 'counted writes (each run)'];
  const lines = rows.map((row) => [
    row.scenario, ARM_LABELS[row.arm] ?? row.arm, String(row.runs), row.failed.join(', '), fmt(row.medianFailed),
    Object.entries(row.failedByKind).map(([k, n]) => `${k} ${n}`).join(', ') || '-', fmt(row.slowestMs), fmt(row.medianP99Ms),
    (row.counters ?? []).map(formatCounters).join('; ') || '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const row = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [row(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

// A run's counted writes (load-generator.js checkCounters): "ok" or what is wrong, and how many of the writes whose
// fate the client did not learn were applied.
export function formatCounters(c) {
  if (!c) return '-';
  if (c.error) return `not read (${c.error})`;
  const verdict = c.ok ? 'ok' : `${c.missing} acknowledged missing, ${c.beyond} beyond`;
  return `${verdict}, ${c.unknownApplied}/${c.unknown} unknown applied`;
}

const fmt = (x) => (x === null || x === undefined ? 'n/a' : x.toFixed(1));

// The Kubernetes lab's runs watch the rollout (lab/kube/rollout-watch.js, in notes.rollout): per scenario and arm, each
// run's handovers (per shard), seconds with a shard below two up-to-date replicas and without an up-to-date majority
// (and of those, the seconds with a replica of the short shard disconnected: a server away), failed ops per pod, the
// rollout's length, and pods Ready too early. One row per run. [] when no run has them.
export function rolloutRows(figures) {
  return figures.filter((f) => f.notes?.rollout).map((f) => {
    const r = f.notes.rollout;
    return {
      scenario: f.scenario, arm: f.arm, pair: f.pair, failed: f.failed, slowestMs: f.maxMs, handovers: r.handoversPerShard,
      secondsBelowTwo: r.secondsBelowTwoUpToDate, secondsNoMajority: r.secondsWithoutUpToDateMajority,
      secondsNoMajorityServerAway: r.secondsWithoutUpToDateMajorityBy?.serverAway ?? null, seconds: r.seconds,
      failedPerPod: r.failedPerPod, readyTooEarly: r.readyTooEarly,
    };
  });
}

export function formatRolloutTable(rows) {
  const head = ['scenario', 'arm', 'pair', 'failed', 'failed per pod', 'handovers per shard', 's below 2 up to date', 's without majority', 'of which a server away', 'length s', 'slowest op ms', 'Ready too early'];
  const lines = rows.map((r) => [
    r.scenario, ARM_LABELS[r.arm] ?? r.arm, String(r.pair + 1), String(r.failed), r.failedPerPod.map((p) => `${p.pod} ${p.failed}`).join(', ') || '-',
    r.handovers.join(', '), fmt(r.secondsBelowTwo), fmt(r.secondsNoMajority), fmt(r.secondsNoMajorityServerAway), fmt(r.seconds), fmt(r.slowestMs), r.readyTooEarly.join(', ') || '-',
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const row = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [row(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

// The panels of one scenario's figure: p99 latency and throughput per second, and failed ops per second, for a
// run of each arm; the events of the manager's run are marked.
export function figurePanels(runsByArm) {
  const colors = {
    none: '#c0392b', manager: '#2471a3', gate: '#27ae60', 'manager+gate': '#8e44ad', 'manager+gate+hold': '#d68910',
  };
  const label = ARM_LABELS;
  const series = (pick) => Object.entries(runsByArm).map(([arm, run]) => ({
    label: label[arm], color: colors[arm], points: bucketPoints(bucketize(run.records, { t0: run.t0 }), pick),
  }));
  const events = (runsByArm.manager ?? runsByArm['manager+gate'] ?? runsByArm.none ?? Object.values(runsByArm)[0]).events.map((e) => ({ t: e.t, label: e.label }));
  return [
    { title: 'p99 latency', yLabel: 'ms', yLog: true, series: series((b) => b.latency?.p99 ?? null), events },
    { title: 'throughput', yLabel: 'ops/s', series: series((b) => b.throughput), events },
    { title: 'failed operations', yLabel: 'per s', series: series((b) => b.failed), events },
  ];
}
