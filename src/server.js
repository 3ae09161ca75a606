// Entry point: reads the config, builds the real clients (or the sandbox), listens, and shuts down on SIGTERM.

import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { loadConfig } from './config.js';
import { createSystemClock } from './lib/clock.js';
import { createLogger } from './logger.js';
import { createManager } from './manager.js';
import { createMetrics } from './metrics/metrics.js';
import { lingerAfterReleaseMs } from './policy/leadership.js';
import { connectSandboxHooks, createSandboxWorld } from './sandbox/sandbox-world.js';
import { httpListener, webhookListener } from './listeners.js';

// The clients are imported only by the backend that uses them: @kubernetes/client-node's index adds about 53 MiB of
// resident memory (its generated API and model classes; about 17 MiB in the image's bundle, which keeps only what the
// adapter's named imports reach, so KubeConfig comes through the adapter), the rethinkdb driver about 10 MB
// (bench/memory.bench.js, scripts/build.js).

async function main() {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  const logger = createLogger({ level: config.logLevel });
  for (const warning of config.warnings) logger.warn(warning);
  const clock = createSystemClock();
  let backend;
  try {
    const staticToken = readStaticToken(config.auth);
    // Process metrics (CPU, memory, event loop, GC) only here: they observe the whole process.
    const metrics = createMetrics({ processMetrics: true });
    const build = config.backend === 'sandbox' ? buildSandbox : buildRethinkDb;
    backend = await build(config, clock, logger, { staticToken, metrics });
  } catch (err) {
    // A client that cannot even be built (an unreadable CA file, token file or kubeconfig, a static token too short) is a start-up configuration error.
    logger.fatal({ err: err.message }, 'cannot start: a client could not be configured');
    process.exit(1);
  }
  const { manager } = backend;
  const api = httpListener({
    app: manager.app, host: config.http.host, port: config.http.port, requestTimeoutMs: config.http.requestTimeoutMs, logger,
  });
  manager.serve(api);
  const cannotStartWebhook = (err) => {
    logger.fatal({ err: err.message }, 'cannot start the eviction webhook');
    process.exit(1);
  };
  const webhook = config.webhook.enabled ? webhookListener({
    app: manager.webhookApp, certFile: config.webhook.certFile, keyFile: config.webhook.keyFile, host: config.http.host, port: config.webhook.port,
    requestTimeoutMs: config.http.requestTimeoutMs, logger, onRetryFailed: cannotStartWebhook,
  }) : null;
  if (webhook) manager.serve(webhook);
  else logger.info('eviction webhook off: WEBHOOK_TLS_CERT_FILE and WEBHOOK_TLS_KEY_FILE are not set');
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new work; waiting for running actions');
    // The ports stay open through the running work and the Lease's release, and a while after it, answering new work
    // with 503 SHUTTING_DOWN or NOT_LEADER, which a follower's relay sends on to the next leader
    // (lingerAfterReleaseMs). Closed at SIGTERM, a request relayed at that moment was lost with its connection.
    // The manager closes them last.
    const lingerMs = lingerAfterReleaseMs({ active: config.leaderElection.active, retryPeriodMs: config.leaderElection.timings.retryPeriodMs });
    const result = await manager.shutdown(config.deadlines.shutdownGraceSeconds * 1000, { lingerMs });
    await backend.close();
    logger.info(result, 'shutdown complete');
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  // The ports, then the timers. A port that cannot be listened on (in use, privileged) says which, and exits non-zero.
  // The periodic work runs only while this replica leads and has loaded its state (tick() checks).
  try {
    await manager.start();
  } catch (err) {
    if (err.code === 'HTTP_LISTEN_FAILED') logger.fatal({ err: err.message, code: err.listenCode }, 'cannot listen');
    else if (err.code === 'WEBHOOK_LISTEN_FAILED') cannotStartWebhook(err);
    else logger.fatal({ err: err.message }, 'cannot start');
    process.exit(1);
  }
  const port = api.port();
  logger.info({ port, backend: config.backend, auth: config.auth.mode, protectReads: config.auth.protectReads }, 'manager listening');
  if (config.auth.mode === 'none' && config.backend !== 'sandbox') {
    logger.warn('AUTH_MODE=none: anyone who can reach this port can drain servers and move data; see docs/security.md');
  }
  // The sandbox's pods call their hooks over HTTP, like the real pods' curl commands.
  if (backend.sandboxKube) connectSandboxHooks(backend.sandboxKube, sandboxPost(`http://127.0.0.1:${port}`, logger, backend.staticToken));
  if (config.leaderElection.active) {
    // Several replicas: the Lease decides who leads; the leader loads the persisted state before it takes work.
    const election = manager.startElection({ identity: electionIdentity(config), addresses: advertisedAddresses(config, port, webhook?.port() ?? config.webhook.port) });
    logger.info({ identity: election.identity, lease: config.leaderElection.leaseName }, 'leader election started');
    return;
  }
  // The only replica: retries until the persisted state is loaded; until then it takes no work and is not ready.
  await manager.lead().catch((err) => logger.error({ err: err.message }, 'state reconciliation stopped'));
}

// This replica's name in the Lease: the pod's name (downward API) or the host's, and a random suffix, as client-go
// makes it, so that a restarted pod is a new candidate and never mistakes the Lease of its previous life for its own.
function electionIdentity(config) {
  return `${config.leaderElection.podName ?? hostname()}_${randomUUID().slice(0, 8)}`;
}

// Where the followers relay to this replica when it leads.
function advertisedAddresses(config, httpPort, webhookPort) {
  const host = config.leaderElection.advertiseHost.includes(':') ? `[${config.leaderElection.advertiseHost}]` : config.leaderElection.advertiseHost;
  return { http: `http://${host}:${httpPort}`, webhook: config.webhook.enabled ? `https://${host}:${webhookPort}` : null };
}

// The static bearer token, read once at start-up (AUTH_MODE=static).
function readStaticToken(auth) {
  if (auth.mode !== 'static') return null;
  return readFileSync(auth.staticTokenFile, 'utf8').trim();
}

function buildSandbox(config, clock, logger, { staticToken, metrics }) {
  logger.warn({ backend: 'sandbox' },
    'SANDBOX MODE: no RETHINKDB_HOST is configured, so the manager runs against an in-memory model of a 4-server RethinkDB cluster and its Kubernetes, not a real database');
  const world = createSandboxWorld({ config, clock, logger, staticToken, metrics });
  return { manager: world.manager, sandboxKube: world.kube, staticToken, close: async () => {} };
}

// The sandbox's pods call their hooks over HTTP, like the real pods' curl commands.
function sandboxPost(base, logger, token) {
  const headers = token ? { authorization: `Bearer ${token}` } : {};
  return async (path) => {
    const res = await fetch(`${base}${path}`, { method: 'POST', headers });
    logger.info({ hook: path, status: res.status }, 'sandbox pod called its hook');
    return res.json().catch(() => null);
  };
}

async function buildRethinkDb(config, clock, logger, { staticToken, metrics }) {
  const kube = await buildKube(config, clock, logger);
  const [{ default: r }, { createRethinkDbStore }] = await Promise.all([import('rethinkdb'), import('./rethinkdb/connect.js')]);
  const { store, probeTargets, close } = createRethinkDbStore({ r, config, clock, logger });
  return { manager: createManager({ config, store, kube, clock, logger, metrics, staticToken, probeTargets }), close };
}

async function buildKube(config, clock, logger) {
  const k = config.kubernetes;
  if (k.mode === 'off') {
    logger.warn(`no Kubernetes API (${k.modeFrom ?? 'KUBERNETES_MODE=off'}): node actions answer 503`);
    return null;
  }
  const { KubeConfig, createKubeAdapter } = await import('./kubernetes/kube-adapter.js');
  const kubeConfig = new KubeConfig();
  if (k.mode === 'in-cluster') kubeConfig.loadFromCluster();
  else kubeConfig.loadFromDefault();
  logger.info({ mode: k.mode, modeFrom: k.modeFrom, namespace: k.namespace, selector: k.podLabelSelector, statefulSet: k.statefulSetName }, 'using the Kubernetes API');
  return createKubeAdapter({ kubeConfig, namespace: k.namespace, podLabelSelector: k.podLabelSelector, statefulSetName: k.statefulSetName, clock, requestTimeoutMs: k.requestTimeoutMs });
}

// A failure after start-up that nothing caught: logged by Node, and the process ends as on a crash.
main().catch((err) => {
  console.error(err);
  process.exit(1);
});
