// A server that vanishes silently (its network cut: packets dropped, no FIN, no RST), or is cut off from the other
// servers but not from the manager (a partition), on four real RethinkDB 2.4.4 servers in network namespaces, the heartbeat timeout at 2 s, clients writing through the query gate and a
// `rethinkdb proxy`: the manager's probes find the server silent before RethinkDB's heartbeat drops it, the gate
// holds new writes for the tables it was primary for, and the hold ends once another server acts for them. So the
// only writes that fail are those already sent to the lost primary before the hold: every failed write started
// before it, and every write started after it succeeds. Outcomes are read from the manager's log and the clients.

import { jest } from '@jest/globals';
import pino from 'pino';
import r from 'rethinkdb';
import { loadGateConfig } from '../../gate/src/config.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { buildSetHeartbeatTimeout } from '../../src/rethinkdb/queries.js';
import { realClock as clock, serveHoldPort, writeTokenFile } from '../helpers/gate-hold-port.js';
import {
  createRealManager, eventually, primariesOf, readTables, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(240000);

let cluster;
let gate;
let admin;
let m;
const clients = [];

// A lab index of its own: the evaluation (0) and other netns tests may run beside it.
beforeAll(async () => {
  cluster = await startRealCluster({ network: 'netns', labIndex: 8 });
  await cluster.withConnection((c) => buildSetHeartbeatTimeout(r, 2).run(c));
  const proxy = await cluster.addProxy();
  const tokenFile = writeTokenFile('suspicion-hold-token\n');
  const config = loadGateConfig({
    GATE_UPSTREAM: `${proxy.host}:${proxy.driverPort}`, GATE_PORT: '0', GATE_HOST: '127.0.0.1', GATE_METRICS_PORT: '0', GATE_HOLD_TOKEN_FILE: tokenFile,
    GATE_RETRY_BUDGET_MS: '5000',
  });
  const metrics = createGateMetrics();
  const logger = pino({ level: 'silent' });
  gate = createGate({ config, metrics, clock, logger });
  const { port } = await gate.start();
  admin = await serveHoldPort({ tokenFile, gate, metrics, logger });
  m = createRealManager(cluster, {
    via: 0, env: { GATE_HOLD_TOKEN_FILE: tokenFile, GATE_HOLD_ENDPOINTS: `127.0.0.1:${admin.port}`, FAILOVER_CHECK_MS: '500' },
  });
  await waitConnected(m);
  for (let i = 0; i < 8; i += 1) clients.push(await r.connect({ host: '127.0.0.1', port }));
}, 180000);

afterAll(async () => {
  for (const c of clients) await c.close({ noreplyWait: false }).catch(() => {});
  await m?.close();
  await gate?.stop(0);
  await admin?.close();
  await cluster?.destroy();
});

const logAt = (line) => Date.parse(line.time);

// Until every replica is ready and every shard acted for by its configured primary (after a loss and its return).
async function settledAgain() {
  await eventually(async () => {
    const t = await readTables(cluster);
    return Object.values(t.status).every((st) => st.status.all_replicas_ready)
      && Object.keys(t.config).every((name) => primariesOf(t, name).every((p, i) => t.status[name].shards[i].primary_replicas.join() === p));
  }, { timeoutMs: 60000, what: 'every replica ready again' });
}

// Inserts of new ids through the gate, in an open loop (a new one every 5 ms whatever the earlier ones do, so that
// writes keep starting while some hang), while `lose` takes a primary's server away and `giveBack` returns it. An
// insert applied twice would answer a duplicate key. -> what the test checks, after logging it.
async function lossUnderLoad(what, lose, giveBack) {
  const before = await readTables(cluster);
  const lostName = primariesOf(before).find((p) => p !== 'rethinkdb_0');
  const lost = cluster.servers.find((s) => s.name === lostName).index;
  const table = r.db('ycsb').table('usertable');
  const outcomes = [];
  const pending = [];
  const logsBefore = m.logs.length;
  const insert = (c, id) => {
    const startedAt = Date.now();
    pending.push(table.insert({ id, field0: 'x' }).run(c).then(
      (res) => outcomes.push({ startedAt, tookMs: Date.now() - startedAt, error: res.errors ? res.first_error : null }),
      (err) => outcomes.push({ startedAt, tookMs: Date.now() - startedAt, error: `${err.name}: ${err.message}` }),
    ));
  };
  let n = 0;
  const timer = setInterval(() => { insert(clients[n % clients.length], `${what}-${n}`); n += 1; }, 5);
  const stopWriters = () => clearInterval(timer);
  await new Promise((resolve) => { setTimeout(resolve, 1000); });
  const cutAt = Date.now();
  lose(lost);
  try {
    const newLog = (msg) => m.logs.slice(logsBefore).find((l) => l.msg === msg);
    const held = await eventually(() => newLog('suspicion: new writes held'), { timeoutMs: 10000, what: 'the manager to hold the lost server\'s tables' });
    const ended = await eventually(() => newLog('suspicion hold ended'), { timeoutMs: 15000, what: 'the suspicion hold to end' });
    await new Promise((resolve) => { setTimeout(resolve, 1000); });
    stopWriters();
    await Promise.all(pending);
    const heldAt = logAt(held);
    const failed = outcomes.filter((o) => o.error);
    const after = outcomes.filter((o) => o.startedAt > heldAt);
    process.stderr.write(`suspicion (${what}): ${lostName}; held ${heldAt - cutAt} ms after (${held.tables}), ended ${ended.how} after ${ended.heldMs} ms (probes then ${JSON.stringify(ended.probes)}); `
      + `${outcomes.length} writes, ${failed.length} failed (${[...new Set(failed.map((f) => f.error.slice(0, 80)))].join(' | ')}), ${after.length} started after the hold; `
      + `slowest: ${JSON.stringify(outcomes.sort((a, b) => b.tookMs - a.tookMs).slice(0, 5).map((o) => ({ at: o.startedAt - cutAt, ms: o.tookMs, error: o.error?.slice(0, 60) ?? null })))}\n`);
    return {
      lostName, held, ended, failed, after, heldAt,
    };
  } finally {
    stopWriters();
    giveBack(lost);
    await settledAgain().catch(() => {});
  }
}

function expectHeldUntilFailover({
  lostName, held, ended, failed, after, heldAt,
}) {
  expect(held.server).toBe(lostName);
  expect(held.tables).toContain('ycsb.usertable');
  // Ended by the failover: other servers act for its tables, or RethinkDB has dropped it (the failover under way).
  expect(['failed_over', 'dropped']).toContain(ended.how);
  expect(after.length).toBeGreaterThan(0);
  expect(after.filter((o) => o.error)).toEqual([]);
  expect(failed.filter((f) => f.startedAt > heldAt)).toEqual([]);
  expect(failed.filter((f) => /Duplicate primary key/.test(f.error))).toEqual([]);
}

describe('a server lost silently, with the manager probing', () => {
  test('when a primary\'s network is cut, then new writes for its tables are held from the suspicion until the failover: every failed write started before the hold, and none after it failed', async () => {
    expectHeldUntilFailover(await lossUnderLoad('cut', (i) => cluster.cutNetwork(i), (i) => cluster.restoreNetwork(i)));
  });

  test('when a primary is cut off from the other servers but not from the manager (a partition), then its probes through the other servers find it, and its tables are held the same way', async () => {
    expectHeldUntilFailover(await lossUnderLoad('partition', (i) => cluster.partitionServer(i), (i) => cluster.healPartition(i)));
  });

  // The false alarm: a primary frozen (SIGSTOP) for 700 ms, well within the 2 s heartbeat, answers again. The manager
  // suspects it and holds its tables' writes, and the hold ends when it answers: no failover, no failed write, and
  // no write waited much past the freeze.
  test('when a primary only freezes for 700 ms, then its hold ends as it answers again: no write fails, none is applied twice, and the configured primaries stay', async () => {
    const before = await readTables(cluster);
    const freeze = (i) => {
      cluster.signalServer(i, 'SIGSTOP');
      setTimeout(() => cluster.signalServer(i, 'SIGCONT'), 700);
    };
    const { held, ended, failed } = await lossUnderLoad('freeze', freeze, () => {});
    expect(held.tables).toContain('ycsb.usertable');
    expect(ended.how).toBe('answered');
    expect(ended.heldMs).toBeLessThan(2000);
    expect(failed).toEqual([]);
    const after = await readTables(cluster);
    for (const name of Object.keys(before.config)) expect(primariesOf(after, name)).toEqual(primariesOf(before, name));
  });
});
