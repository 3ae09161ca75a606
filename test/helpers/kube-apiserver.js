// Starts a real etcd and kube-apiserver on loopback for one test file, like envtest does for Go operators:
// a static admin token, service-account signing keys (TokenRequest and TokenReview work), RBAC, and no
// controllers, scheduler or kubelet. stop() kills both processes and removes their files.

import { spawnSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { freeLoopbackPorts, onFreshPort, startProcess } from './processes.js';

const here = dirname(fileURLToPath(import.meta.url));
export const KUBE_APISERVER_BIN = process.env.KUBE_APISERVER_BIN ?? join(here, '..', 'kube', 'bin', 'kube-apiserver');
export const ETCD_BIN = process.env.ETCD_BIN ?? 'etcd';
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

// Resolves once /readyz answers 200, or rejects after startTimeoutMs with the processes' stderr tails.
export async function startKubeApiServer({ startTimeoutMs = 60000 } = {}) {
  checkPrerequisites();
  const dir = mkdtempSync(join(tmpdir(), 'kube-apiserver-test-'));
  const processes = [];
  const stop = async () => {
    await Promise.all(processes.map((p) => p.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const adminToken = randomBytes(24).toString('hex');
    const files = writeCredentials(dir, adminToken);
    const [etcdClientPort, etcdPeerPort] = await freeLoopbackPorts(2);
    const etcd = startProcess('etcd', ETCD_BIN, etcdArgs(dir, etcdClientPort, etcdPeerPort));
    processes.push(etcd);
    await waitUntil(() => httpOk(`http://127.0.0.1:${etcdClientPort}/health`), startTimeoutMs, etcd, 'etcd /health');
    const caFile = join(dir, 'certs', 'apiserver.crt');
    // An API server that exits before it is ready (seen once in a CI run, exit 1 after its flags) most likely lost its
    // port to another process: started again on a fresh one.
    const server = await onFreshPort(async (securePort) => {
      const apiserver = startProcess('kube-apiserver', KUBE_APISERVER_BIN, apiServerArgs({ dir, files, etcdClientPort, securePort }));
      processes.push(apiserver);
      const url = `https://127.0.0.1:${securePort}`;
      try {
        await waitUntil(() => existsSync(caFile) && httpsReady(url, caFile, adminToken), startTimeoutMs, apiserver, 'kube-apiserver /readyz');
      } catch (err) {
        throw Object.assign(err, { exitedEarly: Boolean(apiserver.exited()) });
      }
      return url;
    }, { retryable: (err) => err.exitedEarly });
    const ca = readFileSync(caFile);
    return {
      server,
      ca,
      adminToken,
      kubeConfig: kubeConfigFor({ server, ca, token: adminToken, user: 'admin' }),
      kubeConfigForToken: (token, user = 'token-user') => kubeConfigFor({ server, ca, token, user }),
      // The key the API server signs service-account tokens with: lets a test forge what it must refuse.
      serviceAccountSigningKey: files.privateKey,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

function checkPrerequisites() {
  if (spawnSync(ETCD_BIN, ['--version']).error) {
    throw new Error(`etcd not found (${ETCD_BIN}): the real-API-server tests need etcd 3.4+. On Debian: apt-get install etcd-server`);
  }
  if (!existsSync(KUBE_APISERVER_BIN)) {
    throw new Error(`kube-apiserver not found at ${KUBE_APISERVER_BIN}: build it with test/kube/build-kube-apiserver.sh (npm test runs it first)`);
  }
}

function writeCredentials(dir, adminToken) {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const files = { tokens: join(dir, 'tokens.csv'), saKey: join(dir, 'sa.key'), saPub: join(dir, 'sa.pub') };
  // token,user,uid,"groups": system:masters is bound to cluster-admin by RBAC's bootstrap policy.
  writeFileSync(files.tokens, `${adminToken},admin,admin-uid,"system:masters"\n`, { mode: 0o600 });
  writeFileSync(files.saKey, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
  writeFileSync(files.saPub, publicKey.export({ type: 'spki', format: 'pem' }));
  return { ...files, privateKey };
}

function etcdArgs(dir, clientPort, peerPort) {
  const client = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  return [
    '--name=test', `--data-dir=${join(dir, 'etcd')}`, '--logger=zap', '--log-level=warn',
    `--listen-client-urls=${client}`, `--advertise-client-urls=${client}`,
    `--listen-peer-urls=${peer}`, `--initial-advertise-peer-urls=${peer}`, `--initial-cluster=test=${peer}`,
  ];
}

function apiServerArgs({ dir, files, etcdClientPort, securePort }) {
  return [
    `--etcd-servers=http://127.0.0.1:${etcdClientPort}`,
    '--bind-address=127.0.0.1', '--advertise-address=127.0.0.1', `--secure-port=${securePort}`,
    // No --tls-cert-file: the server writes a self-signed serving cert for 127.0.0.1 and localhost here.
    `--cert-dir=${join(dir, 'certs')}`,
    `--token-auth-file=${files.tokens}`,
    `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
    `--service-account-key-file=${files.saPub}`,
    `--service-account-signing-key-file=${files.saKey}`,
    `--api-audiences=${SERVICE_ACCOUNT_ISSUER}`,
    '--authorization-mode=RBAC',
    // Nothing else would keep the kubernetes Service's endpoints; no controller-manager runs either.
    '--endpoint-reconciler-type=none',
    // Service addresses the API server hands out (no traffic: no kube-proxy runs): in the benchmark range, as every
    // address a test makes.
    '--service-cluster-ip-range=198.19.192.0/20',
    '--profiling=false',
    '--v=1',
  ];
}

async function waitUntil(check, timeoutMs, proc, what) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exited()) {
      throw new Error(`${proc.name} exited (${JSON.stringify(proc.exited())}) before ${what} was ready. stderr tail:\n${proc.stderrTail()}`);
    }
    if (await Promise.resolve().then(check).catch(() => false)) return;
    if (Date.now() > deadline) {
      throw new Error(`${what} not ready within ${timeoutMs} ms. ${proc.name} stderr tail:\n${proc.stderrTail()}`);
    }
    await new Promise((resolve) => { setTimeout(resolve, 100); });
  }
}

async function httpOk(url) {
  const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
  return res.ok;
}

// fetch() cannot take a CA per request, so readiness goes through node:https.
function httpsReady(server, caFile, token) {
  return new Promise((resolve) => {
    const req = request(`${server}/readyz`, { ca: readFileSync(caFile), headers: { authorization: `Bearer ${token}` }, timeout: 2000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => { req.destroy(); resolve(false); });
    req.end();
  });
}

function kubeConfigFor({ server, ca, token, user }) {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'test', server, caData: ca.toString('base64') }],
    users: [{ name: user, token }],
    contexts: [{ name: 'test', cluster: 'test', user, namespace: 'rethinkdb' }],
    currentContext: 'test',
  });
  return kubeConfig;
}

