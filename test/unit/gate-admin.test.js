// The query gate's HTTP port (gate/src/admin.js): probes and metrics open; the manager's holds only with the shared
// token, and a request answered 4xx takes no hold.

import { serveHoldPort, writeTokenFile } from '../helpers/gate-hold-port.js';

const TOKEN = 'k3Vq9-shared-hold-token';
const served = [];
afterAll(() => Promise.all(served.map((s) => s.close())));

async function startAdmin({ tokenFile }) {
  const port = await serveHoldPort({ tokenFile });
  served.push(port);
  const base = `http://127.0.0.1:${port.port}`;
  const call = async (method, path, { body, token = TOKEN, raw } = {}) => {
    const res = await fetch(`${base}${path}`, {
      method, headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* text */ }
    return { status: res.status, json, text };
  };
  return { gate: port.gate, call };
}

const tokenFile = (content = `${TOKEN}\n`) => writeTokenFile(content);

describe('the gate\'s HTTP port', () => {
  test('when the token is right, then a hold is taken, listed and released, and a second release is 404', async () => {
    const { call, gate } = await startAdmin({ tokenFile: tokenFile() });
    const taken = await call('POST', '/v1/holds', { body: { tables: ['ycsb.usertable'], ttlMs: 2000, drainMs: 100 } });
    expect(taken.status).toBe(200);
    expect(taken.json).toMatchObject({ tables: ['ycsb.usertable'], ttlMs: 2000, inFlight: 0 });
    expect((await call('GET', '/v1/holds')).json).toMatchObject({ holds: [{ id: taken.json.id }], heldQueries: 0 });
    expect((await call('DELETE', `/v1/holds/${taken.json.id}`)).json).toMatchObject({ id: taken.json.id, how: 'released' });
    expect((await call('DELETE', `/v1/holds/${taken.json.id}`)).status).toBe(404);
    expect(gate.holds()).toEqual([]);
  });

  test.each([
    ['no token', { token: null }, 401],
    ['a wrong token', { token: 'not-it' }, 401],
    ['no tables', { body: { tables: [], ttlMs: 100 } }, 400],
    ['a table name that is not db.table', { body: { tables: ['usertable'], ttlMs: 100 } }, 400],
    ['a ttl over GATE_HOLD_MAX_MS', { body: { tables: ['a.b'], ttlMs: 60000 } }, 400],
    ['a drain as long as the ttl (it would answer for a hold already over)', { body: { tables: ['a.b'], ttlMs: 100, drainMs: 100 } }, 400],
    ['a body that is not JSON', { raw: '{"tables":' }, 400],
    ['a body over 64 KiB', { raw: JSON.stringify({ tables: ['a.b'], ttlMs: 100, pad: 'x'.repeat(70000) }) }, 413],
  ])('when a hold is asked with %s, then it is refused and nothing is held', async (_, options, status) => {
    const { call, gate } = await startAdmin({ tokenFile: tokenFile() });
    const answer = await call('POST', '/v1/holds', { body: { tables: ['ycsb.usertable'], ttlMs: 100 }, ...options });
    expect(answer.status).toBe(status);
    expect(answer.json.error).toEqual(expect.any(String));
    expect(gate.holds()).toEqual([]);
  });

  test('when a method the route has not is used, then 405 says which it has; a stopping gate refuses a hold with 503', async () => {
    const { call, gate } = await startAdmin({ tokenFile: tokenFile() });
    const put = await call('PUT', '/v1/holds', { body: {} });
    expect(put.status).toBe(405);
    await gate.stop(0);
    const refused = await call('POST', '/v1/holds', { body: { tables: ['a.b'], ttlMs: 100 } });
    expect(refused).toMatchObject({ status: 503, json: { error: 'the gate is stopping' } });
  });

  test('when no token file is configured, then holds are off (404) and the probes and metrics still answer', async () => {
    const { call } = await startAdmin({ tokenFile: undefined });
    const answer = await call('POST', '/v1/holds', { body: { tables: ['a.b'], ttlMs: 100 } });
    expect(answer.status).toBe(404);
    expect(answer.json.error).toMatch(/GATE_HOLD_TOKEN_FILE/);
    expect((await call('GET', '/livez', { token: null })).status).toBe(200);
    expect((await call('GET', '/readyz', { token: null })).status).toBe(503); // the gate was never started
    expect((await call('GET', '/metrics', { token: null })).text).toMatch(/rethinkdb_gate_holds_total/);
  });

  test('when the token file is empty or missing, then a hold is 503, not taken', async () => {
    const empty = await startAdmin({ tokenFile: tokenFile('') });
    expect((await empty.call('POST', '/v1/holds', { body: { tables: ['a.b'], ttlMs: 100 } })).status).toBe(503);
    const missing = await startAdmin({ tokenFile: '/nonexistent/hold-token' });
    expect((await missing.call('POST', '/v1/holds', { body: { tables: ['a.b'], ttlMs: 100 } })).status).toBe(503);
    expect(missing.gate.holds()).toEqual([]);
  });
});
