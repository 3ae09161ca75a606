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

function runHook(name, { podName = sandboxPod, curlExitCode = 0 } = {}) {
  return runScript(hookScript(name), { env: containerEnv(podName, tokenFile), fakes: { curl: { exitCode: curlExitCode } } });
}

function curlCallOf(result) {
  const curls = result.calls.filter((c) => c.command === 'curl');
  expect(curls).toHaveLength(1);
  return parseCurlArgs(curls[0].args);
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

  test('when the manager answers with an error, then the hook fails (a FailedPreStopHook event shows it)', () => {
    expect(runHook('preStop', { curlExitCode: 22 }).exitCode).not.toBe(0);
  });
});

describe('postStart hook', () => {
  test.each([[6, 'cannot resolve'], [7, 'connection refused'], [28, 'timed out']])(
    'when curl fails with exit %i (%s), then the hook still exits 0 and never fails the container',
    (curlExitCode) => {
      expect(runHook('postStart', { curlExitCode }).exitCode).toBe(0);
    },
  );

  test('when the manager is slow, then the hook is bounded in time', () => {
    const call = curlCallOf(runHook('postStart'));
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
