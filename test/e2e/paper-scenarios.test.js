// The paper's five scenarios (IV-B1 to IV-B5), end to end: real HTTP routes, the policy, the actions, the
// monitor and the sandbox, in virtual time. Each step's resulting configuration is asserted.

import { runScenario } from '../../src/sandbox/scenarios.js';

const step = (result, event) => {
  const found = result.steps.find((s) => s.event.startsWith(event));
  if (!found) throw new Error(`no step "${event}" in ${result.steps.map((s) => s.event).join(' | ')}`);
  return found;
};
const INITIAL = ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'];

describe('paper scenarios on the sandbox', () => {
  test('IV-B1: when a node crashes unannounced, then RethinkDB elects after the timeout, and the replacement pod takes over the lost replicas and a fair share of primaries', async () => {
    const r = await runScenario('IV-B1');
    expect(step(r, 'start').primaries).toEqual(INITIAL);
    const crashed = step(r, 'node-1 crashes');
    expect(crashed.acting[1]).toBeNull();
    expect(crashed.readyForWrites).toBe(false);
    const elected = step(r, 'RethinkDB elected');
    expect(elected.acting[1]).not.toBeNull();
    expect(elected.primaries).toEqual(INITIAL); // the manager did nothing: it was not told
    const replaced = step(r, 'replacement pod');
    expect(replaced.decision).toBe('replacement');
    expect(replaced.reason).toMatch(/still list rethinkdb_1, which is not connected: rethinkdb_4 replaces it/);
    expect(replaced.replicas.flat()).not.toContain('rethinkdb_1');
    expect(replaced.replicas.filter((set) => set.includes('rethinkdb_4'))).toHaveLength(3);
    expect(replaced.primaries.filter((p) => p === 'rethinkdb_4')).toHaveLength(1);
    expect(new Set(replaced.primaries).size).toBe(4);
    expect(replaced.acting).toEqual(replaced.primaries);
    expect(replaced.readyForWrites).toBe(true);
  });

  test('IV-B2: when PRESTOP announces the stop, then primaries leave first, the stop causes no unavailability, and they return with the server', async () => {
    const r = await runScenario('IV-B2');
    const pre = step(r, 'PRESTOP');
    expect(pre.status).toBe(200);
    expect(pre.decision).toBe('move-primaries-from-server');
    expect(pre.primaries).not.toContain('rethinkdb_1');
    expect(pre.acting).toEqual(pre.primaries);
    const stopped = step(r, 'rethinkdb-1 stops');
    expect(stopped.readyForWrites).toBe(true);
    expect(stopped.acting.every(Boolean)).toBe(true);
    const back = step(r, 'rethinkdb-1 back');
    expect(back.decision).toBe('returning');
    expect(back.reason).toMatch(/was draining before; it is released/);
    expect(back.primaries).toEqual(INITIAL);
  });

  test('IV-B3: when node interference starves a pod, then the monitor raises on its first poll (the node is 100% busy), demotes, and restores after the cooldown', async () => {
    const r = await runScenario('IV-B3');
    const start = step(r, 'interference starts');
    const raised = step(r, 'monitor: raise rethinkdb-1');
    expect(raised.t - start.t).toBeGreaterThan(0);
    expect(raised.t - start.t).toBeLessThan(15); // the first poll after the onset (15 s polls)
    expect(raised.reason).toMatch(/node node-1 is 100% busy \(interference from its neighbours\).*; raised after 1 of 2 polls \(node 100% busy, at or above 95%\)$/);
    expect(raised.primaries).not.toContain('rethinkdb_1');
    const ended = step(r, 'interference ends');
    expect(ended.primaries).not.toContain('rethinkdb_1');
    const cleared = step(r, 'monitor: clear rethinkdb-1');
    expect(cleared.t - ended.t).toBeGreaterThanOrEqual(60);
    expect(cleared.decision).toBe('rebalance-primaries');
    expect(cleared.primaries).toEqual(INITIAL);
  });

  test('IV-B4: when PERFWARNING announces a brief hot-spot, then primaries leave before it and return when the warning expires', async () => {
    const r = await runScenario('IV-B4');
    const warned = step(r, 'PERFWARNING');
    expect(warned.decision).toBe('move-primaries-from-server + move-raft-leadership');
    expect(warned.primaries).not.toContain('rethinkdb_1');
    expect(step(r, 'interference starts').primaries).not.toContain('rethinkdb_1');
    expect(r.steps.some((s) => s.event.startsWith('monitor: raise'))).toBe(false); // already warned
    const expired = step(r, 'perf warning expired');
    expect(expired.t).toBeGreaterThanOrEqual(200);
    expect(expired.primaries).toEqual(INITIAL);
  });

  test('IV-B5: when a long hot-spot is announced, then replicas migrate off one at a time, and a second crash leaves every shard writable', async () => {
    const r = await runScenario('IV-B5');
    const warned = step(r, 'PERFWARNING');
    expect(warned.decision).toBe('move-primaries-from-server + move-raft-leadership + migrate-replicas-off');
    const migrated = step(r, 'replicas migrated off');
    expect(migrated.reason).toMatch(/^3 replicas moved one at a time: succeeded/);
    expect(migrated.replicas.flat()).not.toContain('rethinkdb_1');
    expect(migrated.replicas.every((set) => set.length === 3)).toBe(true);
    // One row per replica, at distinct, increasing times, each moving exactly one shard's replica off rethinkdb_1.
    const rows = r.steps.filter((s) => /^replica \d\/3:/.test(s.event));
    expect(rows).toHaveLength(3);
    const times = [warned.t, ...rows.map((s) => s.t)];
    expect(times.every((t, i) => i === 0 || t > times[i - 1])).toBe(true);
    const onServer1 = (x) => x.replicas.filter((set) => set.includes('rethinkdb_1')).length;
    expect([warned, ...rows].map(onServer1)).toEqual([3, 2, 1, 0]);
    const interference = step(r, 'interference starts on node-1');
    expect(interference.t).toBeGreaterThan(rows.at(-1).t);
    expect(r.steps.indexOf(interference)).toBeLessThan(r.steps.indexOf(step(r, 'node-3 crashes')));
    const after = step(r, 'after the election');
    expect(after.readyForWrites).toBe(true);
    expect(after.acting.every((a) => a && a !== 'rethinkdb_3' && a !== 'rethinkdb_1')).toBe(true);
  });

  test('ROLLOUT: when the StatefulSet restarts every pod, then no POSTSTART hands back, each pod waits for its gate, primaries go to restarted pods, and one levelling ends it', async () => {
    const r = await runScenario('ROLLOUT');
    const stops = r.steps.filter((s) => / stopped \(PRESTOP/.test(s.event));
    expect(stops.map((s) => s.event.split(' ')[0])).toEqual(['rethinkdb-3', 'rethinkdb-2', 'rethinkdb-1', 'rethinkdb-0']);
    for (const s of stops) {
      expect(s.reason).toMatch(/a rollout is under way/);
      expect(s.readyForWrites).toBe(true);
    }
    const backs = r.steps.filter((s) => /made again on the new revision; POSTSTART/.test(s.event));
    expect(backs).toHaveLength(4);
    for (const b of backs) expect(b.reason).toMatch(/came back during a rollout.*given back in one levelling when the rollout ends/);
    // rethinkdb-2's PRESTOP sends its primary to rethinkdb_3, which the rollout has already restarted.
    expect(step(r, 'rethinkdb-2 stopped').primaries[2]).toBe('rethinkdb_3');
    // Each pod is Ready only after its POSTSTART, through its gate.
    for (const pod of ['rethinkdb-3', 'rethinkdb-2', 'rethinkdb-1', 'rethinkdb-0']) {
      expect(r.steps.indexOf(step(r, `${pod} Ready`))).toBeGreaterThan(r.steps.indexOf(step(r, `${pod} made again`)));
    }
    const after = step(r, 'after the rollout');
    expect(after.decision).toBe('rebalance-primaries');
    expect(after.reason).toMatch(/one levelling of the primaries gives rethinkdb_0, rethinkdb_1, rethinkdb_2, rethinkdb_3 back what the rollout took: completed/);
    expect(new Set(after.primaries).size).toBe(4);
    expect(after.acting).toEqual(after.primaries);
    expect(Math.max(...r.summary.handovers)).toBeLessThanOrEqual(2);
    expect(r.summary.handovers.reduce((a, b) => a + b, 0)).toBeLessThan(8);
  });

  test('ROLLOUT with the rule off (POSTSTART_DURING_ROLLOUT=now, no gate): every POSTSTART hands back, and more handovers in all', async () => {
    const r = await runScenario('ROLLOUT', { env: { POSTSTART_DURING_ROLLOUT: 'now' }, world: { kubeOptions: { readinessGate: false } } });
    const backs = r.steps.filter((s) => /made again on the new revision; POSTSTART/.test(s.event));
    for (const b of backs) expect(b.reason).not.toMatch(/during a rollout/);
    expect(step(r, 'after the rollout').reason).toBe('no levelling was owed');
    expect(r.summary.handovers.reduce((a, b) => a + b, 0)).toBe(8);
  });
});
