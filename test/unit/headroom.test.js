// Targets chosen by headroom (src/planner/headroom.js): each server's score (pure, a table per rule), the choice among
// the candidates the planner allows, the demotion plan that uses it, and the sandbox manager's demotion and its dry
// run with HEADROOM_TARGETS on.

import request from 'supertest';
import { findServer, findTable } from '../../src/cluster/cluster-model.js';
import { loadConfig } from '../../src/config.js';
import {
  headroomOf, headroomScores, headroomSignals, pickByHeadroom,
} from '../../src/planner/headroom.js';
import { planMovePrimariesFromServers } from '../../src/planner/primary-planner.js';
import { planMigrateReplicasOff } from '../../src/planner/replica-planner.js';
import { fixtureCluster } from '../helpers/clusters.js';
import { createSandboxHarness, postJson, waitForOperation } from '../helpers/harness.js';
import { createResponseChecker } from '../helpers/openapi-responses.js';
import { buildOpenApiDocument } from '../../src/routes/openapi.js';

const EQUAL = { cpu: 1, node: 1, latency: 1 };

describe('a server\'s headroom (pure)', () => {
  test.each([
    ['nothing measured', {}, EQUAL, { score: null, parts: {} }],
    ['its CPU alone, 30 % used', { own: 0.3 }, EQUAL, { score: 0.7, parts: { cpu: 0.7 } }],
    ['CPU 30 %, node 90 %', { own: 0.3, interference: 0.9 }, EQUAL, { score: 0.4, parts: { cpu: 0.7, node: 0.1 } }],
    ['over its limit (clamped to 0)', { own: 1.4, interference: 0.5 }, EQUAL, { score: 0.25, parts: { cpu: 0, node: 0.5 } }],
    ['its probes at their baseline', { latencyRatio: 1 }, EQUAL, { score: 1, parts: { latency: 1 } }],
    ['its probes at 2.5x (half way to the trigger at 4x)', { latencyRatio: 2.5 }, EQUAL, { score: 0.5, parts: { latency: 0.5 } }],
    ['its probes past the trigger', { latencyRatio: 9 }, EQUAL, { score: 0, parts: { latency: 0 } }],
    ['faster than its baseline (clamped to 1)', { latencyRatio: 0.5 }, EQUAL, { score: 1, parts: { latency: 1 } }],
    ['a trigger factor of 1 (no latency part: no division by zero)', { latencyRatio: 1, factorOne: true }, EQUAL, { score: null, parts: {} }],
    ['weights 1, 0, 3', { own: 0.2, interference: 0.9, latencyRatio: 2.5 }, { cpu: 1, node: 0, latency: 3 }, { score: 0.575, parts: { cpu: 0.8, node: 0.1, latency: 0.5 } }],
    ['the only part measured weighs 0', { interference: 0.2 }, { cpu: 1, node: 0, latency: 1 }, { score: null, parts: { node: 0.8 } }],
  ])('when %s, then its score and parts are as documented', (_, signals, weights, expected) => {
    const { factorOne, ...measured } = signals;
    expect(headroomOf(measured, weights, { factor: factorOne ? 1 : 4 })).toEqual(expected);
  });

  test('when the monitor\'s pods and the latency trigger\'s rows are joined to servers, then by hostname and by name, the worst probe counting; unmeasured servers are left out', () => {
    const servers = [
      { id: 'a', name: 'rethinkdb_0', hostname: 'rethinkdb-0' }, { id: 'b', name: 'rethinkdb_1', hostname: 'rethinkdb-1' }, { id: 'c', name: 'rethinkdb_2', hostname: null },
    ];
    const signals = headroomSignals({
      servers,
      pods: [{ pod: 'rethinkdb-0', own: 0.5, interference: 0.2 }, { pod: 'rethinkdb-9', own: 0.9, interference: 0.9 }],
      latency: [
        { server: 'rethinkdb_1', signal: 'reply', valueMs: 3, baselineMs: 2 }, { server: 'rethinkdb_1', signal: 'disk', valueMs: 60, baselineMs: 20 },
        { server: 'rethinkdb_0', signal: 'disk', valueMs: null, baselineMs: 20 }, { server: 'rethinkdb_2', signal: 'reply', valueMs: 5, baselineMs: null },
      ],
      minDeltaMs: 5,
    });
    expect(signals).toEqual(new Map([
      ['a', { own: 0.5, interference: 0.2, latencyRatio: null }],
      // reply 3 ms against 2: less than minDeltaMs above, counts as 1; disk 60 against 20: 3.
      ['b', { own: null, interference: null, latencyRatio: 3 }],
    ]));
    const small = headroomSignals({ servers, latency: [{ server: 'rethinkdb_1', signal: 'reply', valueMs: 1, baselineMs: 0.3 }], minDeltaMs: 5 });
    expect(small.get('b').latencyRatio).toBe(1);
  });
});

describe('the choice among the candidates (pure)', () => {
  const nameOf = (id) => id;
  const scores = (entries) => new Map(Object.entries(entries).map(([id, score]) => [id, { score, parts: {} }]));

  test.each([
    ['the roomiest, when it stands out', { x: 0.9, y: 0.5, z: 0.2 }, { x: 5, y: 0, z: 0 }, 'x'],
    ['of those within the tolerance, the one with the fewest primaries', { x: 0.9, y: 0.85, z: 0.2 }, { x: 5, y: 1, z: 0 }, 'y'],
    ['between equals by both, the lower name', { x: 0.9, y: 0.9 }, { x: 1, y: 1 }, 'x'],
    ['a busy server, never while a roomy one is a candidate', { x: 0.1, y: 0.6 }, { x: 0, y: 9 }, 'y'],
  ])('when choosing %s, then it is taken', (_, entries, counts, expected) => {
    const pick = pickByHeadroom(Object.keys(entries), new Map(Object.entries(counts)), scores(entries), { tolerance: 0.1, nameOf });
    expect(pick.id).toBe(expected);
    expect(pick.among).toEqual(Object.entries(entries).map(([server, score]) => ({ server, score })));
  });

  test('when a candidate is not measured, or there is none, then there is no choice by headroom (the planner goes by counts)', () => {
    expect(pickByHeadroom(['x', 'y'], new Map(), scores({ x: 0.9 }), { tolerance: 0.1, nameOf })).toBeNull();
    expect(pickByHeadroom(['x', 'y'], new Map(), new Map([['x', { score: 0.9, parts: {} }], ['y', { score: null, parts: {} }]]), { tolerance: 0.1, nameOf })).toBeNull();
    expect(pickByHeadroom([], new Map(), new Map(), { tolerance: 0.1, nameOf })).toBeNull();
  });
});

describe('planMovePrimariesFromServers with headroom', () => {
  const healthy = fixtureCluster('01-healthy.json');
  const id = (name) => findServer(healthy, name).id;
  const named = (plan) => plan.changes.flatMap((c) => c.moves.map((m) => `${findTable(healthy, c.tableId).name}[${m.shard}] ${healthy.servers.find((s) => s.id === m.from).name} -> ${healthy.servers.find((s) => s.id === m.to).name}`));
  const room = (byName) => ({ scores: new Map(Object.entries(byName).map(([n, score]) => [id(n), { score, parts: { node: score } }])), tolerance: 0.1 });

  test('when the server the counts would choose has the least headroom, then its shard goes to a roomier replica, and the move carries the scores', () => {
    const byCounts = planMovePrimariesFromServers(healthy, [id('rethinkdb_1')]);
    expect(named(byCounts).sort()).toEqual(['accounts[0] rethinkdb_1 -> rethinkdb_2', 'usertable[3] rethinkdb_1 -> rethinkdb_3']);
    const plan = planMovePrimariesFromServers(healthy, [id('rethinkdb_1')], {
      headroom: room({
        rethinkdb_0: 0.8, rethinkdb_1: 0.9, rethinkdb_2: 0.1, rethinkdb_3: 0.8,
      }),
    });
    const lines = named(plan).sort();
    expect(lines).not.toContain('accounts[0] rethinkdb_1 -> rethinkdb_2');
    expect(lines).toHaveLength(2);
    const move = plan.changes.flatMap((c) => c.moves).find((m) => m.to !== id('rethinkdb_3') || m.shard === 3);
    expect(move.headroom).toMatchObject({ score: 0.8, parts: { node: 0.8 } });
    expect(move.headroom.among.map((a) => a.server)).not.toContain('rethinkdb_1');
  });

  test('when every candidate is measured alike, then the plan is the count plan; with one unmeasured, the count plan too, without scores', () => {
    const byCounts = named(planMovePrimariesFromServers(healthy, [id('rethinkdb_1')])).sort();
    const alike = planMovePrimariesFromServers(healthy, [id('rethinkdb_1')], {
      headroom: room({
        rethinkdb_0: 0.5, rethinkdb_1: 0.5, rethinkdb_2: 0.5, rethinkdb_3: 0.5,
      }),
    });
    expect(named(alike).sort()).toEqual(byCounts);
    const partial = planMovePrimariesFromServers(healthy, [id('rethinkdb_1')], { headroom: room({ rethinkdb_0: 0.9 }) });
    expect(named(partial).sort()).toEqual(byCounts);
    expect(partial.changes.flatMap((c) => c.moves).every((m) => m.headroom === undefined)).toBe(true);
  });
});

describe('planMigrateReplicasOff with headroom', () => {
  const healthy = fixtureCluster('01-healthy.json');
  const id = (name) => findServer(healthy, name).id;
  const name = (serverId) => healthy.servers.find((s) => s.id === serverId).name;
  const room = (byName) => ({ scores: new Map(Object.entries(byName).map(([n, score]) => [id(n), { score, parts: { latency: score } }])), tolerance: 0.1 });

  test('when the server the counts would take replicas to has the least headroom, then none goes there while a roomier one can take them, and each move carries the scores', () => {
    const byCounts = planMigrateReplicasOff(healthy, id('rethinkdb_1'));
    const counted = new Set(byCounts.moves.map((m) => name(m.to)));
    const busy = [...counted][0];
    const scores = Object.fromEntries(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'].map((n) => [n, n === busy ? 0.05 : 0.9]));
    const plan = planMigrateReplicasOff(healthy, id('rethinkdb_1'), { headroom: room(scores) });
    expect(plan.moves).toHaveLength(byCounts.moves.length);
    for (const move of plan.moves) {
      const roomier = move.headroom.among.filter((a) => a.server !== busy);
      if (roomier.length > 0) expect(name(move.to)).not.toBe(busy);
      expect(move.headroom.score).toBe(name(move.to) === busy ? 0.05 : 0.9);
    }
    expect(planMigrateReplicasOff(healthy, id('rethinkdb_1'), { headroom: room({ rethinkdb_0: 0.9 }) }).moves.map((m) => m.to)).toEqual(byCounts.moves.map((m) => m.to));
  });
});

describe('HEADROOM_* configuration', () => {
  test.each([
    ['cpu=1,node=1,latency=2', { cpu: 1, node: 1, latency: 2 }],
    ['latency=1', { cpu: 0, node: 0, latency: 1 }],
    [' cpu = 0.5 , node=0 ', { cpu: 0.5, node: 0, latency: 0 }],
  ])('when HEADROOM_WEIGHTS=%j, then the weights are %j', (raw, expected) => {
    expect(loadConfig({ HEADROOM_WEIGHTS: raw }).headroom.weights).toEqual(expected);
  });

  test.each([['memory=1'], ['cpu=-1'], ['cpu=x'], ['cpu=0,node=0'], ['cpu'], ['cpu=1=2']])('when HEADROOM_WEIGHTS=%j, then start-up fails saying what is accepted', (raw) => {
    expect(() => loadConfig({ HEADROOM_WEIGHTS: raw })).toThrow('HEADROOM_WEIGHTS=');
  });

  test('when nothing is set, then targets go by counts, and the weights and tolerance are the documented ones', () => {
    expect(loadConfig({}).headroom).toEqual({ enabled: false, weights: { cpu: 1, node: 1, latency: 1 }, tolerance: 0.1 });
  });
});

describe('the sandbox manager with HEADROOM_TARGETS', () => {
  // rethinkdb-2's node busy (the monitor's last poll), then rethinkdb-1 demoted: dry run and real run alike.
  async function demote({ headroom }) {
    const h = createSandboxHarness({ env: { HEADROOM_TARGETS: String(headroom) } });
    h.kube.setInterference('node-2', 1.3); // its node 80 % busy: hot, not yet raised (one poll, under the immediate 95 %)
    await h.monitor.pollOnce();
    const dry = await postJson(h.app, '/v1/actions/move-primaries-from-server?dryRun=true', { server: 'rethinkdb_1' });
    const real = await postJson(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    return { h, dry: dry.body, real: real.body };
  }
  const targets = (report) => report.changes.map((c) => c.to);

  test('when a candidate\'s node is busy, then no primary goes to it, each change says its headroom, and the dry run planned the same', async () => {
    const { h, dry, real } = await demote({ headroom: true });
    expect(real.outcome).toBe('completed');
    expect(targets(real)).not.toContain('rethinkdb_2');
    expect(real.changes.every((c) => c.headroom && c.headroom.among.some((a) => a.server === 'rethinkdb_2' && a.score < c.headroom.score))).toBe(true);
    expect(dry.changes.map((c) => [c.table, c.shard, c.to, c.headroom])).toEqual(real.changes.map((c) => [c.table, c.shard, c.to, c.headroom]));
    const [audited] = (await request(h.app).get('/v1/events')).body.events.filter((e) => e.action === 'move-primaries-from-server');
    expect(audited.plan.changes.map((c) => c.headroom)).toEqual(real.changes.map((c) => c.headroom.score));
  });

  test('when a migration\'s replicas are placed by headroom, then its dry run and its operation\'s steps say the scores, as /openapi.json documents them', async () => {
    const h = createSandboxHarness({ env: { HEADROOM_TARGETS: 'true' } });
    h.kube.setInterference('node-2', 1.3);
    await h.monitor.pollOnce();
    const dry = await postJson(h.app, '/v1/actions/migrate-replicas-off?dryRun=true', { server: 'rethinkdb_1' });
    expect(dry.body.changes.length).toBeGreaterThan(0);
    // rethinkdb_2 (its node busy) takes a replica only where it is the one server without one (the only candidate).
    expect(dry.body.changes.every((c) => c.headroom && (c.to !== 'rethinkdb_2' || c.headroom.among.length === 1))).toBe(true);
    const started = await postJson(h.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_1' });
    expect(started.status).toBe(202);
    const op = await request(h.app).get(started.body.operation.href);
    expect(op.body.steps.map((st) => [st.to, st.headroom])).toEqual(dry.body.changes.map((c) => [c.to, c.headroom.score]));
    const checker = createResponseChecker(buildOpenApiDocument());
    expect(checker.checkResponse('GET', started.body.operation.href, op)).toEqual([]);
    expect(checker.checkResponse('POST', '/v1/actions/migrate-replicas-off', dry)).toEqual([]);
    await waitForOperation(h.app, started.body.operation.href);
  });

  test('when HEADROOM_TARGETS is off, then the same demotion goes by counts, to the busy node, and says no headroom', async () => {
    const { h, real } = await demote({ headroom: false });
    expect(real.outcome).toBe('completed');
    expect(targets(real)).toContain('rethinkdb_2');
    expect(real.changes.every((c) => c.headroom === undefined)).toBe(true);
    expect((await request(h.app).get('/v1/monitor')).body.pods.find((p) => p.pod === 'rethinkdb-2')).toMatchObject({ interference: 0.8, raised: false });
  });
});
