// The evaluation's report: how long a disturbance kept p99 above twice the steady p99, on hand-made runs.

import {
  compareAllArms, compareArms, formatArmsTable, formatRolloutTable, formatTable, phaseFigures, recoveryOf, rolloutRows, runFigures,
} from '../../bench/evaluate/report.js';

const T0 = 5_000;
// One op every 10 ms from 0 to 30 s; latency by second.
function run(latencyAt, events) {
  const records = [];
  for (let ms = 0; ms < 30000; ms += 10) {
    records.push({ startMs: T0 + ms, endMs: T0 + ms + latencyAt(Math.floor(ms / 1000)), ok: true, kind: 'read', entry: 'a', errorKind: null });
  }
  return { scenario: 'hotspot', arm: 'manager', t0: T0, records, events, notes: {}, window: { from: 'on', to: 'off' } };
}
const events = [{ t: 10.2, label: 'on' }, { t: 25.0, label: 'off' }];

describe('recoveryOf', () => {
  test.each([
    ['p99 back 4 s after the onset', 3.8, (s) => (s >= 10 && s < 14 ? 90 : 5)],
    ['p99 never back while the disturbance lasts', null, (s) => (s >= 10 && s < 26 ? 90 : 5)],
    ['no effect at all', 0, () => 5],
    ['a relapse after a recovery counts from the relapse', 10.8, (s) => ((s >= 10 && s < 12) || s === 20 ? 90 : 5)],
  ])('when %s, then recovered after %p s', (_, expected, latencyAt) => {
    const r = recoveryOf(run(latencyAt, events), { from: 'on', to: 'off', steadyP99Ms: 5 });
    if (expected === null) expect(r.recoveredAfterS).toBeNull();
    else expect(r.recoveredAfterS).toBeCloseTo(expected, 5);
    expect(r.limitMs).toBe(10);
  });

  test('when a grace is given, then the p99 from onset + grace to the window\'s end and its ratio to steady are reported', () => {
    // 90 ms until 14 s, then 8 ms, with one slow second (30 ms) that breaks "stayed back" but not the window's p99.
    const latencyAt = (s) => (s >= 10 && s < 14 ? 90 : s === 20 ? 30 : s >= 14 && s < 26 ? 8 : 5);
    const r = recoveryOf(run(latencyAt, events), {
      from: 'on', to: 'off', steadyP99Ms: 5, graceS: 6,
    });
    expect(r.recoveredAfterS).toBeCloseTo(10.8, 5);
    expect(r).toMatchObject({ graceS: 6, p99AfterGraceMs: 30, afterGraceRatio: 6 });
    const relaxed = recoveryOf(run((s) => (s >= 10 && s < 14 ? 90 : s >= 14 && s < 26 ? 8 : 5), events), {
      from: 'on', to: 'off', steadyP99Ms: 5, graceS: 6,
    });
    expect(relaxed).toMatchObject({ p99AfterGraceMs: 8, afterGraceRatio: 1.6 });
    // Slow until 17 s: inside a 6 s grace from 10.2 s the window starts at 16.2 s and sees it.
    const late = recoveryOf(run((s) => (s >= 10 && s < 17 ? 90 : 5), events), {
      from: 'on', to: 'off', steadyP99Ms: 5, graceS: 6,
    });
    expect(late.p99AfterGraceMs).toBe(90);
  });

  test('when the window\'s events are missing, then there is no recovery figure', () => {
    expect(recoveryOf(run(() => 5, [{ t: 3, label: 'on' }]), { from: 'on', to: 'off', steadyP99Ms: 5 })).toBeNull();
  });

  test('when runs have a window, then the table has the recovery columns', () => {
    const slow = { ...run((s) => (s >= 10 && s < 26 ? 90 : 5), events), arm: 'none' };
    const fast = run((s) => (s >= 10 && s < 14 ? 90 : 5), events);
    const rows = compareArms([runFigures(slow), runFigures(fast)]);
    expect(rows[0]).toMatchObject({ recoveredAfterNone: [null], recoveredAfterManager: [expect.closeTo(3.8, 5)] });
    expect(formatTable(rows)).toMatch(/p99 back within 2x steady after \(s\): no manager \| manager +\|\n.*\| never +\| 3\.8 +\|/s);
    expect(formatTable(rows)).not.toMatch(/after the grace/);
    const graced = [slow, fast].map((x) => runFigures({ ...x, window: { ...x.window, graceS: 6 } }));
    expect(formatTable(compareArms(graced))).toMatch(/p99 after the grace \/ steady: no manager \| manager +\|\n.*\| 18\.00x +\| 1\.00x +\|/s);
  });
});

describe('phaseFigures', () => {
  test('when a run has both events of a phase, then its length, p99, slowest op and failed ops are those of the ops due between them', () => {
    const r = run((s) => (s >= 12 && s < 16 ? 40 : 5), [{ t: 12, label: 'start' }, { t: 16, label: 'done' }]);
    r.records = r.records.map((rec) => (rec.startMs - T0 === 13000 ? { ...rec, ok: false, errorKind: 'timeout' } : rec));
    r.records = r.records.map((rec) => (rec.startMs - T0 >= 12000 && rec.startMs - T0 < 16000 && rec.startMs % 20 === 0 ? { ...rec, kind: 'update', endMs: rec.startMs + 90 } : rec));
    expect(phaseFigures(r, { name: 'migration', from: 'start', to: 'done' }))
      .toEqual({ name: 'migration', seconds: 4, p99Ms: 90, maxMs: 90, p99ByKind: { read: 40, update: 90 }, failed: 1 });
  });

  test('when the end event is missing (the arm without the manager), then the phase has no figures', () => {
    expect(phaseFigures(run(() => 5, [{ t: 12, label: 'start' }]), { name: 'migration', from: 'start', to: 'done' }))
      .toEqual({ name: 'migration', seconds: null, p99Ms: null, maxMs: null, p99ByKind: null, failed: null });
  });
});

describe('compareAllArms', () => {
  const figure = (arm, pair, failed, byKind, maxMs) => ({
    scenario: 'planned-stop', arm, pair, failed, failedByKind: byKind, maxMs, p99Ms: 10 + failed,
  });
  test('when the gate\'s arms ran beside the others, then each arm has its row: runs, failed per run, kinds, slowest op; the two-arm table ignores them', () => {
    const figures = [
      figure('none', 0, 120, { op_failed: 120 }, 900), figure('gate', 0, 0, {}, 700), figure('manager+gate', 0, 1, { op_indeterminate: 1 }, 650),
      figure('none', 1, 100, { op_failed: 99, other: 1 }, 800), figure('gate', 1, 2, { op_failed: 2 }, 3100), figure('manager+gate', 1, 0, {}, 600),
    ];
    const rows = compareAllArms(figures);
    expect(rows.map((r) => [r.arm, r.failed, r.medianFailed, r.failedByKind, r.slowestMs])).toEqual([
      ['none', [120, 100], 110, { op_failed: 219, other: 1 }, 900],
      ['gate', [0, 2], 1, { op_failed: 2 }, 3100],
      ['manager+gate', [1, 0], 0.5, { op_indeterminate: 1 }, 650],
    ]);
    expect(formatArmsTable(rows)).toMatch(/\| planned-stop \| manager and gate \| 2 +\| 1, 0 /);
    expect(compareArms(figures)).toEqual([expect.objectContaining({ scenario: 'planned-stop', failedNone: [120, 100], failedManager: [] })]);
  });
});

describe('the lab\'s rollout table', () => {
  const watched = {
    handoversPerShard: [2, 1, 2], secondsBelowTwoUpToDate: 1.25, secondsWithoutUpToDateMajority: 0.5,
    secondsWithoutUpToDateMajorityBy: { serverAway: 0, allConnected: 0.5 }, seconds: 50.2,
    failedPerPod: [{ pod: 'rethinkdb-2', failed: 3 }, { pod: 'rethinkdb-1', failed: 0 }], readyTooEarly: ['rethinkdb-0'],
  };
  test('when runs carry what the rollout watch saw, then one row per run shows it; runs without it give no row', () => {
    const rows = rolloutRows([
      { scenario: 'rolling-restart', arm: 'manager+gate', pair: 1, failed: 3, maxMs: 912.4, notes: { rollout: watched } },
      { scenario: 'planned-stop', arm: 'none', pair: 0, failed: 9, maxMs: 1, notes: {} },
      { scenario: 'rolling-restart', arm: 'none', pair: 0, failed: 9, maxMs: 1, notes: { rollout: { ...watched, secondsWithoutUpToDateMajorityBy: undefined } } },
    ]);
    expect(rows).toHaveLength(2);
    const table = formatRolloutTable(rows);
    expect(table).toMatch(/\| rolling-restart \| manager and gate \| 2 +\| 3 +\| rethinkdb-2 3, rethinkdb-1 0 \| 2, 1, 2 +\| 1\.3 +\| 0\.5 +\| 0\.0 +\| 50\.2 +\| 912\.4 +\| rethinkdb-0 +\|/);
    // A record from before the split shows n/a, not 0.
    expect(table).toMatch(/\| rolling-restart \| no manager +\| 1 +\| 9 +\| .* \| 1\.3 +\| 0\.5 +\| n\/a +\|/);
  });
});


describe('slowestOps', () => {
  test('when a run has a few slow operations, then the slowest come first, each placed after the last event before it was due', () => {
    const r = run((s) => 5, events);
    r.records[1100].endMs = r.records[1100].startMs + 900; // due at 11.0 s, 0.8 s after 'on'
    r.records[2600].endMs = r.records[2600].startMs + 1200; // due at 26.0 s, after 'off'
    Object.assign(r.records[50], { endMs: r.records[50].startMs + 300, ok: false, errorKind: 'lost-contact' }); // 0.5 s, before any event
    r.records[51].endMs = null; // never answered: not counted
    expect(runFigures(r).slowest).toEqual([
      { atS: 26, ms: 1200, kind: 'read', entry: 'a', ok: true, errorKind: null, after: { event: 'off', byS: 1 } },
      { atS: 11, ms: 900, kind: 'read', entry: 'a', ok: true, errorKind: null, after: { event: 'on', byS: 0.8 } },
      { atS: 0.5, ms: 300, kind: 'read', entry: 'a', ok: false, errorKind: 'lost-contact', after: null },
    ]);
  });
});

describe('failedOps', () => {
  test('when a run has failures, then each is listed in the order it was due, placed after the last event; one never answered has no ms', () => {
    const r = run(() => 5, events);
    Object.assign(r.records[2000], { ok: false, errorKind: 'lost-contact' }); // due at 20.0 s, 9.8 s after 'on'
    Object.assign(r.records[50], { endMs: null, ok: false, errorKind: 'timeout' }); // due at 0.5 s, never answered
    expect(runFigures(r).failures).toEqual([
      { atS: 0.5, ms: null, kind: 'read', entry: 'a', ok: false, errorKind: 'timeout', after: null },
      { atS: 20, ms: 5, kind: 'read', entry: 'a', ok: false, errorKind: 'lost-contact', after: { event: 'on', byS: 9.8 } },
    ]);
  });

  test('when a run fails more than the count, then the first count are listed', () => {
    const r = run(() => 5, events);
    for (const rec of r.records) rec.ok = false;
    expect(runFigures(r).failures).toHaveLength(50);
    expect(runFigures(r).failures[0].atS).toBe(0);
  });
});
