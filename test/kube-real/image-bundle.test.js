// The image's bundle (scripts/build.js: what `npm run build` makes and the Dockerfile's CMD runs), built into a folder
// that holds nothing else (no node_modules, no src/, no package.json), as the image's final stage does, and started
// with the Dockerfile's CMD and ENV: on the sandbox, then with a real RethinkDB server and a real kube-apiserver, so
// that the bundled @kubernetes/client-node and rethinkdb driver make real calls (Lease, pods, TokenReview).

import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { buildBundle } from '../../scripts/build.js';
import { imageCommand, imageEnv, repoRoot } from '../helpers/deploy-files.js';
import { eventually } from '../helpers/harness.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import { NAMESPACE, mintServiceAccountToken, seedRethinkDbCluster } from '../helpers/kube-objects.js';
import { startManagerProcess, writeKubeconfig } from '../helpers/manager-process.js';
import { startRealCluster } from '../helpers/real-cluster.js';

const dockerfile = readFileSync(join(repoRoot, 'Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
const [program, ...commandArgs] = imageCommand(dockerfile);
const CLIENT_NODE = 'node_modules/@kubernetes/client-node/';
const DRIVER = 'node_modules/rethinkdb/';

let appDir;
let bundle;
const managers = [];

beforeAll(async () => {
  // As the image's WORKDIR /app: dist/ and nothing else, in a folder with no node_modules above it either.
  appDir = mkdtempSync(join(tmpdir(), 'image-bundle-'));
  bundle = await buildBundle({ outdir: join(appDir, 'dist') });
}, 60000);

afterEach(async () => {
  for (const m of managers.splice(0)) await m.kill('SIGTERM');
});

afterAll(() => {
  if (appDir) rmSync(appDir, { recursive: true, force: true });
});

// The Dockerfile's CMD, run in appDir with the Dockerfile's ENV under `env`.
async function startImage(name, env) {
  const manager = await startManagerProcess({ name, args: commandArgs, cwd: appDir, env: { ...imageEnv(dockerfile), ...env } });
  managers.push(manager);
  return manager;
}

// The inputs (paths in the repository) whose code is in these outputs of the build.
function inputsOf(outputs) {
  return new Set(outputs.flatMap((o) => Object.entries(bundle.metafile.outputs[o].inputs).filter(([, i]) => i.bytesInOutput > 0).map(([path]) => path)));
}

// The outputs the entry loads before it runs: itself and what it imports statically, transitively.
function staticallyLoaded() {
  const key = (file) => relative(repoRoot, file);
  const seen = new Set([key(bundle.entry)]);
  for (const output of seen) {
    for (const imp of bundle.metafile.outputs[output].imports) {
      if (imp.kind === 'import-statement' && !imp.external) seen.add(imp.path);
    }
  }
  return [...seen];
}

describe('the bundle as built', () => {
  test('when it is built, then the image\'s CMD runs node on its entry, and the folder holds only dist/', () => {
    expect(program).toBe('node');
    expect(resolve(appDir, commandArgs.at(-1))).toBe(bundle.entry);
    expect(readdirSync(appDir)).toEqual(['dist']);
    expect(bundle.assets).toEqual(['package.json', 'src/status/status-page-client.js', 'src/status/status-page.html']);
  });

  test('when it is built, then the Kubernetes client and the rethinkdb driver are only in chunks the entry loads with import() (the sandbox loads neither)', () => {
    const all = inputsOf(Object.keys(bundle.metafile.outputs));
    const atStart = inputsOf(staticallyLoaded());
    expect([...all].some((p) => p.startsWith(CLIENT_NODE))).toBe(true);
    expect([...all].some((p) => p.startsWith(DRIVER))).toBe(true);
    expect([...atStart].filter((p) => p.startsWith(CLIENT_NODE) || p.startsWith(DRIVER))).toEqual([]);
    expect(atStart).toContain('src/server.js');
  });

  test('when it is built, then of @kubernetes/client-node it holds what the adapter\'s named imports reach, not the whole index: of the generated API classes only those the adapter imports, no exec or port-forward', () => {
    const adapter = readFileSync(join(repoRoot, 'src/kubernetes/kube-adapter.js'), 'utf8');
    const imported = /import \{([^}]+)\} from '@kubernetes\/client-node'/.exec(adapter)[1].split(',').map((n) => n.trim()).filter((n) => n.endsWith('Api'));
    const apiClass = (path) => /\/gen\/apis\/(\w+Api)\.js$/.exec(path)?.[1];
    const generated = Object.keys(bundle.metafile.inputs).map(apiClass).filter(Boolean);
    const all = inputsOf(Object.keys(bundle.metafile.outputs));
    const bundled = [...all].map(apiClass).filter(Boolean);
    expect(generated.length).toBeGreaterThan(60);
    expect(imported).toContain('CoreV1Api');
    expect(bundled.sort()).toEqual(imported.sort());
    for (const module of ['exec.js', 'attach.js', 'portforward.js']) expect(all).not.toContain(`${CLIENT_NODE}dist/${module}`);
  });
});

describe('the bundle on the sandbox', () => {
  test('when the image\'s CMD runs it, then it serves the API, the version, the status page and a hook, and stops cleanly on SIGTERM', async () => {
    const m = await startImage('bundle-sandbox', {});
    expect((await m.json('/livez')).body).toEqual({ status: 'ok', version: pkg.version });
    const cluster = await m.json('/v1/cluster');
    expect(cluster.status).toBe(200);
    expect(cluster.body.backend).toBe('sandbox');
    const page = await fetch(`${m.url}/`);
    expect(page.status).toBe(200);
    // The markup with the browser script inlined: both assets were read.
    expect(await page.text()).toMatch(/<script nonce="[^"]+">[\s\S]*'v1\/cluster'/);
    const prestop = await m.json('/v1/hooks/prestop?pod=rethinkdb-1&dryRun=true', { method: 'POST' });
    expect(prestop.status).toBe(200);
    expect(prestop.body.decision.action).toBe('move-primaries-from-server');
    managers.splice(managers.indexOf(m), 1);
    expect(await m.kill('SIGTERM')).toMatchObject({ code: 0 });
    expect(m.logs().map((l) => l.msg)).toContain('shutdown complete');
  });
});

describe('the bundle with a real RethinkDB server and a real kube-apiserver', () => {
  let api;
  let cluster;
  let dir;
  let pod;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'image-bundle-kube-'));
    [api, cluster] = await Promise.all([
      startKubeApiServer(),
      startRealCluster({ size: 1, tables: [{ db: 'ycsb', table: 'usertable', shards: 1, replicas: 1, docs: 10 }] }),
    ]);
    [pod] = await seedRethinkDbCluster(api.kubeConfig, {
      plan: [{ pod: 'rethinkdb-0', node: 'node-0', podIp: '198.18.0.10', hostIp: '198.18.1.10' }], serviceAccountName: 'default',
    });
  }, 120000);

  afterAll(async () => {
    await cluster?.destroy();
    await api?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('when it runs as deployed (Lease, TokenReview), then it leads through the API server, is ready, maps the pod, and authenticates a hook by TokenReview', async () => {
    const server = cluster.servers[0];
    const m = await startImage('bundle-kube', {
      RETHINKDB_HOST: `${server.host}:${server.driverPort}`,
      KUBERNETES_MODE: 'kubeconfig',
      KUBECONFIG: writeKubeconfig(dir, 'manager', { server: api.server, ca: api.ca, token: api.adminToken }),
      KUBERNETES_NAMESPACE: NAMESPACE,
      AUTH_HOOK_SUBJECTS: `system:serviceaccount:${NAMESPACE}:default`,
      MONITOR_ENABLED: 'false',
    });
    await eventually(async () => (await m.json('/readyz')).status === 200, { timeoutMs: 30000, what: '/readyz 200' });
    // Ready does not mean leading (a replica that follows is ready too): the first Lease round may still be under way.
    await eventually(async () => (await m.json('/v1/leader')).body?.leading === true, { timeoutMs: 30000, what: 'leading' });
    // The Lease, written by the bundled client, read back through the test's own.
    const leader = (await m.json('/v1/leader')).body;
    expect(leader).toMatchObject({ enabled: true, leading: true });
    const lease = await api.kubeConfig.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'rethinkdb-manager', namespace: NAMESPACE });
    expect(lease.spec.holderIdentity).toBe(leader.identity);
    // The server's pod and node come from the pods the bundled client listed.
    const view = (await m.json('/v1/cluster')).body;
    expect(view.servers).toEqual([expect.objectContaining({ name: 'rethinkdb_0', pod: 'rethinkdb-0', node: 'node-0', connected: true })]);
    // A hook's token is checked by a TokenReview through the bundled client: a forged one is refused (401, not the
    // 503 of a failed call), a bound token for the pod passes.
    const prestop = (token) => fetch(`${m.url}/v1/hooks/prestop?pod=rethinkdb-0&dryRun=true`, { method: 'POST', headers: { authorization: `Bearer ${token}` } });
    expect((await prestop('not-a-token')).status).toBe(401);
    const token = await mintServiceAccountToken(api.kubeConfig, 'default', { audiences: ['rethinkdb-manager'], pod });
    expect((await prestop(token)).status).toBe(200);
  }, 90000);
});
