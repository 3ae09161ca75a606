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
    steadyP99Ms: steady.latency?.p99 ?? null,
    failedAfterEvent: failedAfterEvents(run),
    events: run.events,
    notes: run.notes,
  };
}

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
  for (const f of figures) {
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
    };
  });
}

export function formatTable(rows) {
  const head = ['scenario', 'runs', 'failed ops: no manager', 'manager', 'ratio (median)', 'p99 ms: no manager', 'manager'];
  const lines = rows.map((row) => [
    row.scenario, String(row.runs), row.failedNone.join(', '), row.failedManager.join(', '),
    row.failedRatio === null ? 'n/a' : row.failedRatio.toFixed(2), fmt(row.medianP99None), fmt(row.medianP99Manager),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const row = (cells) => `| ${cells.map((c, i) => c.padEnd(widths[i])).join(' | ')} |`;
  return [row(head), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...lines.map(row)].join('\n');
}

const fmt = (x) => (x === null || x === undefined ? 'n/a' : x.toFixed(1));

// The panels of one scenario's figure: p99 latency and throughput per second, and failed ops per second, for a
// run of each arm; the events of the manager's run are marked.
export function figurePanels(runsByArm) {
  const colors = { none: '#c0392b', manager: '#2471a3' };
  const label = { none: 'no manager', manager: 'manager' };
  const series = (pick) => Object.entries(runsByArm).map(([arm, run]) => ({
    label: label[arm], color: colors[arm], points: bucketPoints(bucketize(run.records, { t0: run.t0 }), pick),
  }));
  const events = (runsByArm.manager ?? runsByArm.none).events.map((e) => ({ t: e.t, label: e.label }));
  return [
    { title: 'p99 latency', yLabel: 'ms', yLog: true, series: series((b) => b.latency?.p99 ?? null), events },
    { title: 'throughput', yLabel: 'ops/s', series: series((b) => b.throughput), events },
    { title: 'failed operations', yLabel: 'per s', series: series((b) => b.failed), events },
  ];
}
