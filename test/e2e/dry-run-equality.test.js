// A dry run plans exactly what the real run then writes, for every action and hook that takes ?dryRun=true: each row
// makes its starting state on a fresh sandbox, asks for the dry run, runs the same request for real (following a 202's
// operation to its end), and compares every change either made: the demotion a migration starts with, the replica
// moves, the primaries given afterwards, and a release's rebalance.

import request from 'supertest';
import { createSandboxHarness, postJson, waitForOperation } from '../helpers/harness.js';

const drain = (h, server) => postJson(h.app, '/v1/actions/move-primaries-from-server', { server });

// [name, how its starting state is made, the request]
const CASES = [
  ['move-primaries-from-server', async () => {}, { path: '/v1/actions/move-primaries-from-server', body: { server: 'rethinkdb_1' } }],
  ['move-primaries-from-node', async () => {}, { path: '/v1/actions/move-primaries-from-node', body: { node: 'node-2' } }],
  ['rebalance-primaries after a drain released without rebalancing', async (h) => {
    await drain(h, 'rethinkdb_0');
    await postJson(h.app, '/v1/actions/release-server', { server: 'rethinkdb_0', rebalance: false });
  }, { path: '/v1/actions/rebalance-primaries', body: {} }],
  ['release-server of a drained server (it gets primaries back)', (h) => drain(h, 'rethinkdb_1'), { path: '/v1/actions/release-server', body: { server: 'rethinkdb_1' } }],
  ['add-server of a new, empty server (replicas, then primaries)', async (h) => { h.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' }); }, { path: '/v1/actions/add-server', body: { server: 'rethinkdb_4' } }],
  ['add-server with grow', async (h) => { h.model.addServer({ name: 'rethinkdb_4', hostname: 'rethinkdb-4' }); }, { path: '/v1/actions/add-server', body: { server: 'rethinkdb_4', grow: true } }],
  ['create-replica', async () => {}, { path: '/v1/actions/create-replica', body: { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' } }],
  ['migrate-replicas-off (a demotion, then the replicas)', async () => {}, { path: '/v1/actions/migrate-replicas-off', body: { server: 'rethinkdb_2' } }],
  ['migrate-replicas-off of a draining server', (h) => drain(h, 'rethinkdb_3'), { path: '/v1/actions/migrate-replicas-off', body: { server: 'rethinkdb_3' } }],
  ['the PRESTOP hook', async () => {}, { path: '/v1/hooks/prestop?pod=rethinkdb-3' }],
];

// Every change in an answer, wherever it is, as comparable lines.
function changesIn(answer) {
  const lines = (label, list) => (list ?? []).map((c) => `${label}: ${c.table} shard ${c.shard} ${c.kind} ${c.from ?? '-'} -> ${c.to}`);
  return {
    changes: lines('changes', answer.changes),
    demotion: lines('demotion', answer.demotion?.changes),
    primaries: lines('primaries', answer.primaries?.changes),
    rebalance: lines('rebalance', answer.rebalance?.changes),
    report: lines('report', answer.report?.changes),
  };
}

async function ask(h, { path, body }, dryRun) {
  const url = `${path}${path.includes('?') ? '&' : '?'}dryRun=${dryRun}`;
  const res = body === undefined ? await request(h.app).post(url) : await postJson(h.app, url, body);
  if (res.status === 202) {
    const op = await waitForOperation(h.app, res.body.operation.href, { tries: 100000 });
    return { status: res.status, answer: { ...op.report, demotion: res.body.demotion } };
  }
  return { status: res.status, answer: res.body };
}

describe('a dry run plans what the real run writes', () => {
  test.each(CASES)('%s', async (name, prepare, call) => {
    const h = createSandboxHarness();
    await prepare(h);
    const dry = await ask(h, call, true);
    expect(dry.status).toBe(200);
    const real = await ask(h, call, false);
    expect(real.status).toBeLessThan(300);
    const planned = changesIn(dry.answer);
    const written = changesIn(real.answer);
    expect(written).toEqual(planned);
    // The row is about something: the real run changed something.
    expect(Object.values(written).flat().length).toBeGreaterThan(0);
  });
});
