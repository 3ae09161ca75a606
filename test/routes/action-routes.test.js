import request from 'supertest';
import { createSandboxHarness, primaryMap } from '../helpers/harness.js';

const post = (app, path, body) => request(app).post(path).set('content-type', 'application/json').send(JSON.stringify(body));

describe('POST /v1/actions/move-primaries-from-server', () => {
  test('when a server is drained, then its primaries move, the acting primaries follow, and it is marked draining', async () => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1', reason: 'maintenance' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ action: 'move-primaries-from-server', outcome: 'completed', settled: true, skipped: [], notDone: [] });
    expect(res.body.changes).toEqual([expect.objectContaining({
      table: 'ycsb.usertable', shard: 1, kind: 'primary', from: 'rethinkdb_1', to: 'rethinkdb_2',
      before: { primary: 'rethinkdb_1', replicas: ['rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'], nonvoting: [] },
      after: { primary: 'rethinkdb_2', replicas: ['rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3'], nonvoting: [] },
    })]);
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_2', 'rethinkdb_2', 'rethinkdb_3']);
    const cluster = (await request(h.app).get('/v1/cluster')).body;
    expect(cluster.tables[0].shards[1]).toMatchObject({ primary: 'rethinkdb_2', acting: ['rethinkdb_2'] });
    expect(cluster.servers.find((s) => s.name === 'rethinkdb_1')).toMatchObject({ draining: true, drainingReason: 'maintenance', primaries: 0 });
  });

  test('when dryRun=true, then the plan is returned and nothing changes', async () => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/move-primaries-from-server?dryRun=true', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ dryRun: true, outcome: 'planned', changes: [expect.objectContaining({ from: 'rethinkdb_1', to: 'rethinkdb_2' })] });
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
    expect((await request(h.app).get('/v1/cluster')).body.servers.every((s) => !s.draining)).toBe(true);
  });

  test('when repeated, then the second call changes nothing (idempotent)', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    const again = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(again.body).toMatchObject({ outcome: 'nothing_to_do', changes: [] });
  });

  // A new user's friction (issue 44): nothing_to_do read as "nothing happened", yet the server was kept off from then on.
  test('when the server holds no primary, then the answer is nothing_to_do and says the server is now marked draining', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    await post(h.app, '/v1/actions/release-server', { server: 'rethinkdb_1', rebalance: false });
    expect((await request(h.app).get('/v1/cluster')).body.servers.find((x) => x.name === 'rethinkdb_1')).toMatchObject({ draining: false, primaries: 0 });
    const dry = await post(h.app, '/v1/actions/move-primaries-from-server?dryRun=true', { server: 'rethinkdb_1' });
    expect(dry.body).toMatchObject({ dryRun: true, changes: [], draining: ['rethinkdb_1'] });
    expect((await request(h.app).get('/v1/cluster')).body.servers.find((x) => x.name === 'rethinkdb_1').draining).toBe(false);
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.body).toMatchObject({ outcome: 'nothing_to_do', changes: [], draining: ['rethinkdb_1'] });
    expect((await request(h.app).get('/v1/cluster')).body.servers.find((x) => x.name === 'rethinkdb_1').draining).toBe(true);
  });

  test('when a second server drains, then nothing is demoted onto the first', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_2' });
    expect(res.body.changes.map((c) => c.to)).not.toContain('rethinkdb_1');
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_3', 'rethinkdb_0', 'rethinkdb_3']);
  });

  test('when the only other replicas are down, then the shard is reported, not moved onto a dead server', async () => {
    const h = createSandboxHarness();
    h.model.crashServer('rethinkdb_2');
    h.model.crashServer('rethinkdb_3');
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body.outcome).toBe('partial');
    expect(res.body.skipped).toEqual([{ table: 'ycsb.usertable', shard: 1, reason: 'no eligible replica (rethinkdb_2 disconnected, rethinkdb_3 disconnected)' }]);
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });

  test.each([
    ['an unknown server', { server: 'rethinkdb_9' }, 404, 'SERVER_NOT_FOUND', /server "rethinkdb_9" is not in the cluster \(known: rethinkdb_0, /],
    ['no server', {}, 400, 'BAD_REQUEST', /body.server is required.*Accepted body: \{"server": string matching \^\[A-Za-z0-9_\]\+\$ \(required\)/],
    ['a number for server', { server: 7 }, 400, 'BAD_REQUEST', /body.server must be string/],
    ['an unknown field', { server: 'rethinkdb_1', force: true }, 400, 'BAD_REQUEST', /body.force is not an accepted field/],
  ])('when the body has %s (%j), then %i %s and nothing changes', async (_, body, status, code, message) => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/move-primaries-from-server', body);
    expect(res.status).toBe(status);
    expect(res.body).toEqual(expect.objectContaining({ error: code, message: expect.stringMatching(message) }));
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });
});

describe('request hygiene', () => {
  test.each([
    ['text/plain body', (r) => r.set('content-type', 'text/plain').send('server=rethinkdb_1'), 415, 'UNSUPPORTED_MEDIA_TYPE'],
    ['malformed JSON', (r) => r.set('content-type', 'application/json').send('{"server":'), 400, 'BAD_REQUEST'],
    ['an oversized body', (r) => r.set('content-type', 'application/json').send(JSON.stringify({ server: 'x'.repeat(20000) })), 413, 'PAYLOAD_TOO_LARGE'],
    ['a bad dryRun value', (r) => r.query({ dryRun: 'yes' }).set('content-type', 'application/json').send('{"server":"rethinkdb_1"}'), 400, 'BAD_REQUEST'],
  ].map(([label, build, status, code]) => [label, `${status} ${code}`, build, status, code]))('when a request has %s, then %s and no stack trace', async (_, __, build, status, code) => {
    const h = createSandboxHarness();
    const res = await build(request(h.app).post('/v1/actions/move-primaries-from-server'));
    expect(res.status).toBe(status);
    expect(res.body.error).toBe(code);
    expect(JSON.stringify(res.body)).not.toMatch(/at .*\.js:\d+/);
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });

  test('when a route does not exist, then 404 with the error model', async () => {
    const res = await request(createSandboxHarness().app).get('/v1/nope');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'NOT_FOUND', message: "no route for GET /v1/nope; see docs/api.md or GET /openapi.json" });
  });
});

describe('POST /v1/actions/move-primaries-from-node', () => {
  test('when a node is drained, then the servers of its pods lose their primaries', async () => {
    const h = createSandboxHarness();
    const res = await post(h.app, '/v1/actions/move-primaries-from-node', { node: 'node-2' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'completed', target: { node: 'node-2', pods: ['rethinkdb-2'], servers: ['rethinkdb_2'] }, unmappedPods: [] });
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_0', 'rethinkdb_3']);
  });

  test('when the node does not exist, then 404 naming it', async () => {
    const res = await post(createSandboxHarness().app, '/v1/actions/move-primaries-from-node', { node: 'node-9' });
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'NODE_NOT_FOUND', message: expect.stringContaining('node-9') });
  });
});

describe('POST /v1/actions/rebalance-primaries and release-server', () => {
  test('when a drained server is released, then it gets a fair share of primaries back', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    const blocked = await request(h.app).post('/v1/actions/rebalance-primaries');
    expect(blocked.body).toMatchObject({ outcome: 'nothing_to_do' });
    const res = await post(h.app, '/v1/actions/release-server', { server: 'rethinkdb_1' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ wasDraining: true, rebalance: { outcome: 'completed' } });
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });
});

describe('draining marks set by operator actions', () => {
  test('when an operator drains a server, then its mark records an operator origin and who asked; release-server removes it', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1', reason: 'disk' });
    expect(await h.marks.list()).toEqual([expect.objectContaining({ serverName: 'rethinkdb_1', reason: 'disk', origin: { kind: 'operator', by: 'anonymous' } })]);
    const released = await post(h.app, '/v1/actions/release-server', { server: 'rethinkdb_1', rebalance: false });
    expect(released.body).toMatchObject({ wasDraining: true, rebalance: null, outcome: 'completed' });
    expect(await h.marks.list()).toEqual([]);
  });

  test('when release-server is a dry run, then the mark stays and the rebalance is only planned', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    const res = await post(h.app, '/v1/actions/release-server?dryRun=true', { server: 'rethinkdb_1' });
    expect(res.body).toMatchObject({ dryRun: true, wasDraining: true, rebalance: { outcome: 'planned' } });
    expect((await h.marks.list()).map((m) => m.serverName)).toEqual(['rethinkdb_1']);
  });

  test('when migrate-replicas-off runs, then the server is marked draining; as a dry run, it is not', async () => {
    const h = createSandboxHarness();
    const planned = await post(h.app, '/v1/actions/migrate-replicas-off?dryRun=true', { server: 'rethinkdb_3' });
    expect(planned.body).toMatchObject({ dryRun: true, outcome: 'planned' });
    expect(await h.marks.list()).toEqual([]);
    const started = await post(h.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(started.status).toBe(202);
    expect(await h.marks.list()).toEqual([expect.objectContaining({ serverName: 'rethinkdb_3', reason: 'migrate-replicas-off', origin: expect.objectContaining({ kind: 'operator' }) })]);
  });
});
