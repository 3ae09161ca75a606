// The RethinkDB pods' scripts, run as the container would run them (with stand-ins for curl, rethinkdb,
// hostname and getent): the hooks call routes that exist in the app, within the time budget of a stopping pod,
// and the start script names each server so that the manager finds the pod's server.

import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';
import { findServerForPod } from '../../src/cluster/cluster-model.js';
import { loadConfig } from '../../src/config.js';
import { paperTopology } from '../../src/sandbox/sandbox-cluster.js';
import {
  containersOf, findResource, parseCurlArgs, podSpecOf, renderKustomization, runScript,
} from '../helpers/deploy-files.js';
import { createSandboxHarness } from '../helpers/harness.js';

const { resources } = renderKustomization();
const statefulSet = findResource(resources, 'StatefulSet', 'rethinkdb');
const [rethinkdb] = containersOf(statefulSet);
const managerConfig = loadConfig({ ...findResource(resources, 'ConfigMap', 'rethinkdb-manager').data });
// The sandbox's servers (the paper's testbed) and their pods' hostnames: pod rethinkdb-1 runs server rethinkdb_1.
const sandboxServers = paperTopology().servers;
const sandboxPod = sandboxServers[1].hostname;
// RethinkDB's own clean shutdown after SIGTERM (flush and close): the share of the grace period left for it.
const rethinkDbShutdownSeconds = 30;
// How far above PRESTOP_DEADLINE_SECONDS curl may wait: the manager's answer must have time to arrive.
const curlSlackSeconds = { min: 1, max: 10 };

function hookScript(name) {
  const [shell, flag, script] = rethinkdb.lifecycle[name].exec.command;
  expect([shell, flag]).toEqual(['/bin/sh', '-c']);
  return script;
}

// The container's environment as the kubelet gives it to the hook, with the downward API for a given pod.
// The pod address the kubelet gives a pod (a stand-in in the benchmark range).
const podIpOf = (podName) => `198.18.0.${10 + Number(podName.split('-').at(-1))}`;

function containerEnv(podName, tokenFile) {
  const env = {};
  for (const { name, value, valueFrom } of rethinkdb.env) {
    if (value !== undefined) env[name] = value;
    else if (valueFrom.fieldRef?.fieldPath === 'metadata.name') env[name] = podName;
    else if (valueFrom.fieldRef?.fieldPath === 'status.podIP') env[name] = podIpOf(podName);
  }
  return { ...env, MANAGER_TOKEN_FILE: tokenFile };
}

// The projected token as the kubelet mounts it (here a temp file).
const tokenFile = join(mkdtempSync(join(tmpdir(), 'manager-token-')), 'token');
const projectedToken = 'projected-token-as-the-kubelet-mounts-it';
writeFileSync(tokenFile, projectedToken);

// curl's answers, in order, as curl gives them: the body goes where --output says (else to stdout), and the HTTP
// status (000 with no response) to stdout only if --write-out asks for it; then its exit code.
const curlAnswer = (status, body) => [
  'out=""; wo=""; prev=""',
  'for a in "$@"; do case $prev in --output | -o) out=$a ;; --write-out | -w) wo=$a ;; esac; prev=$a; done',
  `if [ -n "$out" ]; then printf '%s' '${body}' > "$out"; else printf '%s' '${body}'; fi`,
  `[ "$wo" = '%{http_code}' ] && printf '%s' '${status}'`,
].join('\n');
const answered = (status) => ({ shell: curlAnswer(status, '{"answer":"the body"}'), exitCode: 0 });
const noResponse = (exitCode) => ({ shell: curlAnswer('000', ''), exitCode });

// Runs a hook with a stand-in curl (its answers in order) and a clock: `date +%s` advances `secondsPerCall` at each
// call, and sleep returns at once, so that a hook's time budget is counted without waiting for it.
function runHook(name, { podName = sandboxPod, curl = [answered(200)], secondsPerCall = 1 } = {}) {
  const clock = Array.from({ length: 200 }, (_, i) => ({ stdout: String(1_000_000 + i * secondsPerCall) }));
  return runScript(hookScript(name), {
    env: containerEnv(podName, tokenFile), fakes: { curl: { sequence: curl }, date: { sequence: clock }, sleep: {} },
  });
}

const curlCallsOf = (result) => result.calls.filter((c) => c.command === 'curl').map((c) => parseCurlArgs(c.args));

function curlCallOf(result) {
  const curls = curlCallsOf(result);
  expect(curls).toHaveLength(1);
  return curls[0];
}

// Fires the hook's request, as curl would send it, at the real app on the sandbox. The app checks the bearer
// token (static mode stands in for the TokenReview here; test/kube-real/ has the real one).
async function fireAtApp(call) {
  const url = new URL(call.urls[0]);
  const h = createSandboxHarness({ env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: tokenFile }, staticToken: projectedToken });
  let req = request(h.app)[call.method.toLowerCase()](`${url.pathname}${url.search}`);
  for (const [header, value] of Object.entries(call.headers)) req = req.set(header, value);
  return { res: await req, url };
}

describe('hook requests against the app', () => {
  test.each([
    ['preStop', '/v1/hooks/prestop', 200, { event: 'PRESTOP', pod: sandboxPod, server: 'rethinkdb_1' }],
    ['postStart', '/v1/hooks/poststart', 202, { operation: expect.objectContaining({ href: expect.any(String) }) }],
  ])('when the %s hook runs, then it POSTs to %s with the pod\'s name and its bearer token, and the app answers %i', async (hook, path, status, body) => {
    const result = runHook(hook);
    expect(result.exitCode).toBe(0);
    const call = curlCallOf(result);
    expect(call.method).toBe('POST');
    expect(call.headers.authorization).toBe(`Bearer ${projectedToken}`);
    const { res, url } = await fireAtApp(call);
    expect(url.pathname).toBe(path);
    expect(url.searchParams.get('pod')).toBe(sandboxPod);
    expect([400, 401, 403, 404, 405]).not.toContain(res.status);
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject(body);
  });
});

describe('preStop hook', () => {
  test('when the manager does not answer in time, then curl gives up after --max-time, above the manager\'s prestop deadline', () => {
    const call = curlCallOf(runHook('preStop'));
    const maxTimeSeconds = Number(call.options['--max-time']);
    expect(maxTimeSeconds).toBeGreaterThanOrEqual(managerConfig.deadlines.prestopSeconds + curlSlackSeconds.min);
    expect(maxTimeSeconds).toBeLessThanOrEqual(managerConfig.deadlines.prestopSeconds + curlSlackSeconds.max);
    expect(Number(call.options['--connect-timeout'])).toBeLessThan(maxTimeSeconds);
  });

  test('when the pod is given its grace period, then it covers the whole preStop call plus RethinkDB\'s own shutdown', () => {
    const maxTimeSeconds = Number(curlCallOf(runHook('preStop')).options['--max-time']);
    const graceSeconds = podSpecOf(statefulSet).terminationGracePeriodSeconds;
    expect(graceSeconds).toBeGreaterThanOrEqual(maxTimeSeconds + rethinkDbShutdownSeconds);
    // The config default and the ConfigMap agree, so the grace period also holds for a manager run without it.
    expect(managerConfig.deadlines.prestopSeconds).toBe(loadConfig({}).deadlines.prestopSeconds);
  });

  test.each([[400], [404], [504]])('when the manager answers %i (refused, or its deadline passed), then the hook fails at once (a FailedPreStopHook event shows it)', (status) => {
    const result = runHook('preStop', { curl: [answered(status)] });
    expect(result.exitCode).not.toBe(0);
    expect(curlCallsOf(result)).toHaveLength(1);
  });

  test('when nobody takes the request (a 503 while the manager\'s leader changes, then no answer), then the hook sends it again each second until a replica takes it', () => {
    const result = runHook('preStop', { curl: [answered(503), noResponse(7), answered(503), answered(200)] });
    expect(result.exitCode).toBe(0);
    const calls = curlCallsOf(result);
    expect(calls).toHaveLength(4);
    expect(new Set(calls.map((c) => c.urls[0])).size).toBe(1);
    expect(result.calls.filter((c) => c.command === 'sleep').map((c) => c.args)).toEqual([['1'], ['1'], ['1']]);
    // Each try waits only for what is left of the one budget.
    const maxTimes = calls.map((c) => Number(c.options['--max-time']));
    expect(maxTimes[0]).toBeGreaterThan(managerConfig.deadlines.prestopSeconds);
    for (let i = 1; i < maxTimes.length; i += 1) expect(maxTimes[i]).toBeLessThan(maxTimes[i - 1]);
  });

  test('when nobody ever takes it, then the hook gives up within its one budget, with a message', () => {
    const result = runHook('preStop', { curl: [answered(503)], secondsPerCall: 2 });
    expect(result.exitCode).not.toBe(0);
    expect(result.stderr).toContain('no manager replica took the request within 25 s');
    const maxTimes = curlCallsOf(result).map((c) => Number(c.options['--max-time']));
    expect(maxTimes.length).toBeGreaterThan(1);
    for (const t of maxTimes) expect(t).toBeGreaterThan(0);
    expect(Math.max(...maxTimes)).toBeLessThanOrEqual(25);
  });
});

describe('postStart hook', () => {
  test.each([[6, 'cannot resolve'], [7, 'connection refused'], [28, 'timed out']])(
    'when curl fails with exit %i (%s) every time, then the hook tries within its budget, still exits 0 and never fails the container',
    (curlExitCode) => {
      const result = runHook('postStart', { curl: [noResponse(curlExitCode)] });
      expect(result.exitCode).toBe(0);
      expect(curlCallsOf(result).length).toBeGreaterThan(1);
    },
  );

  test.each([[202, 1], [500, 1], [503, 3]])('when the manager answers %i, then the hook exits 0 after %i tries', (status, tries) => {
    const result = runHook('postStart', { curl: [answered(status), answered(status), answered(202)] });
    expect(result.exitCode).toBe(0);
    expect(curlCallsOf(result)).toHaveLength(tries);
  });

  test('when the manager is slow, then the hook is bounded in time', () => {
    const call = curlCallOf(runHook('postStart', { curl: [answered(202)] }));
    expect(Number(call.options['--max-time'])).toBeGreaterThan(0);
    expect(Number(call.options['--max-time'])).toBeLessThanOrEqual(15);
  });
});

describe('RethinkDB start script', () => {
  const [shell, flag, script] = rethinkdb.command;
  const peerNames = ['rethinkdb-0.rethinkdb', 'rethinkdb-1.rethinkdb', 'rethinkdb-2.rethinkdb'];

  function start(podName, { resolvable = peerNames } = {}) {
    const fqdn = `${podName}.rethinkdb.rethinkdb.svc.cluster.local`;
    // getent succeeds only for the names given: a stand-in for the cluster DNS at that moment.
    const getent = `case "$2" in ${resolvable.length ? resolvable.join('|') : '__none__'}) return 0;; *) return 2;; esac`;
    const result = runScript(`getent() { ${getent}; }\n${script}`, {
      env: { ...containerEnv(podName, '/dev/null'), MEMORY_LIMIT_MB: '2048', RETHINKDB_PASSWORD: 's3cret' },
      fakes: { rethinkdb: {}, hostname: { stdout: fqdn }, sleep: {} },
    });
    const call = result.calls.find((c) => c.command === 'rethinkdb');
    const option = (name) => call.args[call.args.indexOf(name) + 1];
    const joins = call ? call.args.flatMap((a, i) => (call.args[i - 1] === '--join' ? [a] : [])) : [];
    return { result, call, option, joins, fqdn };
  }

  test('when the container starts, then it runs /bin/sh -c and ends in exec rethinkdb', () => {
    expect([shell, flag]).toEqual(['/bin/sh', '-c']);
    expect(script).toMatch(/exec rethinkdb "\$@"\s*$/);
  });

  test('when pod rethinkdb-1 starts, then it runs server rethinkdb_1 on all interfaces, advertising its pod address (no DNS for peers), and joins its resolvable peers', () => {
    const { result, call, option, joins } = start('rethinkdb-1');
    expect(result.exitCode).toBe(0);
    expect(option('--server-name')).toBe('rethinkdb_1');
    expect(option('--bind')).toBe('all');
    expect(option('--canonical-address')).toBe('198.18.0.11');
    expect(option('--cache-size')).toBe('512');
    expect(option('--initial-password')).toBe('s3cret');
    expect(joins).toEqual(['rethinkdb-0.rethinkdb:29015', 'rethinkdb-2.rethinkdb:29015']);
    expect(call.args).not.toContain('rethinkdb-1.rethinkdb:29015');
  });

  test('when pod rethinkdb-0 starts while no peer resolves (a new cluster), then it starts alone rather than exiting on an unresolvable --join', () => {
    const { result, joins } = start('rethinkdb-0', { resolvable: [] });
    expect(result.exitCode).toBe(0);
    expect(joins).toEqual([]);
  });

  test('when another pod starts while pod 0 never resolves, then it gives up with a message instead of seeding a second cluster', () => {
    const { result, call } = start('rethinkdb-2', { resolvable: [] });
    expect(result.exitCode).toBe(1);
    expect(call).toBeUndefined();
    expect(result.stderr).toContain('rethinkdb-0.rethinkdb does not resolve');
  });

  test.each(sandboxServers.map((s) => [s.hostname, s.name]))(
    'when the manager looks up pod %s, then it finds the server this script starts (%s, as in the sandbox), by hostname and by canonical address',
    (podName, serverName) => {
      const { option } = start(podName);
      expect(option('--server-name')).toBe(serverName);
      const server = { id: 'uuid-1', name: serverName, connected: true };
      const byHostname = { servers: [{ ...server, hostname: podName, canonicalAddresses: [] }] };
      const byAddress = { servers: [{ ...server, hostname: 'elsewhere', canonicalAddresses: [{ host: option('--canonical-address'), port: 29015 }] }] };
      expect(findServerForPod(byHostname, { podName })?.name).toBe(serverName);
      expect(findServerForPod(byAddress, { podName, podIp: podIpOf(podName) })?.name).toBe(serverName);
      expect(findServerForPod(byAddress, { podName, podIp: '198.18.0.99' })).toBeNull();
    },
  );
});
