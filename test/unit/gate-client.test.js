// The manager's client of the query gates (src/gates/gate-client.js) against the gate's real HTTP port
// (gate/src/admin.js over a gate/src/gate.js): holds taken and ended at every gate, and a gate that refuses or does
// not answer reported, never thrown.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createAdminHandler } from '../../gate/src/admin.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';
import { createGateClient } from '../../src/gates/gate-client.js';
import { podEndpoints } from '../../src/policy/query-holds.js';

const logger = pino({ level: 'silent' });
const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };
const servers = [];
afterAll(() => Promise.all(servers.map((s) => { s.closeAllConnections?.(); return new Promise((resolve) => { s.close(resolve); }); })));

function tokenFile(content) {
  const path = join(mkdtempSync(join(tmpdir(), 'gate-client-')), 'token');
  writeFileSync(path, content);
  return path;
}

async function listen(handler) {
  const server = createServer(handler);
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  servers.push(server);
  return `127.0.0.1:${server.address().port}`;
}

async function startGate(token) {
  const metrics = createGateMetrics();
  const gate = createGate({ config: { hold: { maxMs: 5000 } }, metrics, clock, logger });
  return { gate, endpoint: await listen(createAdminHandler({ gate, metrics, tokenFile: tokenFile(token), logger })) };
}

describe('the gate client', () => {
  test('when two gates share the token, then a hold is taken at both and released at both', async () => {
    const [one, two] = [await startGate('secret-1'), await startGate('secret-1')];
    const client = createGateClient({ tokenFile: tokenFile('secret-1\n'), listEndpoints: async () => [one.endpoint, two.endpoint] });
    const taken = await client.hold(['ycsb.usertable'], { ttlMs: 2000, drainMs: 100 });
    expect(taken.failed).toEqual([]);
    expect(taken.held.map((h) => h.endpoint)).toEqual([one.endpoint, two.endpoint]);
    expect(one.gate.holds()).toHaveLength(1);
    expect(await client.release(taken.held)).toEqual([]);
    expect([one.gate.holds(), two.gate.holds()]).toEqual([[], []]);
    // A hold the gate already ended (expired) is no failure.
    expect(await client.release(taken.held)).toEqual([]);
  });

  test('when one gate has another token and one does not answer, then both are reported and the third is held', async () => {
    const good = await startGate('secret-1');
    const other = await startGate('secret-2');
    const silent = await listen(() => { /* never answers */ });
    const client = createGateClient({ tokenFile: tokenFile('secret-1'), listEndpoints: async () => [good.endpoint, other.endpoint, silent], timeoutMs: 200 });
    const started = Date.now();
    const taken = await client.hold(['ycsb.usertable'], { ttlMs: 2000, drainMs: 50 });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(taken.held.map((h) => h.endpoint)).toEqual([good.endpoint]);
    expect(taken.failed).toEqual([
      { endpoint: other.endpoint, error: expect.stringMatching(/^401/) },
      { endpoint: silent, error: 'no answer within 250 ms' },
    ]);
    expect(other.gate.holds()).toEqual([]);
    await client.release(taken.held);
  });

  test('when the token file is missing, empty, or the gates cannot be listed, then nothing is held and it says why', async () => {
    // No token file (the optional Secret not created): holds are off, nothing failed.
    const missing = createGateClient({ tokenFile: '/nonexistent/token', listEndpoints: async () => ['127.0.0.1:1'] });
    expect(await missing.hold(['a.b'], { ttlMs: 100, drainMs: 0 })).toEqual({ held: [], failed: [], off: 'no token at /nonexistent/token' });
    const empty = createGateClient({ tokenFile: tokenFile(''), listEndpoints: async () => ['127.0.0.1:1'] });
    expect((await empty.hold(['a.b'], { ttlMs: 100, drainMs: 0 })).failed[0]).toMatchObject({ endpoint: null, error: expect.stringMatching(/is empty/) });
    const unlisted = createGateClient({ tokenFile: tokenFile('x'), listEndpoints: async () => { throw new Error('Kubernetes API did not answer'); } });
    expect(await unlisted.hold(['a.b'], { ttlMs: 100, drainMs: 0 })).toEqual({ held: [], failed: [{ endpoint: null, error: 'Kubernetes API did not answer' }] });
  });

  test('when the gates are checked, then each is asked for its holds (nothing taken), and a refused token, a silent gate or no token file is reported', async () => {
    const good = await startGate('secret-1');
    const other = await startGate('secret-2');
    const silent = await listen(() => { /* never answers */ });
    const client = createGateClient({ tokenFile: tokenFile('secret-1'), listEndpoints: async () => [good.endpoint, other.endpoint, silent], timeoutMs: 200 });
    expect(await client.check()).toEqual({
      reached: [good.endpoint],
      failed: [{ endpoint: other.endpoint, error: expect.stringMatching(/^401/) }, { endpoint: silent, error: 'no answer within 200 ms' }],
    });
    expect([good.gate.holds(), other.gate.holds()]).toEqual([[], []]);
    expect(await createGateClient({ tokenFile: '/nonexistent/token', listEndpoints: async () => [good.endpoint] }).check())
      .toEqual({ reached: [], failed: [], off: 'no token at /nonexistent/token' });
    const unlisted = createGateClient({ tokenFile: tokenFile('x'), listEndpoints: async () => { throw new Error('Kubernetes API did not answer'); } });
    expect(await unlisted.check()).toEqual({ reached: [], failed: [{ endpoint: null, error: 'Kubernetes API did not answer' }] });
  });

  test('the gates of pods: running with an IP, being deleted too (their gates still drain), IPv6 in brackets', () => {
    expect(podEndpoints([
      { phase: 'Running', podIp: '198.18.4.7', deleting: false },
      { phase: 'Running', podIp: 'fd00::7', deleting: false },
      { phase: 'Pending', podIp: null, deleting: false },
      { phase: 'Running', podIp: '198.18.4.8', deleting: true },
      { phase: 'Succeeded', podIp: '198.18.4.9', deleting: false },
    ], 9180)).toEqual(['198.18.4.7:9180', '[fd00::7]:9180', '198.18.4.8:9180']);
  });

  test('when holds follow each other, then the gates are listed once per listTtlMs, and a listing that hangs is given up', async () => {
    const gate = await startGate('secret-1');
    let listings = 0;
    let now = 0;
    const client = createGateClient({
      tokenFile: tokenFile('secret-1'), listEndpoints: async () => { listings += 1; return [gate.endpoint]; }, clock: { now: () => now }, listTtlMs: 5000,
    });
    for (const at of [0, 1000, 4999, 5000]) {
      now = at;
      await client.release((await client.hold(['a.b'], { ttlMs: 2000, drainMs: 0 })).held);
    }
    expect(listings).toBe(2);
    const hanging = createGateClient({ tokenFile: tokenFile('x'), listEndpoints: () => new Promise(() => {}), listTimeoutMs: 100 });
    expect(await hanging.hold(['a.b'], { ttlMs: 2000, drainMs: 0 })).toEqual({ held: [], failed: [{ endpoint: null, error: 'the gates were not listed within 100 ms' }] });
  });
});
