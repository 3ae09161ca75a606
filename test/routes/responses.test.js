// Every answer is what /openapi.json documents: the sandbox manager is driven through every documented route (each
// success status at least once), and each answer, success or error, is checked against the schema the document gives
// for its status. The checker itself is shown to refuse bodies that stray from the document.

import express from 'express';
import request from 'supertest';
import { createLeaderElector } from '../../src/events/leader-election.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createLeaderRelay } from '../../src/routes/leader-relay.js';
import { buildOpenApiDocument } from '../../src/routes/openapi.js';
import { serveHoldPort, writeTokenFile } from '../helpers/gate-hold-port.js';
import { createSandboxHarness } from '../helpers/harness.js';
import { createResponseChecker } from '../helpers/openapi-responses.js';

const document = buildOpenApiDocument();

// A client of one app that checks every answer it gets and keeps the problems found.
function checkedClient(app, checker) {
  const problems = [];
  async function call(method, path, body) {
    let req = request(app)[method.toLowerCase()](path);
    if (body !== undefined) req = req.set('content-type', 'application/json').send(JSON.stringify(body));
    const res = await req;
    problems.push(...checker.checkResponse(method, path, res));
    return res;
  }
  // Polls an operation (each answer checked) until it has finished.
  async function settle(href) {
    for (let i = 0; i < 1000; i += 1) {
      const res = await call('GET', href);
      if (res.body.status !== 'running') return res.body;
      await new Promise((resolve) => { setTimeout(resolve, 2); });
    }
    throw new Error(`${href} still running`);
  }
  return { call, settle, problems };
}

describe('every answer of the sandbox manager, against /openapi.json', () => {
  test('when every documented route is called, then each answer matches the schema documented for its status, and every success status was seen', async () => {
    const checker = createResponseChecker(document);
    const h = createSandboxHarness();
    const { call, settle, problems } = checkedClient(h.app, checker);
    const expectStatus = (res, status) => expect([res.req.path, res.status, res.status === status ? null : res.body]).toEqual([res.req.path, status, null]);

    for (const path of ['/livez', '/readyz', '/', '/openapi.json', '/metrics', '/v1/leader', '/v1/cluster', '/v1/events', '/v1/operations', '/v1/sandbox/events', '/v1/monitor']) {
      expectStatus(await call('GET', path), 200);
    }

    // The monitor raises a perf warning on a pod its node's neighbours starve.
    h.kube.setInterference('node-1', 1.8);
    await h.monitor.pollOnce();
    h.clock.advance(15000);
    await h.monitor.pollOnce();
    expect((await call('GET', '/v1/monitor')).body.lastDecisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-1' })]);
    expect((await call('GET', '/v1/cluster')).body.monitor.hot).not.toEqual([]);
    h.kube.setInterference('node-1', 0);

    // Dry runs of every action, then the ones that answer with a report.
    const cluster = (await call('GET', '/v1/cluster')).body;
    const shard0 = cluster.tables[0].shards[0].replicas.map((r) => r.server);
    const outsider = cluster.servers.map((s) => s.name).find((name) => !shard0.includes(name));
    const actions = [
      ['move-primaries-from-server', { server: 'rethinkdb_2' }], ['move-primaries-from-node', { node: 'node-3' }], ['rebalance-primaries', {}],
      ['release-server', { server: 'rethinkdb_2' }], ['add-server', { server: 'rethinkdb_3' }],
      ['create-replica', { table: cluster.tables[0].table, shard: 0, server: outsider }], ['migrate-replicas-off', { server: 'rethinkdb_0' }],
    ];
    for (const [action, body] of actions) expectStatus(await call('POST', `/v1/actions/${action}?dryRun=true`, body), 200);
    for (const [action, body] of actions.slice(0, 4)) expectStatus(await call('POST', `/v1/actions/${action}`, body), 200);

    // The data moves, one at a time, each followed to its end.
    for (const [action, body] of actions.slice(4)) {
      const res = await call('POST', `/v1/actions/${action}`, body);
      expectStatus(res, 202);
      expect((await settle(res.body.operation.href)).status).not.toBe('running');
    }

    // The hooks: a warning and its end, a stop and a (re)start.
    expectStatus(await call('POST', '/v1/hooks/perfwarning', { pod: 'rethinkdb-2', durationSeconds: 30, reason: 'noisy neighbour' }), 200);
    expectStatus(await call('POST', '/v1/hooks/perfwarning', { node: 'node-0', durationSeconds: 3600 }), 200);
    expectStatus(await call('DELETE', '/v1/hooks/perfwarning?pod=rethinkdb-2'), 200);
    expectStatus(await call('DELETE', '/v1/hooks/perfwarning?node=node-0'), 200);
    expectStatus(await call('DELETE', '/v1/hooks/perfwarning?node=node-0'), 404);
    expectStatus(await call('POST', '/v1/hooks/prestop?pod=rethinkdb-3'), 200);
    const poststart = await call('POST', '/v1/hooks/poststart?pod=rethinkdb-3');
    expectStatus(poststart, 202);
    await settle(poststart.body.operation.href);

    // The sandbox's controls.
    expectStatus(await call('POST', '/v1/sandbox/servers/rethinkdb_3/crash', { mode: 'cut' }), 200);
    expectStatus(await call('GET', '/v1/cluster'), 200);
    expectStatus(await call('POST', '/v1/sandbox/servers/rethinkdb_3/restore'), 200);
    expectStatus(await call('POST', '/v1/sandbox/pods/rethinkdb-1/cpu', { cores: 0.5 }), 200);
    expectStatus(await call('POST', '/v1/sandbox/pods/rethinkdb-1/interference', { cores: 1 }), 200);
    expectStatus(await call('DELETE', '/v1/sandbox/pods/rethinkdb-1/interference'), 200);
    expectStatus(await call('POST', '/v1/sandbox/nodes/node-2/cordon', {}), 200);
    expectStatus(await call('POST', '/v1/sandbox/nodes/node-2/cordon', { cordoned: false }), 200);
    expectStatus(await call('POST', '/v1/sandbox/pods', {}), 201);
    expectStatus(await call('POST', '/v1/sandbox/scale', { replicas: 6 }), 200);
    expectStatus(await call('POST', '/v1/sandbox/nodes/node-3/crash'), 200);

    // Everything that ran, as the reads show it afterwards.
    for (const op of h.operations.list()) await settle(`/v1/operations/${op.id}`);
    expectStatus(await call('GET', '/v1/operations'), 200);
    expectStatus(await call('GET', '/v1/events?limit=500'), 200);
    expectStatus(await call('GET', '/v1/sandbox/events'), 200);
    expectStatus(await call('GET', '/v1/cluster'), 200);
    // Errors are checked too.
    expectStatus(await call('GET', '/v1/operations/no-such-operation'), 404);
    expectStatus(await call('POST', '/v1/actions/move-primaries-from-server', { server: 'nobody' }), 404);

    expect(problems).toEqual([]);
    expect(checker.unexercisedSuccesses()).toEqual([]);
  });

  test('when leader election is on, then GET /v1/leader answers the election as documented', async () => {
    const checker = createResponseChecker(document);
    const logger = createLogger({ level: 'silent' });
    const clock = createVirtualClock();
    const elector = createLeaderElector({
      kube: {}, leaseName: 'rethinkdb-manager', identity: 'manager-a', addresses: { http: 'http://198.18.0.1:8080', webhook: 'https://198.18.0.1:8443' },
      timings: { leaseDurationMs: 15000, renewDeadlineMs: 10000, retryPeriodMs: 2000 }, clock, logger,
    });
    const relay = createLeaderRelay({ leadership: () => elector, view: () => ({ ...elector.view(), parts: ['http', 'timers'] }), served: () => false, deadlines: { prestopSeconds: 1, actionSeconds: 1 }, clock, logger });
    const res = await request(express().use(relay.router)).get('/v1/leader');
    expect(res.body).toMatchObject({ enabled: true, identity: 'manager-a', leading: false });
    expect(checker.checkResponse('GET', '/v1/leader', res)).toEqual([]);
  });
});

describe('the response check', () => {
  const checker = createResponseChecker(document);
  const ok = { method: 'GET', status: 200 };

  test('when a body matches its schema, then there is no problem', () => {
    expect(checker.check({ ...ok, path: '/livez', body: { status: 'ok', version: '1.2.3' } })).toEqual([]);
  });

  test.each([
    ['a required field is missing', '/livez', { status: 'ok' }, /must have required property 'version'/],
    ['a field has the wrong type', '/v1/operations', { operations: [{ id: 'a', kind: 'poststart', status: 'running', createdAt: '2026-01-01T00:00:00Z', finishedAt: null, href: 7 }] }, /\/operations\/0\/href must be string/],
    ['a value is not in its enum', '/v1/operations', { operations: [{ id: 'a', kind: 'poststart', status: 'done', createdAt: '2026-01-01T00:00:00Z', finishedAt: null, href: '/x' }] }, /status must be equal to one of the allowed values/],
    ['a date is not a date', '/v1/events', { events: [{ id: 1, time: 'yesterday', actor: 'a', actorLabel: 'a', action: 'x', target: {}, pod: null, reason: null, outcome: 'completed', plan: { changes: [], skipped: [], notDone: [] }, durationMs: null, operation: null, event: 'none' }] }, /time must match format "date-time"/],
    ['a closed object has a field it does not document', '/v1/sandbox/scale', { replicas: 3, extra: true }, /must NOT have additional properties \(extra\)/],
    ['a nested number is a string', '/v1/cluster', { backend: 'sandbox', servers: [{ name: 's', id: 'i', connected: true, draining: false, primaries: '1', replicas: 0 }], tables: [], backfills: [], draining: [], runningOperations: [], perfWarnings: [], migrations: [], pendingRestores: [], reconciliation: null, nodeMaintenance: [], leadership: { enabled: false, leading: true }, pods: null, monitor: null }, /servers\/0\/primaries must be integer/],
  ])('when %s, then it is a problem', (what, path, body, expected) => {
    const method = path === '/v1/sandbox/scale' ? 'POST' : 'GET';
    const problems = checker.check({ ...ok, method, path, body });
    expect(problems.join('\n')).toMatch(expected);
  });

  test('when a status or a route is not documented, or the content type differs, then it is a problem', () => {
    expect(checker.check({ ...ok, path: '/livez', status: 201, body: {} })).toEqual([expect.stringMatching(/answered 201, which it does not document/)]);
    expect(checker.check({ ...ok, path: '/v1/nowhere', body: {} })).toEqual(['GET /v1/nowhere is not documented']);
    expect(checker.check({ ...ok, path: '/metrics', contentType: 'application/json', body: {} })).toEqual([expect.stringMatching(/not text\/plain/)]);
  });

  test('when an error body names a code its status does not document, then it is a problem', () => {
    expect(checker.check({ ...ok, path: '/v1/operations/x', status: 404, body: { error: 'OPERATION_NOT_FOUND', message: 'gone' } })).toEqual([]);
    expect(checker.check({ ...ok, path: '/v1/operations/x', status: 404, body: { error: 'SERVER_NOT_FOUND', message: 'gone' } }).join()).toMatch(/error must be equal to one of the allowed values/);
  });
});

describe('an action whose writes are held at a query gate, against /openapi.json', () => {
  test('when a drain moves primaries with a gate to hold (GATE_HOLD_DELAY_MS=200), then each change\'s queryHold is as documented, taken after the write', async () => {
    const tokenFile = writeTokenFile('a-shared-hold-token\n');
    const holdPort = await serveHoldPort({ tokenFile });
    try {
      const h = createSandboxHarness({ env: { GATE_HOLD_TOKEN_FILE: tokenFile, GATE_HOLD_ENDPOINTS: `127.0.0.1:${holdPort.port}`, GATE_HOLD_DELAY_MS: '200' } });
      const res = await request(h.app).post('/v1/actions/move-primaries-from-server').set('content-type', 'application/json').send('{"server":"rethinkdb_1"}');
      expect(res.status).toBe(200);
      const held = res.body.changes.map((c) => c.queryHold);
      expect(held.length).toBeGreaterThan(0);
      for (const hold of held) expect(hold).toMatchObject({ gates: 1, unreachable: [], afterWriteMs: 200 });
      expect(createResponseChecker(document).checkResponse('POST', '/v1/actions/move-primaries-from-server', res)).toEqual([]);
    } finally {
      await holdPort.close();
    }
  });
});
