// GET /metrics on the sandbox: hooks, operator actions and the monitor each change exactly the series they
// should, the cluster gauges match GET /v1/cluster, and a data store that is down or hangs still gives a scrape.

import request from 'supertest';
import { AppError } from '../../src/errors.js';
import { routeTemplate } from '../../src/routes/http-metrics.js';
import { scrape } from '../helpers/exposition.js';
import { createSandboxHarness, postJson, waitForOperation } from '../helpers/harness.js';

const m = (name) => `rethinkdb_manager_${name}`;
const post = postJson;
const events = async (app) => (await request(app).get('/v1/events')).body.events;
const clusterServers = async (app) => (await request(app).get('/v1/cluster')).body.servers;


// The cluster gauges of a scrape, per server, in the shape of GET /v1/cluster's servers.
function serverGauges(s, names) {
  return names.map((server) => ({
    name: server,
    primaries: s.value(m('server_primaries'), { server }),
    replicas: s.value(m('server_replicas'), { server }),
    draining: s.value(m('server_draining'), { server }) === 1,
  }));
}

describe('GET /metrics', () => {
  test('when scraped, then 200 in the Prometheus text format, every metric under the app prefix, and the per-server gauges as GET /v1/cluster shows them', async () => {
    const h = createSandboxHarness();
    const s = await scrape(h.app);
    expect(s.status).toBe(200);
    expect(s.contentType).toBe('text/plain; version=0.0.4; charset=utf-8');
    expect(Object.keys(s.types).length).toBeGreaterThanOrEqual(14);
    expect(Object.keys(s.types).filter((name) => !name.startsWith('rethinkdb_manager_'))).toEqual([]);
    const servers = await clusterServers(h.app);
    expect(servers.map((x) => x.primaries)).toEqual([1, 1, 1, 1]);
    expect(serverGauges(s, servers.map((x) => x.name))).toEqual(servers.map(({ name, primaries, replicas, draining }) => ({ name, primaries, replicas, draining })));
    expect(s.value(m('cluster_scrape_success'))).toBe(1);
    expect(s.value(m('draining_servers'))).toBe(0);
    expect(s.value(m('perf_warnings'))).toBe(0);
    expect(s.value(m('monitor_polls_total'))).toBe(0);
    expect(s.value(m('monitor_poll_failures_total'))).toBe(0);
    expect(s.series(m('actions_total'))).toEqual([]);
  });

  test('when a pod\'s PRESTOP runs, then one hook request and one action with its duration are counted, and its server is draining with no primaries', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    expect(res.body.outcome).toBe('completed');
    const s = await scrape(h.app);
    expect(s.series(m('hook_requests_total'))).toEqual([{ labels: { hook: 'prestop', outcome: 'completed' }, value: 1 }]);
    expect(s.series(m('actions_total'))).toEqual([{ labels: { action: 'move-primaries-from-server', actor: 'hook:prestop', outcome: 'completed' }, value: 1 }]);
    const [audited] = await events(h.app);
    expect(audited.durationMs).toBeGreaterThan(0);
    expect(s.value(m('action_duration_seconds_count'), { action: 'move-primaries-from-server' })).toBe(1);
    expect(s.value(m('action_duration_seconds_sum'), { action: 'move-primaries-from-server' })).toBe(audited.durationMs / 1000);
    expect(s.value(m('draining_servers'))).toBe(1);
    expect(s.value(m('server_draining'), { server: 'rethinkdb_1' })).toBe(1);
    expect(s.value(m('server_primaries'), { server: 'rethinkdb_1' })).toBe(0);
    const servers = await clusterServers(h.app);
    expect(serverGauges(s, servers.map((x) => x.name))).toEqual(servers.map(({ name, primaries, replicas, draining }) => ({ name, primaries, replicas, draining })));

    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1'); // a repeat demotes nothing
    const again = await scrape(h.app);
    expect(again.value(m('hook_requests_total'), { hook: 'prestop', outcome: 'completed' })).toBe(1);
    expect(again.value(m('hook_requests_total'), { hook: 'prestop', outcome: 'nothing_to_do' })).toBe(1);
    expect(again.value(m('actions_total'), { action: 'move-primaries-from-server', actor: 'hook:prestop', outcome: 'nothing_to_do' })).toBe(1);
    expect(again.value(m('action_duration_seconds_count'), { action: 'move-primaries-from-server' })).toBe(2);
    expect(again.value(m('draining_servers'))).toBe(1);
  });

  test.each([
    { what: 'a PRESTOP for an unknown pod', send: (app) => request(app).post('/v1/hooks/prestop?pod=rethinkdb-9'), hook: 'prestop', outcome: 'pod_not_found' },
    { what: 'a PRESTOP with a malformed pod name', send: (app) => request(app).post('/v1/hooks/prestop?pod=Bad_Pod'), hook: 'prestop', outcome: 'bad_request' },
    { what: 'a POSTSTART', send: (app) => request(app).post('/v1/hooks/poststart?pod=rethinkdb-1'), hook: 'poststart', outcome: 'accepted' },
    { what: 'a PERFWARNING', send: (app) => post(app, '/v1/hooks/perfwarning', { pod: 'rethinkdb-2' }), hook: 'perfwarning', outcome: 'raised' },
    {
      what: 'a PERFWARNING whose body is not JSON', hook: 'perfwarning', outcome: 'unsupported_media_type',
      send: (app) => request(app).post('/v1/hooks/perfwarning').set('content-type', 'text/plain').send('pod=rethinkdb-2'),
    },
    {
      what: 'a PERFWARNING whose JSON does not parse', hook: 'perfwarning', outcome: 'bad_request',
      send: (app) => request(app).post('/v1/hooks/perfwarning').set('content-type', 'application/json').send('{"pod":'),
    },
    { what: 'the end of a PERFWARNING that is not active', send: (app) => request(app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2'), hook: 'perfwarning_end', outcome: 'not_found' },
  ])('when $what is answered, then hook_requests_total counts it once as {hook="$hook", outcome="$outcome"}', async ({ send, hook, outcome }) => {
    const h = createSandboxHarness();
    await send(h.app);
    const s = await scrape(h.app);
    expect(s.series(m('hook_requests_total'))).toEqual([{ labels: { hook, outcome }, value: 1 }]);
  });

  test('when a PERFWARNING is raised and then withdrawn, then both hook requests are counted, and the perf-warning gauge goes to 1 and back to 0', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/hooks/perfwarning', { pod: 'rethinkdb-2', reason: 'backup job' });
    expect((await scrape(h.app)).value(m('perf_warnings'))).toBe(1);
    expect((await request(h.app).delete('/v1/hooks/perfwarning?pod=rethinkdb-2')).status).toBe(200);
    const s = await scrape(h.app);
    expect(s.value(m('perf_warnings'))).toBe(0);
    expect(s.value(m('hook_requests_total'), { hook: 'perfwarning', outcome: 'raised' })).toBe(1);
    expect(s.value(m('hook_requests_total'), { hook: 'perfwarning_end', outcome: 'ended' })).toBe(1);
  });

  test('when an operator migrates replicas and moves primaries, then both actions and their durations are counted, and a dry run is not', async () => {
    const h = createSandboxHarness();
    await post(h.app, '/v1/actions/move-primaries-from-server?dryRun=true', { server: 'rethinkdb_2' });
    expect((await scrape(h.app)).series(m('actions_total'))).toEqual([]);
    const started = await post(h.app, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    const op = await waitForOperation(h.app, started.body.operation.href);
    expect(op.report.outcome).toBe('completed');
    expect((await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_2', reason: 'kernel upgrade' })).body.outcome).toBe('completed');
    const s = await scrape(h.app);
    const [moved, migrated] = await events(h.app);
    expect([moved.action, migrated.action]).toEqual(['move-primaries-from-server', 'migrate-replicas-off']);
    // The operator's drain, and the demotion the migration starts with (its server's primaries leave before its data).
    expect(s.value(m('actions_total'), { action: 'move-primaries-from-server', actor: moved.actorLabel, outcome: 'completed' })).toBe(2);
    expect(s.value(m('actions_total'), { action: 'migrate-replicas-off', actor: migrated.actorLabel, outcome: 'completed' })).toBe(1);
    expect(s.value(m('action_duration_seconds_count'), { action: 'migrate-replicas-off' })).toBe(1);
    expect(s.value(m('action_duration_seconds_sum'), { action: 'migrate-replicas-off' })).toBe(migrated.durationMs / 1000);
    expect(migrated.durationMs).toBeGreaterThan(1000); // backfills take (virtual) seconds
    expect(s.value(m('action_duration_seconds_bucket'), { action: 'migrate-replicas-off', le: '0.5' })).toBe(0);
    expect(s.value(m('action_duration_seconds_bucket'), { action: 'migrate-replicas-off', le: '600' })).toBe(1);
    expect(s.value(m('server_replicas'), { server: 'rethinkdb_3' })).toBe(0);
    expect(s.value(m('server_draining'), { server: 'rethinkdb_3' })).toBe(1);
    expect(s.value(m('draining_servers'))).toBe(2);
  });

  test('when several hooks and actions have run, then every audit record in GET /v1/events is counted once in actions_total', async () => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    await post(h.app, '/v1/hooks/perfwarning', { pod: 'rethinkdb-2', durationSeconds: 3600 });
    await post(h.app, '/v1/actions/release-server', { server: 'rethinkdb_1' });
    for (const o of h.operations.list()) await waitForOperation(h.app, `/v1/operations/${o.id}`);
    const audited = await events(h.app);
    expect(audited.length).toBeGreaterThanOrEqual(4);
    const expected = {};
    for (const e of audited) {
      const key = JSON.stringify({ action: e.action, actor: e.actorLabel, outcome: e.outcome });
      expected[key] = (expected[key] ?? 0) + 1;
    }
    const counted = Object.fromEntries((await scrape(h.app)).series(m('actions_total')).map(({ labels, value }) => [JSON.stringify({ action: labels.action, actor: labels.actor, outcome: labels.outcome }), value]));
    expect(counted).toEqual(expected);
  });
});

describe('GET /metrics and the monitor', () => {
  test('when interference makes a pod hot for two polls, then polls, detections, the raise and its demotion are counted, and utilization is what the monitor sees', async () => {
    // The immediate raise off, so that the two-poll rule is what raises.
    const h = createSandboxHarness({ env: { MONITOR_IMMEDIATE_UTILIZATION: '0' } });
    h.kube.setInterference('node-1', 1.8);
    await h.monitor.pollOnce();
    h.clock.advance(15000);
    const second = await h.monitor.pollOnce();
    expect(second.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-1', signal: 'interference' })]);
    const s = await scrape(h.app);
    expect(s.value(m('monitor_polls_total'))).toBe(2);
    expect(s.value(m('monitor_poll_failures_total'))).toBe(0);
    expect(s.series(m('hotspot_detections_total'))).toEqual([{ labels: { pod: 'rethinkdb-1', signal: 'interference' }, value: 2 }]);
    expect(s.series(m('monitor_decisions_total'))).toEqual([{ labels: { decision: 'raise', outcome: 'ok' }, value: 1 }]);
    expect(s.series(m('actions_total'))).toEqual([{ labels: { action: 'move-primaries-from-server', actor: 'monitor', outcome: 'completed' }, value: 1 }]);
    expect(s.value(m('perf_warnings'))).toBe(1);
    expect(s.value(m('server_primaries'), { server: 'rethinkdb_1' })).toBe(0);
    const view = h.monitor.view();
    const seen = view.pods.flatMap((p) => ['own', 'interference'].map((signal) => ({ labels: { pod: p.pod, signal }, value: p[signal] })));
    expect(seen.find((x) => x.labels.pod === 'rethinkdb-1' && x.labels.signal === 'interference').value).toBeGreaterThanOrEqual(0.8);
    expect(s.series(m('pod_utilization_ratio'))).toEqual(expect.arrayContaining(seen));
    expect(s.series(m('pod_utilization_ratio'))).toHaveLength(seen.length);
  });

  test('when interference makes a node fully busy, then the first poll raises (MONITOR_IMMEDIATE_UTILIZATION) and it is counted once', async () => {
    const h = createSandboxHarness();
    h.kube.setInterference('node-1', 1.8);
    const first = await h.monitor.pollOnce();
    expect(first.decisions).toEqual([expect.objectContaining({ type: 'raise', pod: 'rethinkdb-1', signal: 'interference', reason: expect.stringMatching(/raised after 1 of 2 polls \(node 100% busy, at or above 95%\)$/) })]);
    h.clock.advance(15000);
    expect((await h.monitor.pollOnce()).decisions).toEqual([]);
    const s = await scrape(h.app);
    expect(s.series(m('monitor_decisions_total'))).toEqual([{ labels: { decision: 'raise', outcome: 'ok' }, value: 1 }]);
    expect(s.value(m('server_primaries'), { server: 'rethinkdb_1' })).toBe(0);
  });

  test('when the interference ends and a node is lost, then utilization follows the next poll and the lost pod\'s series are gone', async () => {
    const h = createSandboxHarness();
    h.kube.setInterference('node-1', 1.8);
    await h.monitor.pollOnce();
    h.kube.setInterference('node-1', 0);
    h.kube.crashNode('node-3');
    h.clock.advance(15000);
    await h.monitor.pollOnce();
    const s = await scrape(h.app);
    const view = h.monitor.view();
    expect(view.pods.map((p) => p.pod)).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
    for (const p of view.pods) {
      for (const signal of ['own', 'interference']) expect(s.value(m('pod_utilization_ratio'), { pod: p.pod, signal })).toBe(p[signal]);
    }
    expect(s.series(m('pod_utilization_ratio')).filter((x) => x.labels.pod === 'rethinkdb-3')).toEqual([]);
    expect(s.value(m('pod_utilization_ratio'), { pod: 'rethinkdb-1', signal: 'interference' })).toBeLessThan(0.8);
    expect(s.series(m('hotspot_detections_total'))).toEqual([{ labels: { pod: 'rethinkdb-1', signal: 'interference' }, value: 1 }]);
  });

  test('when a poll fails, then it is counted as a poll and as a failure, and the utilization of the last good poll stays', async () => {
    const h = createSandboxHarness();
    await h.monitor.pollOnce();
    const before = (await scrape(h.app)).series(m('pod_utilization_ratio'));
    expect(before).toHaveLength(8);
    const real = h.kube.listPodMetrics;
    h.kube.listPodMetrics = async () => { throw new Error('metrics API unavailable'); };
    await h.monitor.pollOnce();
    h.kube.listPodMetrics = real;
    const s = await scrape(h.app);
    expect(s.value(m('monitor_polls_total'))).toBe(2);
    expect(s.value(m('monitor_poll_failures_total'))).toBe(1);
    const view = h.monitor.view();
    expect(view.polls + view.failures).toBe(2);
    expect(s.series(m('pod_utilization_ratio'))).toEqual(before);
  });
});

describe('GET /metrics when the data store is unavailable', () => {
  // The store answers until `state.mode` says otherwise: 'hang' never answers, 'down' refuses at once.
  function harnessWithSwitchableStore() {
    const state = { mode: 'up' };
    const h = createSandboxHarness({
      wrapSource: (source) => ({
        ...source,
        readSystemTables: (...args) => {
          if (state.mode === 'hang') return new Promise(() => {});
          if (state.mode === 'down') return Promise.reject(new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB: connect ECONNREFUSED'));
          return source.readSystemTables(...args);
        },
      }),
    });
    return { h, state };
  }

  test.each([['hangs', 'hang'], ['is down', 'down']])('when the data store %s, then the scrape still answers 200 with cluster_scrape_success 0, the marks and the counters, and no per-server counts', async (what, mode) => {
    const { h, state } = harnessWithSwitchableStore();
    await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1');
    state.mode = mode;
    const s = await scrape(h.app);
    expect(s.status).toBe(200);
    expect(s.value(m('cluster_scrape_success'))).toBe(0);
    expect(s.series(m('server_primaries'))).toEqual([]);
    expect(s.series(m('server_replicas'))).toEqual([]);
    expect(s.series(m('server_draining'))).toEqual([{ labels: { server: 'rethinkdb_1' }, value: 1 }]);
    expect(s.value(m('draining_servers'))).toBe(1);
    expect(s.value(m('hook_requests_total'), { hook: 'prestop', outcome: 'completed' })).toBe(1);
    expect(s.value(m('actions_total'), { action: 'move-primaries-from-server', actor: 'hook:prestop', outcome: 'completed' })).toBe(1);
    expect(h.logs.some((l) => l.module === 'metrics' && l.msg.startsWith('cluster not read'))).toBe(true);

    state.mode = 'up';
    const back = await scrape(h.app);
    expect(back.value(m('cluster_scrape_success'))).toBe(1);
    expect(back.series(m('server_primaries'))).toHaveLength(4);
  });

  test('when a PRESTOP\'s caller hangs up before the answer, then the request is counted once, as aborted', async () => {
    const { h, state } = harnessWithSwitchableStore();
    state.mode = 'hang';
    await expect(request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1').timeout(200)).rejects.toThrow(/Timeout/);
    let s;
    for (let i = 0; i < 50 && !s?.series(m('hook_requests_total')).length; i += 1) s = await scrape(h.app);
    expect(s.series(m('hook_requests_total'))).toEqual([{ labels: { hook: 'prestop', outcome: 'aborted' }, value: 1 }]);
  });
});

describe('HTTP request metrics', () => {
  test('when requests are answered, then each is counted under its route template, method and status, never its raw path, and timed', async () => {
    const h = createSandboxHarness();
    await h.lead();
    await request(h.app).get('/v1/operations/abc');
    await request(h.app).get('/v1/operations/def');
    await request(h.app).get('/v1/cluster');
    await request(h.app).get('/no/such/path');
    await post(h.app, '/v1/actions/move-primaries-from-server', { server: 'rethinkdb_1' });
    const s = await scrape(h.app);
    const count = (labels) => s.value(m('http_requests_total'), labels);
    expect(count({ method: 'GET', route: '/v1/operations/:id', code: '404' })).toBe(2);
    expect(count({ method: 'GET', route: '/v1/cluster', code: '200' })).toBe(1);
    expect(count({ method: 'GET', route: 'unmatched', code: '404' })).toBe(1);
    expect(count({ method: 'POST', route: '/v1/actions/move-primaries-from-server', code: '200' })).toBe(1);
    expect(s.value(m('http_request_duration_seconds_count'), { method: 'GET', route: '/v1/operations/:id' })).toBe(2);
    expect(s.text).not.toMatch(/route="\/v1\/operations\/abc"/);
  });

  test.each([
    ['GET', '/v1/operations/0b1c', '/v1/operations/:id'],
    ['GET', '/v1/operations/', '/v1/operations'],
    ['POST', '/v1/hooks/prestop', '/v1/hooks/prestop'],
    ['DELETE', '/v1/hooks/perfwarning', '/v1/hooks/perfwarning'],
    ['PUT', '/v1/cluster', 'unmatched'],
    ['GET', '/v1/operations/a/b', 'unmatched'],
  ])('when %s %s is asked, then its route is %s', (method, path, expected) => {
    expect(routeTemplate(method, path)).toBe(expected);
  });
});
