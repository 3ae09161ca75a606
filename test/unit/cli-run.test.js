// The CLI end to end without a network: the request each command makes, what it prints, and the exit code, with a
// fake fetch in place of the manager.

import { ACTION_ROUTES } from '../../src/routes/action-routes.js';
import { parseCommandLine } from '../../src/cli/arguments.js';
import { createCli } from '../../src/cli/cli.js';
import { ACTION_PATHS, exitCodeFor, requestFor } from '../../src/cli/requests.js';

// A fake manager: answers every request with `answer` (status, body as an object or raw text) and records what it got.
function fakeManager(answer) {
  const requests = [];
  async function fetch(url, init) {
    requests.push({ url, method: init.method, headers: init.headers, body: init.body === undefined ? undefined : JSON.parse(init.body) });
    if (typeof answer === 'function') return answer(url, init);
    const text = typeof answer.body === 'string' ? answer.body : JSON.stringify(answer.body);
    return new Response(text, { status: answer.status });
  }
  return { fetch, requests };
}

async function runCli(argv, { answer = { status: 200, body: {} }, env = {} } = {}) {
  const manager = fakeManager(answer);
  const out = [];
  const err = [];
  const cli = createCli({
    fetch: manager.fetch, out: (t) => out.push(t), err: (t) => err.push(t), version: '9.9.9',
  });
  const code = await cli.run(argv, env);
  return { code, stdout: out.join(''), stderr: err.join(''), requests: manager.requests };
}

describe('requestFor', () => {
  test.each([
    [['status'], { method: 'GET', path: '/v1/cluster' }],
    [['drain', 'rethinkdb_1', '--reason', 'kernel upgrade', '--deadline', '30'],
      { method: 'POST', path: '/v1/actions/move-primaries-from-server', body: { server: 'rethinkdb_1', reason: 'kernel upgrade', deadlineSeconds: 30 } }],
    [['release', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/release-server', body: { server: 'rethinkdb_1' } }],
    [['release', 'rethinkdb_1', '--no-rebalance'], { method: 'POST', path: '/v1/actions/release-server', body: { server: 'rethinkdb_1', rebalance: false } }],
    [['plan', 'drain', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/move-primaries-from-server?dryRun=true', body: { server: 'rethinkdb_1' } }],
    [['plan', 'release', 'rethinkdb_1'], { method: 'POST', path: '/v1/actions/release-server?dryRun=true', body: { server: 'rethinkdb_1' } }],
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
});

describe('exitCodeFor', () => {
  const drain = parseCommandLine(['drain', 'rethinkdb_1'], {});
  const plan = parseCommandLine(['plan', 'drain', 'rethinkdb_1'], {});
  const status = parseCommandLine(['status'], {});
  test.each([
    ['a read answered 200', status, 200, { servers: [] }, 0],
    ['a completed drain', drain, 200, { outcome: 'completed' }, 0],
    ['a drain with nothing to do', drain, 200, { outcome: 'nothing_to_do' }, 0],
    ['a plan', plan, 200, { outcome: 'planned', skipped: [{ reason: 'x' }] }, 0],
    ['a partial drain', drain, 200, { outcome: 'partial' }, 4],
    ['a drain that timed out', drain, 200, { outcome: 'timed_out' }, 4],
    ['a failed drain', drain, 200, { outcome: 'failed' }, 4],
    ['an action answer without an outcome', drain, 200, {}, 4],
    ['a 404', drain, 404, { error: 'SERVER_NOT_FOUND', message: 'no' }, 1],
    ['a 401', drain, 401, { error: 'UNAUTHENTICATED', message: 'no' }, 1],
    ['a 503', status, 503, { error: 'DATA_STORE_UNAVAILABLE', message: 'down' }, 1],
    ['a 504', drain, 504, { error: 'DEADLINE_EXCEEDED', message: 'late' }, 1],
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

  test('when the manager answers an error, then stderr has its code and message, stdout nothing, and the exit code is 1', async () => {
    const { code, stdout, stderr } = await runCli(['drain', 'nope'], { answer: { status: 404, body: { error: 'SERVER_NOT_FOUND', message: 'server "nope" is not in the cluster' } } });
    expect({ code, stdout, stderr }).toEqual({ code: 1, stdout: '', stderr: 'rethinkdb-manager: error: SERVER_NOT_FOUND (HTTP 404): server "nope" is not in the cluster\n' });
  });

  test('when the manager answers an error with --output json, then stdout still has its JSON as it answered', async () => {
    const body = '{"error":"UNAUTHENTICATED","message":"a bearer token is required"}';
    const { code, stdout, stderr } = await runCli(['drain', 'rethinkdb_1', '-o', 'json'], { answer: { status: 401, body } });
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
    const report = { action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: false, outcome: 'partial', changes: [], skipped: [{ table: 't', shard: 0, reason: 'last replica' }], notDone: [], durationMs: 3 };
    const { code, stdout, stderr } = await runCli(['drain', 'rethinkdb_1'], { answer: { status: 200, body: report } });
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
    [['frobnicate'], 2, '', /^rethinkdb-manager: unknown command "frobnicate".*\n\nUsage: rethinkdb-manager COMMAND/s],
    [['help'], 0, /^Usage: rethinkdb-manager COMMAND.*Exit codes:/s, ''],
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
