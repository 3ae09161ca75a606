// The CLI end to end without a network: the request each command makes, what it prints, and the exit code, with a
// fake fetch in place of the manager.

import { ACTION_ROUTES } from '../../src/routes/action-routes.js';
import { HOOK_ROUTES } from '../../src/routes/hook-routes.js';
import { ACTIONS, parseCommandLine } from '../../src/cli/arguments.js';
import { createCli } from '../../src/cli/cli.js';
import {
  ACTION_PATHS, PERF_WARNING_PATH, exitCodeFor, requestFor,
} from '../../src/cli/requests.js';

// A fake manager: answers every request with `answer` (status, body as an object or raw text), or, when `answer` is
// a function, with what it returns for (url, init); records what it got.
function fakeManager(answer) {
  const requests = [];
  async function fetch(url, init) {
    requests.push({ url, method: init.method, headers: init.headers, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    const reply = typeof answer === 'function' ? await answer(url, init) : answer;
    if (reply instanceof Response) return reply;
    const text = typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body);
    return new Response(text, { status: reply.status });
  }
  return { fetch, requests };
}

// A manager that answers by "METHOD /path" (the query included); a list of answers is given one per request, the last
// one repeated. GET /v1/cluster answers the cluster below unless the routes say otherwise.
function routes(table) {
  const served = new Map();
  return (url, init) => {
    const { pathname, search } = new URL(url);
    const key = `${init.method} ${pathname}${search}`;
    const entry = table[key] ?? (key === 'GET /v1/cluster' ? { status: 200, body: CLUSTER } : undefined);
    if (entry === undefined) return { status: 404, body: { error: 'NOT_FOUND', message: `the fake has no ${key}` } };
    if (!Array.isArray(entry)) return entry;
    const n = served.get(key) ?? 0;
    served.set(key, n + 1);
    return entry[Math.min(n, entry.length - 1)];
  };
}

// The servers as GET /v1/cluster lists them (src/routes/response-schemas.js ClusterView): each with its pod.
const server = (name, extra = {}) => ({
  name, id: `id-${name}`, connected: true, draining: false, primaries: 1, replicas: 3, hostname: name.replace('_', '-'), pod: name.replace('_', '-'), node: `node-${name.at(-1)}`, podBy: 'hostname', tags: ['default'], ...extra,
});
const CLUSTER = {
  backend: 'rethinkdb', servers: [server('rethinkdb_0'), server('rethinkdb_1'), server('rethinkdb_2')], tables: [], backfills: [], draining: [], runningOperations: [], perfWarnings: [],
  pods: ['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2'].map((pod, i) => ({ pod, node: `node-${i}`, hostname: pod, phase: 'Running', ready: true })),
};

async function runCli(argv, { answer = { status: 200, body: {} }, env = {}, pollIntervalMs = 2000 } = {}) {
  const manager = fakeManager(answer);
  const out = [];
  const err = [];
  const sleeps = [];
  const cli = createCli({
    fetch: manager.fetch, out: (t) => out.push(t), err: (t) => err.push(t), version: '9.9.9', sleep: async (ms) => { sleeps.push(ms); }, pollIntervalMs,
  });
  const code = await cli.run(argv, env);
  return {
    code, stdout: out.join(''), stderr: err.join(''), requests: manager.requests, sleeps,
  };
}

const report = (action, target, outcome, extra = {}) => ({
  action, target, dryRun: false, outcome, changes: [], skipped: [], notDone: [], durationMs: 3, ...extra,
});

describe('requestFor', () => {
  test.each([
    [['status'], { method: 'GET', path: '/v1/cluster' }],
    [['move-primaries-from-server', 'rethinkdb_1', '--reason', 'kernel upgrade', '--deadline', '30'],
      { method: 'POST', path: '/v1/actions/move-primaries-from-server', body: { server: 'rethinkdb_1', reason: 'kernel upgrade', deadlineSeconds: 30 } }],
    [['drain', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/move-primaries-from-server', body: { server: 'rethinkdb_1' } }],
    [['move-primaries-from-server', 'rethinkdb_1', '--dry-run'], { method: 'POST', path: '/v1/actions/move-primaries-from-server?dryRun=true', body: { server: 'rethinkdb_1' } }],
    [['release', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/release-server', body: { server: 'rethinkdb_1' } }],
    [['release', 'rethinkdb_1', '--no-rebalance'], { method: 'POST', path: '/v1/actions/release-server', body: { server: 'rethinkdb_1', rebalance: false } }],
    [['plan', 'drain', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/move-primaries-from-server?dryRun=true', body: { server: 'rethinkdb_1' } }],
    [['plan', 'release', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/release-server?dryRun=true', body: { server: 'rethinkdb_1' } }],
    [['migrate-replicas-off', 'rethinkdb_3', '--reason', 'disk', '--wait'], { method: 'POST', path: '/v1/actions/migrate-replicas-off', body: { server: 'rethinkdb_3', reason: 'disk' } }],
    [['plan', 'migrate-replicas-off', 'rethinkdb_3'], { method: 'POST', path: '/v1/actions/migrate-replicas-off?dryRun=true', body: { server: 'rethinkdb_3' } }],
    [['add-server', 'rethinkdb_3', '--table', 'app.users', '--grow'], { method: 'POST', path: '/v1/actions/add-server', body: { server: 'rethinkdb_3', tables: ['app.users'], grow: true } }],
    [['move-primaries-from-node', 'node-2', '--reason', 'kernel'], { method: 'POST', path: '/v1/actions/move-primaries-from-node', body: { node: 'node-2', reason: 'kernel' } }],
    [['plan', 'move-primaries-from-node', 'node-2'], { method: 'POST', path: '/v1/actions/move-primaries-from-node?dryRun=true', body: { node: 'node-2' } }],
    [['perf-warning', 'raise', 'rethinkdb-1', '--duration', '120', '--reason', 'batch'], { method: 'POST', path: '/v1/hooks/perfwarning', body: { pod: 'rethinkdb-1', durationSeconds: 120, reason: 'batch' } }],
    [['perf-warning', 'raise', '--node', 'node-2'], { method: 'POST', path: '/v1/hooks/perfwarning', body: { node: 'node-2' } }],
    [['perf-warning', 'end', 'rethinkdb-1'], { method: 'DELETE', path: '/v1/hooks/perfwarning?pod=rethinkdb-1' }],
    [['perf-warning', 'end', '--node', 'node-2'], { method: 'DELETE', path: '/v1/hooks/perfwarning?node=node-2' }],
    [['operations'], { method: 'GET', path: '/v1/operations' }],
    [['operations', 'a/b?c'], { method: 'GET', path: '/v1/operations/a%2Fb%3Fc' }],
    [['events'], { method: 'GET', path: '/v1/events' }],
    [['events', '--limit', '5'], { method: 'GET', path: '/v1/events?limit=5' }],
  ])('when the command line is %j, then the request is %j', (argv, expected) => {
    expect(requestFor(parseCommandLine(argv, {}))).toEqual(expected);
  });

  test.each(Object.entries(ACTION_PATHS))('when %s posts to %s, then the manager serves that action route', (_, path) => {
    expect(ACTION_ROUTES.map((r) => `/v1/actions/${r.path}`)).toContain(path);
  });

  test.each(Object.keys(ACTIONS))('when %s is given every flag it takes, then each body field is one its route accepts', (name) => {
    const route = ACTION_ROUTES.find((r) => `/v1/actions/${r.path}` === ACTION_PATHS[name]);
    const flags = ['--reason', 'r', '--deadline', '9', '--no-rebalance', '--table', 'a.b', '--grow'];
    const accepted = [];
    for (let i = 0; i < flags.length; i += 1) {
      const withValue = flags[i + 1] !== undefined && !flags[i + 1].startsWith('--');
      const flag = withValue ? flags.slice(i, i + 2) : [flags[i]];
      if (withValue) i += 1;
      try { parseCommandLine([name, 'x', ...flag], {}); accepted.push(...flag); } catch { /* a flag this action does not take */ }
    }
    const { body } = requestFor(parseCommandLine([name, 'x', ...accepted], {}));
    for (const field of Object.keys(body)) expect(Object.keys(route.schema.properties)).toContain(field);
    for (const field of route.schema.required) expect(body).toHaveProperty(field);
  });

  test('when a perf warning is raised or ended, then the request is the hook route the manager serves, with fields it accepts', () => {
    expect([HOOK_ROUTES.perfwarning.method, HOOK_ROUTES.perfwarning.path]).toEqual(['post', PERF_WARNING_PATH]);
    expect([HOOK_ROUTES.endPerfWarning.method, HOOK_ROUTES.endPerfWarning.path]).toEqual(['delete', PERF_WARNING_PATH]);
    const { body } = requestFor(parseCommandLine(['perf-warning', 'raise', 'p', '--duration', '5', '--reason', 'r'], {}));
    for (const field of Object.keys(body)) expect(Object.keys(HOOK_ROUTES.perfwarning.body.properties)).toContain(field);
    expect(Object.keys(HOOK_ROUTES.endPerfWarning.query.properties).sort()).toEqual(['node', 'pod']);
  });
});

describe('exitCodeFor', () => {
  const move = parseCommandLine(['move-primaries-from-server', 'rethinkdb_1'], {});
  const plan = parseCommandLine(['plan', 'drain', 'rethinkdb_1'], {});
  const migrate = parseCommandLine(['migrate-replicas-off', 'rethinkdb_1'], {});
  const status = parseCommandLine(['status'], {});
  const operation = parseCommandLine(['operations', 'op-1'], {});
  const operations = parseCommandLine(['operations'], {});
  const raise = parseCommandLine(['perf-warning', 'raise', 'rethinkdb-1'], {});
  const end = parseCommandLine(['perf-warning', 'end', '--node', 'node-1'], {});
  test.each([
    ['a read answered 200', status, 200, { servers: [] }, 0],
    ['a completed action', move, 200, { outcome: 'completed' }, 0],
    ['an action with nothing to do', move, 200, { outcome: 'nothing_to_do' }, 0],
    ['a plan', plan, 200, { outcome: 'planned', skipped: [{ reason: 'x' }] }, 0],
    ['a data move that started (202, no outcome yet)', migrate, 202, { action: 'migrate-replicas-off', operation: { id: 'op-1', status: 'running' } }, 0],
    ['a partial action', move, 200, { outcome: 'partial' }, 4],
    ['an action that timed out', move, 200, { outcome: 'timed_out' }, 4],
    ['a failed action', move, 200, { outcome: 'failed' }, 4],
    ['an action answer without an outcome', move, 200, {}, 4],
    ['a running operation', operation, 200, { id: 'op-1', status: 'running' }, 0],
    ['a succeeded operation', operation, 200, { id: 'op-1', status: 'succeeded' }, 0],
    ['a partial operation', operation, 200, { id: 'op-1', status: 'partial' }, 4],
    ['a failed operation', operation, 200, { id: 'op-1', status: 'failed' }, 4],
    ['an operation that timed out', operation, 200, { id: 'op-1', status: 'timed_out' }, 4],
    ['a list with partial operations in it', operations, 200, { operations: [{ id: 'op-1', status: 'partial' }] }, 0],
    ['a perf warning whose demotion completed', raise, 200, { pods: [{ pod: 'rethinkdb-1', outcome: 'completed' }] }, 0],
    ['a perf warning whose demotion was partial', raise, 200, { pods: [{ pod: 'rethinkdb-1', outcome: 'partial' }] }, 4],
    ['the end of a node\'s warnings, one restore waiting', end, 200, { node: 'node-1', pods: [{ pod: 'rethinkdb-1', restore: { action: 'wait' } }] }, 0],
    ['the end of a node\'s warnings, one restore failed', end, 200, { node: 'node-1', pods: [{ pod: 'rethinkdb-1', restore: { action: 'rebalance-primaries', outcome: 'failed' } }] }, 4],
    ['a 404', move, 404, { error: 'SERVER_NOT_FOUND', message: 'no' }, 1],
    ['a 401', move, 401, { error: 'UNAUTHENTICATED', message: 'no' }, 1],
    ['a 503', status, 503, { error: 'DATA_STORE_UNAVAILABLE', message: 'down' }, 1],
    ['a 504', move, 504, { error: 'DEADLINE_EXCEEDED', message: 'late' }, 1],
    ['a 200 that is not JSON', status, 200, null, 1],
  ])('when the answer is %s, then the exit code is the documented one', (_, parsed, httpStatus, body, code) => {
    expect(exitCodeFor(parsed, { status: httpStatus, body, text: JSON.stringify(body) })).toBe(code);
  });
});

describe('createCli', () => {
  test('when a token and a URL with a path are given, then the request carries the bearer token and keeps the path', async () => {
    const { code, requests } = await runCli(['events'], { env: { RETHINKDB_MANAGER_URL: 'http://proxy.example/manager/', RETHINKDB_MANAGER_TOKEN: 'tok' }, answer: { status: 200, body: { events: [] } } });
    expect(code).toBe(0);
    expect(requests).toEqual([expect.objectContaining({ url: 'http://proxy.example/manager/v1/events', method: 'GET', headers: expect.objectContaining({ authorization: 'Bearer tok' }) })]);
  });

  test('when no token is given, then no authorization header is sent', async () => {
    const { requests } = await runCli(['events'], { answer: { status: 200, body: { events: [] } } });
    expect(Object.keys(requests[0].headers)).not.toContain('authorization');
  });

  test('when the manager answers an action with an error, then stderr has its code and message, stdout nothing, and the exit code is 1', async () => {
    const answer = routes({ 'POST /v1/actions/move-primaries-from-server': { status: 409, body: { error: 'RECONFIGURATION_REJECTED', message: 'no other eligible replica' } } });
    const { code, stdout, stderr } = await runCli(['move-primaries-from-server', 'rethinkdb_1'], { answer });
    expect({ code, stdout, stderr }).toEqual({ code: 1, stdout: '', stderr: 'rethinkdb-manager: error: RECONFIGURATION_REJECTED (HTTP 409): no other eligible replica\n' });
  });

  test('when the manager answers an error with --output json, then stdout still has its JSON as it answered', async () => {
    const body = '{"error":"UNAUTHENTICATED","message":"a bearer token is required"}';
    const { code, stdout, stderr } = await runCli(['move-primaries-from-server', 'rethinkdb_1', '-o', 'json'], { answer: routes({ 'POST /v1/actions/move-primaries-from-server': { status: 401, body } }) });
    expect(code).toBe(1);
    expect(stdout).toBe(`${body}\n`);
    expect(stderr).toContain('UNAUTHENTICATED (HTTP 401)');
  });

  test('when something else answers with HTML, then the exit code is 1 and stderr quotes it', async () => {
    const { code, stderr } = await runCli(['status'], { answer: { status: 502, body: '<html><body>Bad Gateway</body></html>' } });
    expect(code).toBe(1);
    expect(stderr).toBe("rethinkdb-manager: error: HTTP 502, not the manager's error format: <html><body>Bad Gateway</body></html>\n");
  });

  test('when a 200 answer is not JSON, then the exit code is 1: the URL is probably not the manager', async () => {
    const { code, stderr } = await runCli(['status'], { answer: { status: 200, body: 'hello' } });
    expect(code).toBe(1);
    expect(stderr).toMatch(/not the manager's JSON \(is --url the manager\?\): hello/);
  });

  test('when an action answers partial, then its report is printed, stderr says so, and the exit code is 4', async () => {
    const partial = report('move-primaries-from-server', { server: 'rethinkdb_1' }, 'partial', { skipped: [{ table: 't', shard: 0, reason: 'last replica' }] });
    const { code, stdout, stderr } = await runCli(['move-primaries-from-server', 'rethinkdb_1'], { answer: routes({ 'POST /v1/actions/move-primaries-from-server': { status: 200, body: partial } }) });
    expect(code).toBe(4);
    expect(stdout).toBe('move-primaries-from-server server=rethinkdb_1: partial in 3 ms\nno changes\nskipped: t shard 0: last replica\n');
    expect(stderr).toBe('rethinkdb-manager: the action did not fully succeed: outcome partial\n');
  });

  test('when --output json, then stdout is the manager\'s answer byte for byte', async () => {
    const body = '{"operations":[],"extra":{"nested":[1,2]}}';
    const { code, stdout } = await runCli(['operations', '--output', 'json'], { answer: { status: 200, body } });
    expect(code).toBe(0);
    expect(stdout).toBe(`${body}\n`);
  });

  test('when the connection is refused, then the exit code is 3 and stderr names the URL and the cause', async () => {
    const refused = () => { throw new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }) }); };
    const { code, stderr } = await runCli(['status', '--url', 'http://127.0.0.1:1'], { answer: refused });
    expect(code).toBe(3);
    expect(stderr).toBe('rethinkdb-manager: cannot reach the manager at http://127.0.0.1:1/v1/cluster: ECONNREFUSED (connect ECONNREFUSED 127.0.0.1:1)\n');
  });

  test('when the manager does not answer within --timeout, then the request is abandoned and the exit code is 3', async () => {
    const never = (url, init) => new Promise((resolve, reject) => { init.signal.addEventListener('abort', () => reject(init.signal.reason)); });
    const { code, stderr } = await runCli(['status', '--timeout', '0.05'], { answer: never });
    expect(code).toBe(3);
    expect(stderr).toBe('rethinkdb-manager: the manager did not answer http://localhost:8080/v1/cluster within 0.05 s (--timeout)\n');
  });

  test.each([
    [['frobnicate'], 2, '', 'rethinkdb-manager: unknown command "frobnicate" (try --help)\n'],
    [[], 2, '', 'rethinkdb-manager: no command given (try --help)\n'],
    [['status', '--force'], 2, '', 'rethinkdb-manager: unknown flag "--force" (try --help)\n'],
    [['move-primaries-from-server'], 2, '', 'rethinkdb-manager: move-primaries-from-server needs SERVER; usage: move-primaries-from-server SERVER (try --help)\n'],
    [['help'], 0, /^Usage: rethinkdb-manager COMMAND.*Exit codes:/s, ''],
    [['--help'], 0, /^Usage: rethinkdb-manager COMMAND.*Exit codes:/s, ''],
    [['frobnicate', '--help'], 0, /^Usage: rethinkdb-manager COMMAND.*Exit codes:/s, ''],
    [['--version'], 0, 'rethinkdb-manager 9.9.9\n', ''],
  ])('when the command line is %j, then it exits %i without a request', async (argv, expectedCode, stdout, stderr) => {
    const result = await runCli(argv);
    expect(result.code).toBe(expectedCode);
    expect(result.requests).toEqual([]);
    for (const [actual, expected] of [[result.stdout, stdout], [result.stderr, stderr]]) {
      if (expected instanceof RegExp) expect(actual).toMatch(expected); else expect(actual).toBe(expected);
    }
  });
});

describe('SERVER and POD arguments', () => {
  const moved = report('move-primaries-from-server', { server: 'rethinkdb_1' }, 'completed');
  const moveAnswer = routes({ 'POST /v1/actions/move-primaries-from-server': { status: 200, body: moved } });

  test('when a pod is given where a server is taken, then GET /v1/cluster resolves it, stderr says to what, and the action gets the server', async () => {
    const { code, stdout, stderr, requests } = await runCli(['move-primaries-from-server', 'rethinkdb-1'], { answer: moveAnswer });
    expect(code).toBe(0);
    expect(requests.map((r) => `${r.method} ${new URL(r.url).pathname}`)).toEqual(['GET /v1/cluster', 'POST /v1/actions/move-primaries-from-server']);
    expect(requests[1].body).toEqual({ server: 'rethinkdb_1' });
    expect(stderr).toBe('rethinkdb-manager: pod rethinkdb-1 -> server rethinkdb_1\n');
    expect(stdout).toBe('move-primaries-from-server server=rethinkdb_1: completed in 3 ms\nno changes\n');
  });

  test('when a server is given, then it is checked against GET /v1/cluster and sent as it is, with nothing on stderr', async () => {
    const { code, stderr, requests } = await runCli(['move-primaries-from-server', 'rethinkdb_1'], { answer: moveAnswer });
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(requests.map((r) => r.body)).toEqual([undefined, { server: 'rethinkdb_1' }]);
  });

  test.each([
    ['release', ['release', 'rethinkdb-2'], 'POST /v1/actions/release-server', { server: 'rethinkdb_2' }],
    ['migrate-replicas-off', ['migrate-replicas-off', 'rethinkdb-2'], 'POST /v1/actions/migrate-replicas-off', { server: 'rethinkdb_2' }],
    ['add-server', ['add-server', 'rethinkdb-2'], 'POST /v1/actions/add-server', { server: 'rethinkdb_2' }],
    ['a plan', ['plan', 'release', 'rethinkdb-2'], 'POST /v1/actions/release-server?dryRun=true', { server: 'rethinkdb_2' }],
    ['--dry-run', ['add-server', 'rethinkdb-2', '--dry-run'], 'POST /v1/actions/add-server?dryRun=true', { server: 'rethinkdb_2' }],
  ])('when %s names a pod, then the request names its server', async (_, argv, route, body) => {
    const { stderr, requests } = await runCli(argv, { answer: routes({ [route]: { status: 200, body: { outcome: 'completed' } } }) });
    expect(stderr).toBe('rethinkdb-manager: pod rethinkdb-2 -> server rethinkdb_2\n');
    const { pathname, search } = new URL(requests[1].url);
    expect([`${requests[1].method} ${pathname}${search}`, requests[1].body]).toEqual([route, body]);
  });

  test.each([
    ['raise', ['perf-warning', 'raise', 'rethinkdb_1', '--duration', '60'], 'POST /v1/hooks/perfwarning', { pod: 'rethinkdb-1', durationSeconds: 60 }],
    ['end', ['perf-warning', 'end', 'rethinkdb_1'], 'DELETE /v1/hooks/perfwarning?pod=rethinkdb-1', undefined],
  ])('when perf-warning %s names a server, then the request names its pod, and stderr says so', async (_, argv, route, body) => {
    const { stderr, requests } = await runCli(argv, { answer: routes({ [route]: { status: 200, body: { pods: [] } } }) });
    expect(stderr).toBe('rethinkdb-manager: server rethinkdb_1 -> pod rethinkdb-1\n');
    const { pathname, search } = new URL(requests[1].url);
    expect([`${requests[1].method} ${pathname}${search}`, requests[1].body]).toEqual([route, body]);
  });

  test('when perf-warning names a node, then nothing is looked up', async () => {
    const { code, requests } = await runCli(['perf-warning', 'end', '--node', 'node-1'], { answer: routes({ 'DELETE /v1/hooks/perfwarning?node=node-1': { status: 200, body: { node: 'node-1', ended: true, reason: 'r', pods: [] } } }) });
    expect(code).toBe(0);
    expect(requests.map((r) => r.method)).toEqual(['DELETE']);
  });

  test('when the name is neither a server nor a pod, then no action is requested, stderr names the known ones, and the exit code is 1', async () => {
    const { code, stdout, stderr, requests } = await runCli(['move-primaries-from-server', 'rethinkdb_9'], { answer: moveAnswer });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(requests).toHaveLength(1);
    expect(stderr).toBe('rethinkdb-manager: error: SERVER_NOT_FOUND: "rethinkdb_9" is neither a server nor the pod of one; servers: rethinkdb_0, rethinkdb_1, rethinkdb_2; pods: rethinkdb-0, rethinkdb-1, rethinkdb-2\n');
  });

  test('when the cluster cannot be read, then the action is not requested and the exit code is 1', async () => {
    const answer = routes({ 'GET /v1/cluster': { status: 503, body: { error: 'DATA_STORE_UNAVAILABLE', message: 'RethinkDB is down' } } });
    const { code, stderr, requests } = await runCli(['release', 'rethinkdb-1'], { answer });
    expect(code).toBe(1);
    expect(requests).toHaveLength(1);
    expect(stderr).toBe('rethinkdb-manager: cannot look up server "rethinkdb-1": error: DATA_STORE_UNAVAILABLE (HTTP 503): RethinkDB is down\n');
  });

  test('when drain, the deprecated name, runs, then stderr has a one-line notice and it does what move-primaries-from-server does', async () => {
    const { code, stdout, stderr, requests } = await runCli(['drain', 'rethinkdb-1'], { answer: moveAnswer });
    expect(code).toBe(0);
    expect(stderr.split('\n')).toEqual([
      'rethinkdb-manager: "drain" is deprecated: it only moves primaries (kubectl drain evicts pods); use "move-primaries-from-server"',
      'rethinkdb-manager: pod rethinkdb-1 -> server rethinkdb_1',
      '',
    ]);
    expect(requests[1]).toMatchObject({ method: 'POST', url: 'http://localhost:8080/v1/actions/move-primaries-from-server', body: { server: 'rethinkdb_1' } });
    expect(stdout).toBe('move-primaries-from-server server=rethinkdb_1: completed in 3 ms\nno changes\n');
  });
});

describe('operations and --wait', () => {
  const op = (status, extra = {}) => ({
    id: 'op-1', kind: 'migrate-replicas-off', params: { server: 'rethinkdb_2' }, status, createdAt: '2026-01-02T03:04:05.000Z', finishedAt: status === 'running' ? null : '2026-01-02T03:05:05.000Z', steps: [], report: null, error: null, ...extra,
  });
  const started = { action: 'migrate-replicas-off', target: { server: 'rethinkdb_2' }, dryRun: false, operation: { id: 'op-1', status: 'running', href: '/v1/operations/op-1' } };

  test('when a data move starts without --wait, then the operation id is printed and the exit code is 0', async () => {
    const { code, stdout, requests } = await runCli(['migrate-replicas-off', 'rethinkdb_2'], { answer: routes({ 'POST /v1/actions/migrate-replicas-off': { status: 202, body: started } }) });
    expect(code).toBe(0);
    expect(stdout).toBe('migrate-replicas-off server=rethinkdb_2: started\noperation op-1: running (follow it with: rethinkdb-manager operations op-1 --wait)\n');
    expect(requests).toHaveLength(2);
  });

  test('when --wait, then the operation is polled until it finishes, then printed, and its partial status exits 4', async () => {
    const partial = op('partial', { report: report('migrate-replicas-off', { server: 'rethinkdb_2' }, 'partial', { notDone: [{ table: 'app.users', shard: 1, reason: 'backfill failed' }] }) });
    const answer = routes({
      'POST /v1/actions/migrate-replicas-off': { status: 202, body: started },
      'GET /v1/operations/op-1': [{ status: 200, body: op('running') }, { status: 200, body: op('running') }, { status: 200, body: partial }],
    });
    const { code, stdout, stderr, requests, sleeps } = await runCli(['migrate-replicas-off', 'rethinkdb_2', '--wait'], { answer, pollIntervalMs: 5 });
    expect(code).toBe(4);
    expect(requests.map((r) => `${r.method} ${new URL(r.url).pathname}`)).toEqual([
      'GET /v1/cluster', 'POST /v1/actions/migrate-replicas-off', 'GET /v1/operations/op-1', 'GET /v1/operations/op-1', 'GET /v1/operations/op-1',
    ]);
    expect(sleeps).toEqual([5, 5]);
    expect(stdout).toBe([
      'migrate-replicas-off server=rethinkdb_2: started',
      'operation op-1: running (follow it with: rethinkdb-manager operations op-1 --wait)',
      '',
      'operation op-1: migrate-replicas-off server=rethinkdb_2, partial',
      'created 2026-01-02T03:04:05Z, finished 2026-01-02T03:05:05Z',
      '',
      'migrate-replicas-off server=rethinkdb_2: partial in 3 ms',
      'no changes',
      'not done: app.users shard 1: backfill failed',
      '',
    ].join('\n'));
    expect(stderr).toBe([
      'rethinkdb-manager: waiting for operation op-1 to finish (interrupting stops the wait, not the operation)',
      'rethinkdb-manager: operation op-1 did not fully succeed: status partial',
      '',
    ].join('\n'));
  });

  test('when --wait with --output json, then stdout is only the finished operation\'s JSON and a success exits 0', async () => {
    const done = op('succeeded', { kind: 'add-server' });
    const answer = routes({
      'POST /v1/actions/add-server': { status: 202, body: { ...started, action: 'add-server' } },
      'GET /v1/operations/op-1': [{ status: 200, body: op('running') }, { status: 200, body: done }],
    });
    const { code, stdout } = await runCli(['add-server', 'rethinkdb_2', '--wait', '-o', 'json'], { answer });
    expect(code).toBe(0);
    expect(JSON.parse(stdout)).toEqual(done);
  });

  test('when the operation disappears while waited for (the manager restarted), then the exit code is 1', async () => {
    const answer = routes({
      'POST /v1/actions/migrate-replicas-off': { status: 202, body: started },
      'GET /v1/operations/op-1': { status: 404, body: { error: 'OPERATION_NOT_FOUND', message: 'operation "op-1" does not exist' } },
    });
    const { code, stderr } = await runCli(['migrate-replicas-off', 'rethinkdb_2', '--wait'], { answer });
    expect(code).toBe(1);
    expect(stderr).toMatch(/error: OPERATION_NOT_FOUND \(HTTP 404\): operation "op-1" does not exist\n$/);
  });

  test.each([
    ['succeeded', 0], ['running', 0], ['partial', 4], ['failed', 4], ['timed_out', 4],
  ])('when operations ID shows an operation %s, then the exit code is %i', async (status, expected) => {
    const { code, stdout, stderr } = await runCli(['operations', 'op-1'], { answer: { status: 200, body: op(status) } });
    expect(code).toBe(expected);
    expect(stdout.split('\n')[0]).toBe(`operation op-1: migrate-replicas-off server=rethinkdb_2, ${status}`);
    expect(stderr).toBe(expected === 4 ? `rethinkdb-manager: operation op-1 did not fully succeed: status ${status}\n` : '');
  });

  test('when operations ID --wait follows a running operation, then only the finished operation is printed', async () => {
    const answer = routes({ 'GET /v1/operations/op-1': [{ status: 200, body: op('running') }, { status: 200, body: op('succeeded') }] });
    const { code, stdout, requests } = await runCli(['operations', 'op-1', '--wait'], { answer });
    expect(code).toBe(0);
    expect(requests).toHaveLength(2);
    expect(stdout).toBe('operation op-1: migrate-replicas-off server=rethinkdb_2, succeeded\ncreated 2026-01-02T03:04:05Z, finished 2026-01-02T03:05:05Z\n');
  });

  test('when the operations are listed, then the newest is first', async () => {
    const list = { operations: [{ ...op('succeeded'), id: 'older' }, { ...op('running'), id: 'newer', createdAt: '2026-01-02T04:00:00.000Z' }] };
    const { code, stdout } = await runCli(['operations'], { answer: { status: 200, body: list } });
    expect(code).toBe(0);
    expect(stdout.split('\n').slice(1, 3).map((l) => l.split(' ')[0])).toEqual(['newer', 'older']);
  });
});

describe('perf warnings and node actions', () => {
  test('when a warning is raised on a pod whose demotion is partial, then the answer is printed and the exit code is 4', async () => {
    const body = {
      event: 'PERFWARNING', target: { pod: 'rethinkdb-1' }, source: 'operator', decision: { reason: 'short perf warning', actions: ['move-primaries-from-server'] },
      pods: [{ pod: 'rethinkdb-1', server: 'rethinkdb_1', outcome: 'partial', demotion: report('move-primaries-from-server', { server: 'rethinkdb_1' }, 'partial'), raftLeadership: null, migration: null, expiresAt: null }],
    };
    const { code, stdout, stderr } = await runCli(['perf-warning', 'raise', 'rethinkdb-1'], { answer: routes({ 'POST /v1/hooks/perfwarning': { status: 200, body } }) });
    expect(code).toBe(4);
    expect(stdout.split('\n')[0]).toBe('perf warning raised on pod=rethinkdb-1 by operator: short perf warning');
    expect(stderr).toBe("rethinkdb-manager: the perf warning's demotion did not fully succeed: outcome partial (pod rethinkdb-1)\n");
  });

  test('when no warning is active for the pod, then the manager\'s 404 is exit 1', async () => {
    const answer = routes({ 'DELETE /v1/hooks/perfwarning?pod=rethinkdb-1': { status: 404, body: { error: 'NOT_FOUND', message: 'no active perf warning for pod rethinkdb-1' } } });
    const { code, stderr } = await runCli(['perf-warning', 'end', 'rethinkdb-1'], { answer });
    expect(code).toBe(1);
    expect(stderr).toBe('rethinkdb-manager: error: NOT_FOUND (HTTP 404): no active perf warning for pod rethinkdb-1\n');
  });

  test('when the primaries of a node are moved, then the node is sent as given and the report printed', async () => {
    const body = report('move-primaries-from-node', { node: 'node-1', pods: ['rethinkdb-1'] }, 'completed', { unmappedPods: [] });
    const { code, stdout, requests } = await runCli(['move-primaries-from-node', 'node-1', '--reason', 'kernel'], { answer: routes({ 'POST /v1/actions/move-primaries-from-node': { status: 200, body } }) });
    expect(code).toBe(0);
    expect(requests.map((r) => [r.method, r.body])).toEqual([['POST', { node: 'node-1', reason: 'kernel' }]]);
    expect(stdout).toBe('move-primaries-from-node node=node-1 pods=rethinkdb-1: completed in 3 ms\nno changes\n');
  });
});
