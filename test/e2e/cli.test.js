// The command-line client as an operator runs it: `node bin/rethinkdb-manager.js` as a child process against a real
// manager process (node src/server.js) on the sandbox, checked against what the manager's API says afterwards.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startManagerProcess } from '../helpers/manager-process.js';
import { freeLoopbackPorts } from '../helpers/processes.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

// The CLI with only PATH and `env`: nothing from the test's own environment (a RETHINKDB_MANAGER_TOKEN) leaks in.
function cli(args, env = {}) {
  const result = spawnSync(process.execPath, [join(root, 'bin', 'rethinkdb-manager.js'), ...args], {
    cwd: root, env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', timeout: 30000,
  });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

// The row of a server in `status`'s servers table, split into its columns.
function serverRow(stdout, name) {
  const line = stdout.split('\n').find((l) => l.startsWith(`${name} `));
  return line?.split(/ {2,}/);
}

describe('rethinkdb-manager against the sandbox (AUTH_MODE=none)', () => {
  let manager;
  let run;

  beforeAll(async () => {
    manager = await startManagerProcess({ name: 'cli-e2e', env: { AUTH_MODE: 'none', LOG_LEVEL: 'warn' } });
    run = (args) => cli(args, { RETHINKDB_MANAGER_URL: manager.url });
  });

  afterAll(async () => {
    await manager?.kill('SIGTERM');
  });

  async function serversFromApi() {
    const { body } = await manager.json('/v1/cluster');
    return Object.fromEntries(body.servers.map((s) => [s.name, { primaries: s.primaries, draining: s.draining }]));
  }

  test('when status runs, then it shows the shard map of ycsb.usertable and the 4 servers, and exits 0', () => {
    const { code, stdout, stderr } = run(['status']);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toContain('SANDBOX');
    expect(stdout).toContain('ycsb.usertable: ready for writes, ready for reads, all replicas ready');
    expect(stdout).toMatch(/^SHARD +PRIMARY +ACTING +REPLICAS +READY$/m);
    expect(stdout.split('\n').filter((l) => /^[0-3] +rethinkdb_\d +rethinkdb_\d +rethinkdb_\d, rethinkdb_\d, rethinkdb_\d +3\/3$/.test(l))).toHaveLength(4);
    for (const name of ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']) {
      expect(serverRow(stdout, name)).toEqual([name, 'yes', 'primary', '1', '3', name.replace('_', '-'), `node-${name.at(-1)}`, 'no']);
    }
  });

  test('when plan move-primaries-from-server runs, then it prints the plan and nothing changes', async () => {
    const before = await serversFromApi();
    const { code, stdout } = run(['plan', 'move-primaries-from-server', 'rethinkdb_1']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^move-primaries-from-server server=rethinkdb_1: planned \(dry run: nothing changed\)$/m);
    expect(stdout).toMatch(/^ycsb\.usertable +1 +primary +rethinkdb_1 +rethinkdb_\d$/m);
    expect(await serversFromApi()).toEqual(before);
  });

  test('when move-primaries-from-server runs on a pod\'s name, then it says which server that is, its report is printed, and status shows the server draining with 0 primaries', async () => {
    const drained = run(['move-primaries-from-server', 'rethinkdb-1', '--reason', 'kernel upgrade']);
    expect(drained.code).toBe(0);
    expect(drained.stderr).toBe('rethinkdb-manager: pod rethinkdb-1 -> server rethinkdb_1\n');
    expect(drained.stdout).toMatch(/^move-primaries-from-server server=rethinkdb_1: completed in \d+ ms$/m);
    const { stdout } = run(['status']);
    const row = serverRow(stdout, 'rethinkdb_1');
    expect(row.slice(0, 5)).toEqual(['rethinkdb_1', 'yes', 'replica', '0', '3']);
    expect(row.at(-1)).toMatch(/^yes: kernel upgrade \(since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)$/);
    expect((await serversFromApi()).rethinkdb_1).toEqual({ primaries: 0, draining: true });
  });

  test('when events runs after the drain, then the drain is the newest record, with its reason', () => {
    const { code, stdout } = run(['events', '--limit', '1']);
    expect(code).toBe(0);
    expect(stdout.split('\n')[1]).toMatch(/ +anonymous +move-primaries-from-server +server=rethinkdb_1 +completed +kernel upgrade$/);
  });

  test('when release runs, then the server is no longer draining and gets a primary back', async () => {
    const { code, stdout } = run(['release', 'rethinkdb_1']);
    expect(code).toBe(0);
    expect(stdout).toMatch(/^release-server server=rethinkdb_1: completed \(was draining\)$/m);
    expect(stdout).toMatch(/^rebalance-primaries: completed in \d+ ms$/m);
    expect((await serversFromApi()).rethinkdb_1).toEqual({ primaries: 1, draining: false });
  });

  test('when --output json, then stdout is the manager\'s JSON', () => {
    const { code, stdout } = run(['status', '--output', 'json']);
    expect(code).toBe(0);
    const body = JSON.parse(stdout);
    expect(body.backend).toBe('sandbox');
    expect(body.servers.map((s) => s.name)).toEqual(['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']);
    expect(body.tables.map((t) => t.table)).toEqual(['ycsb.usertable']);
  });

  test('when operations runs, then it lists them (none yet), and an unknown id is exit 1 with OPERATION_NOT_FOUND', () => {
    expect(run(['operations'])).toEqual({ code: 0, stdout: 'no operations (they are kept in memory: a restart of the manager forgets them)\n', stderr: '' });
    const unknown = run(['operations', 'no-such-op']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/^rethinkdb-manager: error: OPERATION_NOT_FOUND \(HTTP 404\): operation "no-such-op" does not exist/);
  });

  test('when the server is unknown, then the exit code is 1 and stderr names what it knows; the old name drain still works, with a notice', () => {
    const { code, stdout, stderr } = run(['move-primaries-from-server', 'rethinkdb_9']);
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr).toMatch(/SERVER_NOT_FOUND.*"rethinkdb_9".*rethinkdb_0, rethinkdb_1, rethinkdb_2, rethinkdb_3/);
    const old = run(['plan', 'drain', 'rethinkdb_2']);
    expect(old.code).toBe(0);
    expect(old.stderr).toMatch(/drain.*move-primaries-from-server/);
  });

  test('when the command line is wrong, then the exit code is 2 and one line says why, with a hint', () => {
    for (const args of [['move-primaries-from-server'], ['status', '--force'], ['undrain', 'rethinkdb_1']]) {
      const { code, stdout, stderr } = run(args);
      expect({ args, code, stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(stderr).toMatch(/^rethinkdb-manager: [^\n]*\(try --help\)\n$/);
    }
  });

  test('when nothing listens at the URL, then the exit code is 3', async () => {
    const [port] = await freeLoopbackPorts(1);
    const { code, stderr } = cli(['status', '--url', `http://127.0.0.1:${port}`]);
    expect(code).toBe(3);
    expect(stderr).toBe(`rethinkdb-manager: cannot reach the manager at http://127.0.0.1:${port}/v1/cluster: ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:${port})\n`);
  });
});

describe('rethinkdb-manager against a manager with a static token (AUTH_MODE=static)', () => {
  const token = 'cli-e2e-0123456789abcdef0123456789abcdef';
  let dir;
  let manager;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cli-e2e-'));
    writeFileSync(join(dir, 'token'), `${token}\n`, { mode: 0o600 });
    manager = await startManagerProcess({ name: 'cli-e2e-auth', env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: join(dir, 'token'), LOG_LEVEL: 'warn' } });
  });

  afterAll(async () => {
    await manager?.kill('SIGTERM');
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('when no token or a wrong one is given, then move-primaries-from-server exits 1 with UNAUTHENTICATED (401) and nothing is drained', async () => {
    for (const env of [{}, { RETHINKDB_MANAGER_TOKEN: `${token.slice(0, -1)}X` }]) {
      const { code, stderr } = cli(['move-primaries-from-server', 'rethinkdb_1'], { RETHINKDB_MANAGER_URL: manager.url, ...env });
      expect(code).toBe(1);
      expect(stderr).toMatch(/^rethinkdb-manager: error: UNAUTHENTICATED \(HTTP 401\): /);
    }
    const { body } = await manager.json('/v1/cluster');
    expect(body.servers.find((s) => s.name === 'rethinkdb_1')).toMatchObject({ primaries: 1, draining: false });
  });

  test('when the right token is given, by variable or by flag, then plan and move-primaries-from-server succeed', () => {
    const planned = cli(['plan', 'move-primaries-from-server', 'rethinkdb_1'], { RETHINKDB_MANAGER_URL: manager.url, RETHINKDB_MANAGER_TOKEN: token });
    expect(planned.code).toBe(0);
    const drained = cli(['move-primaries-from-server', 'rethinkdb_1', '--url', manager.url, '--token', token]);
    expect(drained.code).toBe(0);
    expect(drained.stdout).toMatch(/^move-primaries-from-server server=rethinkdb_1: completed in \d+ ms$/m);
  });
});
