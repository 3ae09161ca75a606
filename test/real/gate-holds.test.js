// Holds (README, "The query gate"): the manager, moving primaries on four real RethinkDB 2.4.4 servers, holds the
// table's queries at the gate around each table_config write and releases them once the handover is over
// (GATE_HOLD_UNTIL), so that no query is in flight when an old primary's execution ends. Tight-loop writers and readers through the
// gate and a `rethinkdb proxy` see no error at all, OP_INDETERMINATE included (a raw config write without a hold
// makes a few: test/real/gate.test.js). Every outcome is read through the driver and the gate's metrics.

import { jest } from '@jest/globals';
import pino from 'pino';
import r from 'rethinkdb';
import { loadGateConfig } from '../../gate/src/config.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { realClock as clock, serveHoldPort, writeTokenFile } from '../helpers/gate-hold-port.js';
import { postJson } from '../helpers/harness.js';
import {
  createRealManager, eventually, primariesOf, readTables, settled, startRealCluster, waitConnected,
} from '../helpers/real-cluster.js';

jest.setTimeout(180000);

let cluster;
let gate;
let admin;
let metrics;
let m;
let client;

beforeAll(async () => {
  cluster = await startRealCluster();
  const proxy = await cluster.addProxy();
  const tokenFile = writeTokenFile('real-cluster-hold-token\n');
  const config = loadGateConfig({
    GATE_UPSTREAM: `${proxy.host}:${proxy.driverPort}`, GATE_PORT: '0', GATE_HOST: '127.0.0.1', GATE_METRICS_PORT: '0', GATE_HOLD_TOKEN_FILE: tokenFile,
  });
  metrics = createGateMetrics();
  const logger = pino({ level: 'silent' });
  gate = createGate({ config, metrics, clock, logger });
  const { port } = await gate.start();
  admin = await serveHoldPort({ tokenFile, gate, metrics, logger });
  m = createRealManager(cluster, { env: { GATE_HOLD_TOKEN_FILE: tokenFile, GATE_HOLD_ENDPOINTS: `127.0.0.1:${admin.port}` } });
  await waitConnected(m);
  client = await r.connect({ host: '127.0.0.1', port });
}, 120000);

afterAll(async () => {
  await client?.close({ noreplyWait: false }).catch(() => {});
  await m?.close();
  await gate?.stop(0);
  await admin?.close();
  await cluster?.destroy();
});

const metric = async (name, labels = {}) => {
  const found = (await metrics.registry.getMetricsAsJSON()).find((x) => x.name === name);
  return (found?.values ?? []).filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
};

describe('holds on a real cluster', () => {
  test('when the manager starts leading, then it has asked the gate once for its holds, and took none', async () => {
    await eventually(() => m.logs.some((l) => l.msg === 'query gates reached for holds'), { timeoutMs: 5000, what: 'the manager\'s check of the gates' });
    expect(m.logs.find((l) => l.msg === 'query gates reached for holds').reached).toEqual([`127.0.0.1:${admin.port}`]);
    expect(await metric('rethinkdb_gate_holds_total')).toBe(0);
  });

  test('when the manager drains and releases a server four times under tight-loop writes and reads, then no query fails and each handover was held', async () => {
    const table = r.db('ycsb').table('usertable');
    const errors = [];
    let written = 0;
    let read = 0;
    let stop = false;
    // New ids only: one write term per query; a write applied twice would fail with a duplicate key.
    const writer = async (w) => {
      for (let i = 0; !stop; i += 1) {
        try {
          const res = await table.insert({ id: `hold-w${w}-${i}`, field0: 'x' }).run(client);
          if (res.errors) errors.push(res.first_error); else written += 1;
        } catch (err) {
          errors.push(`${err.name}: ${err.message}`);
        }
      }
    };
    const reader = async () => {
      for (let i = 0; !stop; i += 1) {
        try {
          await table.get(`user${i % 2000}`).run(client);
          read += 1;
        } catch (err) {
          errors.push(`${err.name}: ${err.message}`);
        }
      }
    };
    const loops = [...[0, 1, 2, 3].map(writer), reader(), reader()];
    const heldBefore = await metric('rethinkdb_gate_holds_total');
    const reports = [];
    for (const server of ['rethinkdb_1', 'rethinkdb_2', 'rethinkdb_1', 'rethinkdb_2']) {
      const drained = await postJson(m.app, '/v1/actions/move-primaries-from-server', { server });
      expect(drained.status).toBe(200);
      reports.push(drained.body);
      const released = await postJson(m.app, '/v1/actions/release-server', { server });
      expect(released.status).toBe(200);
      await eventually(() => settled(cluster), { timeoutMs: 30000, what: 'the primaries acting' });
    }
    await eventually(async () => (await metric('rethinkdb_gate_holds_active')) === 0, { timeoutMs: 10000, what: 'every hold ended' });
    stop = true;
    await Promise.all(loops);
    const holds = await metric('rethinkdb_gate_holds_total') - heldBefore;
    const held = await metric('rethinkdb_gate_held_queries_total');
    const retries = await metric('rethinkdb_gate_retries_total');
    process.stdout.write(`gate holds: ${written} writes and ${read} reads while primaries moved 8 times, ${errors.length} failed; `
      + `${holds} holds (${await metric('rethinkdb_gate_holds_ended_total', { how: 'released' })} released, `
      + `${await metric('rethinkdb_gate_holds_ended_total', { how: 'expired' })} expired), ${held} queries held, ${retries} retries\n`);
    expect(errors).toEqual([]);
    expect(written).toBeGreaterThan(0);
    // Every drain moved usertable primaries, each table write with a hold at the one gate.
    const rows = reports.flatMap((report) => report.changes).filter((c) => c.table === 'ycsb.usertable');
    expect(rows.length).toBeGreaterThan(0);
    for (const row of rows) expect(row.queryHold).toMatchObject({ gates: 1, unreachable: [] });
    expect(holds).toBeGreaterThanOrEqual(8);
    expect(held).toBeGreaterThan(0);
    // Each hold ended: released by the manager once the old primary stopped acting (or, on a slow machine, at its ttl).
    expect(await metric('rethinkdb_gate_holds_ended_total', { how: 'released' }) + await metric('rethinkdb_gate_holds_ended_total', { how: 'expired' })).toBe(holds);
    expect(await metric('rethinkdb_gate_holds_ended_total', { how: 'released' })).toBeGreaterThan(0);
    // The manager ended them on seeing the old primaries stop acting, not by waiting out their ttl.
    const ended = () => m.logs.filter((l) => l.msg === 'query gates released');
    await eventually(() => ended().length === holds, { timeoutMs: 5000, what: 'the manager\'s line for each hold it ended' });
    expect(ended().filter((l) => l.how === 'handed_over').length).toBeGreaterThan(0);
    expect(primariesOf(await readTables(cluster))).toHaveLength(4);
  });
});
