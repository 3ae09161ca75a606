// Entry point: reads the config, builds the real clients (or the sandbox), listens, and shuts down on SIGTERM.

import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import r from 'rethinkdb';
import { loadConfig } from './config.js';
import { createSystemClock } from './lib/clock.js';
import { createLogger } from './logger.js';
import { createKubeAdapter } from './kubernetes/kube-adapter.js';
import { createManager } from './manager.js';
import { createDataStore } from './rethinkdb/data-store.js';
import { createConnectionManager, createQueryRunner, createRethinkDbSource } from './rethinkdb/rethinkdb-source.js';
import {
  createSandboxCluster, createSandboxKube, createSandboxSource, paperPods,
} from './sandbox/sandbox-cluster.js';

function main() {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(1);
  }
  const logger = createLogger({ level: config.logLevel });
  const clock = createSystemClock();
  let backend;
  try {
    backend = config.backend === 'sandbox' ? buildSandbox(config, clock, logger) : buildRethinkDb(config, clock, logger);
  } catch (err) {
    // A client that cannot even be built (unreadable CA file or kubeconfig) is a start-up configuration error.
    logger.fatal({ err: err.message }, 'cannot start: a client could not be configured');
    process.exit(1);
  }
  const store = createDataStore({ source: backend.source, managedTables: config.managedTables });
  const manager = createManager({ config, store, kube: backend.kube, clock, logger });
  const server = manager.app.listen(config.http.port, config.http.host, () => {
    const { port } = server.address();
    logger.info({ port, backend: config.backend }, 'manager listening');
  });

  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new work; waiting for running actions');
    server.close();
    const result = await manager.shutdown(config.deadlines.shutdownGraceSeconds * 1000);
    await backend.close();
    logger.info(result, 'shutdown complete');
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

function buildSandbox(config, clock, logger) {
  logger.warn({ backend: 'sandbox' },
    'SANDBOX MODE: no RETHINKDB_HOST is configured, so the manager runs against an in-memory model of a 4-server RethinkDB cluster, not a real database');
  const model = createSandboxCluster({
    clock, electionTimeoutMs: config.sandbox.electionTimeoutMs, backfillMsPer1000Docs: config.sandbox.backfillMsPer1000Docs,
  });
  return { source: createSandboxSource(model), kube: createSandboxKube({ podsByNode: paperPods() }), close: async () => {} };
}

function buildRethinkDb(config, clock, logger) {
  const kube = buildKube(config, clock, logger);
  const rc = config.rethinkdb;
  const ssl = rc.tls ? {
    ...(rc.tlsCaFile ? { ca: readFileSync(rc.tlsCaFile) } : {}),
    ...(rc.tlsServername ? { servername: rc.tlsServername } : {}),
  } : undefined;
  const connections = createConnectionManager({
    connect: () => r.connect({ host: rc.host, port: rc.port, user: rc.user, password: rc.password, timeout: rc.connectTimeoutSeconds, ssl }),
    clock,
    logger: logger.child({ module: 'rethinkdb' }),
    reconnectMinMs: rc.reconnectMinMs,
    reconnectMaxMs: rc.reconnectMaxMs,
  });
  connections.start();
  logger.info({ host: rc.host, port: rc.port, user: rc.user, tls: rc.tls }, 'connecting to RethinkDB');
  const source = createRethinkDbSource({ r, runQuery: createQueryRunner({ connections, queryTimeoutMs: rc.queryTimeoutMs }) });
  return { source, kube, close: () => connections.close() };
}

function buildKube(config, clock, logger) {
  const k = config.kubernetes;
  if (k.mode === 'off') {
    logger.warn('no Kubernetes API configured (KUBERNETES_MODE=off): node actions answer 503');
    return null;
  }
  const kubeConfig = new KubeConfig();
  if (k.mode === 'in-cluster') kubeConfig.loadFromCluster();
  else kubeConfig.loadFromDefault();
  logger.info({ mode: k.mode, namespace: k.namespace, selector: k.podLabelSelector, statefulSet: k.statefulSetName }, 'using the Kubernetes API');
  return createKubeAdapter({ kubeConfig, namespace: k.namespace, podLabelSelector: k.podLabelSelector, statefulSetName: k.statefulSetName, clock, requestTimeoutMs: k.requestTimeoutMs });
}

main();
