// The sandbox checked against the real thing: one scripted sequence of events, played through the manager's routes
// on the sandbox model and on four real RethinkDB 2.4 servers that start from the sandbox's layout (the paper's
// testbed: ycsb.usertable, 4 shards x 3 replicas, primaries one per server): a planned stop and return, a perf
// warning, then a crash, a replacement pod and an expansion. At every step both must decide the same and move the
// same primaries and replicas, and both must end in the same table configuration.

import { jest } from '@jest/globals';
import request from 'supertest';
import { paperTopology } from '../../src/sandbox/sandbox-cluster.js';
import { createSandboxHarness, postJson, waitForOperation } from '../helpers/harness.js';
import {
  createRealManager, eventually, readTables, settled, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

const TABLE = { db: 'ycsb', table: 'usertable', shards: 4, replicas: 3, docs: 2000 };

// What a step's answer moved: "table[shard] kind from -> to" for every entry of every `changes` list in it. Not a
// move of a table's Raft leadership: which server leads is RethinkDB's own election (random on the real side, by name
// on the sandbox), so whether the warned server led, and who leads next, may differ between the sides.
function movesOf(body) {
  const moves = [];
  const walk = (value) => {
    if (Array.isArray(value)) { value.forEach(walk); return; }
    if (!value || typeof value !== 'object') return;
    for (const [key, v] of Object.entries(value)) {
      if (key === 'changes' && Array.isArray(v)) {
        for (const c of v) if (c.kind !== 'raft-leader') moves.push(`${c.table}[${c.shard}] ${c.kind} ${c.from} -> ${c.to}`);
      } else walk(v);
    }
  };
  walk(body);
  return moves.sort();
}

// The decision a step's answer names, where it names one.
const decisionOf = (body) => body?.report?.decision?.kind ?? body?.decision?.kind ?? body?.decision?.action ?? body?.restore?.action ?? null;

// The scripted events, against either side: { app, stop(i), restart(i), crash(i), newServer(i), settle() }.
const STEPS = [
  ['PRESTOP rethinkdb-1', (side) => request(side.app).post('/v1/hooks/prestop?pod=rethinkdb-1')],
  ['rethinkdb_1 stops (SIGTERM)', async (side) => { await side.stop(1); return { body: null }; }],
  ['rethinkdb_1 returns and calls POSTSTART', async (side) => {
    await side.restart(1);
    const res = await request(side.app).post('/v1/hooks/poststart?pod=rethinkdb-1');
    return { body: await waitForOperation(side.app, res.body.operation.href, { tries: 60000 }) };
  }],
  ['PERFWARNING for rethinkdb-2 (60 s)', (side) => request(side.app).post('/v1/hooks/perfwarning').set('content-type', 'application/json')
    .send(JSON.stringify({ pod: 'rethinkdb-2', durationSeconds: 60 }))],
  ['the warning on rethinkdb-2 ends', (side) => request(side.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2')],
  // Its primaries moved first, so that which replica RethinkDB elects after the crash (random on the real side, by
  // name on the sandbox) cannot make the two sides differ: the comparison is of the manager's decisions.
  ['the operator drains rethinkdb_3', (side) => postJson(side.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_3' })],
  ['rethinkdb_3 crashes (SIGKILL) and stays down', async (side) => { await side.crash(3); return { body: null }; }],
  ['a new pod rethinkdb-4 calls POSTSTART (a replacement)', async (side) => {
    await side.newServer(4);
    const res = await request(side.app).post('/v1/hooks/poststart?pod=rethinkdb-4');
    return { body: await waitForOperation(side.app, res.body.operation.href, { tries: 60000 }) };
  }],
  ['a new pod rethinkdb-5 calls POSTSTART (an expansion)', async (side) => {
    await side.newServer(5);
    const res = await request(side.app).post('/v1/hooks/poststart?pod=rethinkdb-5');
    return { body: await waitForOperation(side.app, res.body.operation.href, { tries: 60000 }) };
  }],
];

async function play(side) {
  const steps = [];
  for (const [name, step] of STEPS) {
    const { body } = await step(side);
    await side.settle(name);
    steps.push({ step: name, decision: decisionOf(body), moves: movesOf(body) });
  }
  return steps;
}

async function writableEverywhere(real) {
  const t = await readTables(real);
  return Object.values(t.status).every((st) => st.status.ready_for_writes) && t;
}

// table_config of ycsb.usertable by server names, as the sandbox and the real server both report it.
const layoutOf = (config) => config.shards.map((s) => ({ primary: s.primary_replica, replicas: [...s.replicas].sort() }));

let cluster;
let manager;
afterAll(async () => {
  await manager?.close();
  await cluster?.destroy();
});

test('when the same events are played on the sandbox and on real servers from the same layout, then every step moves the same and both end in the same configuration', async () => {
  const sandbox = createSandboxHarness();
  // The steps call POSTSTART themselves, as on the real side; the sandbox's pods would otherwise call it on start.
  sandbox.kube.setHookCaller({ postStart: async () => null, preStop: async () => null });
  const sandboxSteps = await play({
    app: sandbox.app,
    stop: async (i) => sandbox.model.crashServer(`rethinkdb_${i}`, { mode: 'term' }),
    restart: async (i) => sandbox.model.restoreServer(`rethinkdb_${i}`),
    crash: async (i) => { sandbox.model.crashServer(`rethinkdb_${i}`, { mode: 'kill' }); sandbox.clock.advance(60000); },
    newServer: async (i) => {
      const pod = sandbox.kube.startReplacementPod();
      if (pod.name !== `rethinkdb-${i}`) throw new Error(`the sandbox started ${pod.name}, not rethinkdb-${i}`);
    },
    settle: async () => {},
  });
  const sandboxConfig = sandbox.model.readSystemTables().tableConfigByName[0];

  cluster = await startRealCluster({ tables: [TABLE] });
  const { default: r } = await import('rethinkdb');
  const shards = paperTopology().tables[0].shards.map((s) => ({ primary_replica: s.primary, replicas: s.replicas, nonvoting_replicas: [] }));
  await cluster.withConnection(async (c) => {
    await r.db('ycsb').table('usertable').config().update({ shards }).run(c);
    await r.db('ycsb').table('usertable').wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
  });
  await eventually(() => settled(cluster), { what: 'the sandbox layout on the real servers' });
  manager = createRealManager(cluster, { via: 0, env: { POSTSTART_JOIN_TIMEOUT_SECONDS: '60' } });
  await waitConnected(manager);
  const realSteps = await play({
    app: manager.app,
    stop: (i) => cluster.stopServer(i, 'SIGTERM'),
    restart: (i) => cluster.restartServer(i),
    crash: (i) => cluster.stopServer(i, 'SIGKILL'),
    newServer: async (i) => {
      const index = await cluster.addServer();
      if (index !== i) throw new Error(`the lab started server ${index}, not ${i}`);
    },
    // Settled: every primary acting and every replica ready; with a server down for good, every table writable.
    settle: (step) => eventually(async () => (!cluster.running(1) || !cluster.running(3) ? writableEverywhere(cluster) : settled(cluster)), {
      timeoutMs: 60000, what: `the real cluster to settle after ${step}`,
    }),
  });
  const realConfig = (await readTables(cluster)).config['ycsb.usertable'];

  expect(realSteps).toEqual(sandboxSteps);
  // The steps did something: the comparison is not of two empty lists.
  expect(sandboxSteps.filter((s) => s.moves.length > 0).length).toBeGreaterThanOrEqual(6);
  expect(sandboxSteps.map((s) => s.decision)).toEqual(expect.arrayContaining(['replacement', 'expansion']));
  expect(layoutOf(realConfig)).toEqual(layoutOf(sandboxConfig));
});
