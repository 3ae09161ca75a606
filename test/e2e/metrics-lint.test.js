// /metrics of the real entry point (node src/server.js on the sandbox, process metrics on, after some traffic) as
// Prometheus's own linter reads it: `promtool check metrics` (Debian's prometheus package; .ci/run installs it).
// Fails, never skips, without promtool.

import { spawn, spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { freeLoopbackPorts } from '../helpers/processes.js';
import { VERSION } from '../../src/lib/version.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const PROMTOOL = process.env.PROMTOOL_BIN ?? 'promtool';

let child;
let base;

beforeAll(async () => {
  const [port] = await freeLoopbackPorts(1);
  base = `http://127.0.0.1:${port}`;
  child = spawn(process.execPath, ['src/server.js'], {
    cwd: root, env: { PATH: process.env.PATH, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'warn' }, stdio: 'ignore',
  });
  for (let i = 0; i < 200; i += 1) {
    const ready = await fetch(`${base}/readyz`).then((r) => r.ok).catch(() => false);
    if (ready) return;
    await new Promise((res) => { setTimeout(res, 50); });
  }
  throw new Error('node src/server.js did not become ready');
}, 20000);

afterAll(() => child?.kill('SIGKILL'));

const post = (path, body) => fetch(`${base}${path}`, { method: 'POST', ...(body ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}) });

test('when the manager has served hooks and actions, then promtool check metrics finds nothing to complain about, and build_info carries the version', async () => {
  expect((await post('/v1/hooks/prestop?pod=rethinkdb-1')).status).toBe(200);
  expect((await post('/v1/hooks/poststart?pod=rethinkdb-1')).status).toBe(202);
  expect((await post('/v1/actions/rebalance-primaries', {})).status).toBe(200);
  expect((await post('/v1/actions/move-primaries-from-server', { server: 'rethinkdb_9' })).status).toBe(404);
  const text = await (await fetch(`${base}/metrics`)).text();
  const lint = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' });
  if (lint.error) throw new Error(`${PROMTOOL} is needed (apt-get install prometheus; .ci/run installs it): ${lint.error.message}`);
  expect({ status: lint.status, complaints: `${lint.stdout}${lint.stderr}`.trim() }).toEqual({ status: 0, complaints: '' });
  expect(text).toContain(`rethinkdb_manager_build_info{version="${VERSION}",node_version="${process.version}"} 1`);
  expect(text).toMatch(/^rethinkdb_manager_nodejs_active_handles\{/m);
  expect(text).not.toMatch(/_active_\w+_total/);
  expect(await (await fetch(`${base}/livez`)).json()).toEqual({ status: 'ok', version: VERSION });
});
