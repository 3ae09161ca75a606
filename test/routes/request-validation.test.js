// Every route checks its path parameters, query and body against its declared schemas: stray input is a 400
// that names the field and says what is accepted, and nothing changes.

import request from 'supertest';
import { createSandboxHarness, primaryMap } from '../helpers/harness.js';

const json = (req, body) => req.set('content-type', 'application/json').send(JSON.stringify(body));

describe('request validation on every route', () => {
  test.each([
    ['GET /livez?verbose=1', (app) => request(app).get('/livez?verbose=1'), /query.verbose is not an accepted field.*Accepted query: \{\}/],
    ['GET /readyz?x=', (app) => request(app).get('/readyz?x='), /query.x is not an accepted field/],
    ['GET /v1/cluster?table=ycsb.usertable', (app) => request(app).get('/v1/cluster?table=ycsb.usertable'), /query.table is not an accepted field/],
    ['GET /v1/events?limit=0', (app) => request(app).get('/v1/events?limit=0'), /query.limit must be >= 1.*"limit": integer 1..500/],
    ['GET /v1/events?limit=10abc', (app) => request(app).get('/v1/events?limit=10abc'), /query.limit must be integer/],
    ['GET /v1/events?limit=1&limit=2', (app) => request(app).get('/v1/events?limit=1&limit=2'), /query.limit must be integer/],
    ['GET /v1/operations/a%20b', (app) => request(app).get('/v1/operations/a%20b'), /path.id must match pattern/],
    ['GET /v1/cluster with a JSON body', (app) => json(request(app).get('/v1/cluster'), { table: 'x' }), /invalid body: this route takes no body/],
    ['POST /v1/hooks/prestop with a body', (app) => json(request(app).post('/v1/hooks/prestop?pod=rethinkdb-1'), { pod: 'rethinkdb-1' }),
      /this route takes no body; its input is the query \{"pod": string matching .* \(required\), "dryRun": boolean\}/],
    ['POST /v1/hooks/poststart with a body', (app) => json(request(app).post('/v1/hooks/poststart?pod=rethinkdb-1'), [1]), /this route takes no body/],
    ['POST /v1/hooks/perfwarning?force=1', (app) => json(request(app).post('/v1/hooks/perfwarning?force=1'), { pod: 'rethinkdb-1' }), /query.force is not an accepted field/],
    ['POST /v1/actions/rebalance-primaries?dryRun=1', (app) => request(app).post('/v1/actions/rebalance-primaries?dryRun=1'), /query.dryRun must be boolean/],
    ['POST /v1/actions/rebalance-primaries?__proto__=x', (app) => request(app).post('/v1/actions/rebalance-primaries?__proto__=x'), /query.__proto__ is not an accepted field/],
    ['POST /v1/sandbox/servers/Bad-Name/crash', (app) => request(app).post('/v1/sandbox/servers/Bad-Name/crash'), /path.name must match pattern/],
    ['POST /v1/sandbox/pods/rethinkdb-1/cpu?cores=2', (app) => json(request(app).post('/v1/sandbox/pods/rethinkdb-1/cpu?cores=2'), { cores: 2 }), /query.cores is not an accepted field/],
    ['POST /v1/sandbox/scale with {"replicas":"5"}', (app) => json(request(app).post('/v1/sandbox/scale'), { replicas: '5' }), /body.replicas must be integer/],
    ['POST /v1/actions/move-primaries-from-server with a pod\'s name', (app) => json(request(app).post('/v1/actions/move-primaries-from-server'), { server: 'rethinkdb-1' }),
      /body.server must be a server name \(letters, digits and _\); "rethinkdb-1" looks like a pod's name: its server is rethinkdb_1/],
    ['POST /v1/actions/move-primaries-from-server with {"__proto__":…}', (app) => request(app).post('/v1/actions/move-primaries-from-server')
      .set('content-type', 'application/json').send('{"server":"rethinkdb_1","__proto__":{"admin":true}}'), /body.__proto__ is not an accepted field/],
  ])('when %s, then 400 naming what is wrong and nothing changes', async (_, send, message) => {
    const h = createSandboxHarness();
    const before = { events: h.kube.events(), pods: await h.kube.listRethinkDbPods(), scale: await h.kube.getStatefulSetScale() };
    const res = await send(h.app);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: 'BAD_REQUEST', message: expect.stringMatching(message), details: expect.objectContaining({ accepted: expect.any(String) }) });
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
    expect({ events: h.kube.events(), pods: await h.kube.listRethinkDbPods(), scale: await h.kube.getStatefulSetScale() }).toEqual(before);
    expect(h.operations.list()).toEqual([]);
    expect({}.admin).toBeUndefined();
  });

  test.each([
    ['GET /livez with no body', (app) => request(app).get('/livez')],
    ['GET /livez with an empty JSON object', (app) => json(request(app).get('/livez'), {})],
    ['GET /v1/events?limit=2', (app) => request(app).get('/v1/events?limit=2')],
    ['POST /v1/hooks/prestop?pod=rethinkdb-1&dryRun=true', (app) => request(app).post('/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true')],
  ])('when %s, then 200', async (_, send) => {
    const res = await send(createSandboxHarness().app);
    expect(res.status).toBe(200);
  });

  test('when a sandbox node does not exist, then 404 NODE_NOT_FOUND and nothing is crashed', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).post('/v1/sandbox/nodes/constructor/crash');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: 'NODE_NOT_FOUND', message: 'sandbox node "constructor" does not exist' });
    expect((await h.kube.listRethinkDbPods()).map((p) => p.name)).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2', 'rethinkdb-3']);
  });

  test('when ?limit=N, then at most N audit records, newest first', async () => {
    const h = createSandboxHarness();
    await request(h.app).post('/v1/actions/rebalance-primaries');
    await json(request(h.app).post('/v1/actions/move-primaries-from-server'), { server: 'rethinkdb_1' });
    const res = await request(h.app).get('/v1/events?limit=1');
    expect(res.body.events).toEqual([expect.objectContaining({ action: 'move-primaries-from-server' })]);
  });

  test('when a PRESTOP is a dry run, then the plan comes back and no primary moves', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).post('/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true');
    expect(res.body).toMatchObject({ pod: 'rethinkdb-1' });
    expect(await primaryMap(h.store)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
  });
});
