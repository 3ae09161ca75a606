// Read-only endpoints: liveness, readiness, the cluster at a glance, and operations.

import { Router } from 'express';
import { AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { describeCluster } from '../cluster/cluster-view.js';

export function createReadRoutes({ store, marks, operations, work, monitor, audit, status, readyTimeoutMs = 2000 }) {
  const router = Router();

  router.get('/livez', (req, res) => {
    res.json({ status: 'ok' });
  });

  router.get('/readyz', async (req, res) => {
    if (work.shuttingDown()) throw new AppError('SHUTTING_DOWN', 'the manager is shutting down');
    await withinMs(store.ping(), readyTimeoutMs, () => new AppError('DATA_STORE_UNAVAILABLE', `RethinkDB did not answer within ${readyTimeoutMs} ms`));
    res.json({ status: 'ready', backend: store.kind });
  });

  router.get('/v1/cluster', async (req, res) => {
    const cluster = await store.readCluster();
    const view = describeCluster(cluster, { backend: store.kind, draining: await marks.list(), operations: operations.list() });
    const extra = await status();
    res.json({ ...view, ...extra, monitor: monitor ? monitorSummary(monitor.view()) : null });
  });

  router.get('/v1/monitor', (req, res) => {
    if (!monitor) throw new AppError('NOT_FOUND', 'this manager has no monitor');
    res.json(monitor.view());
  });

  router.get('/v1/events', (req, res) => {
    res.json({ events: audit ? audit.list() : [] });
  });

  router.get('/v1/operations', (req, res) => {
    res.json({ operations: operations.list().map(summary) });
  });

  router.get('/v1/operations/:id', (req, res) => {
    const op = operations.get(req.params.id);
    if (!op) throw new AppError('OPERATION_NOT_FOUND', `operation "${req.params.id}" does not exist (operations are kept in memory; a restart forgets them)`);
    res.json(op);
  });

  return router;
}

function summary(op) {
  return { id: op.id, kind: op.kind, status: op.status, createdAt: op.createdAt, finishedAt: op.finishedAt, href: `/v1/operations/${op.id}` };
}

function monitorSummary(view) {
  return {
    enabled: view.enabled, lastPollAt: view.lastPollAt, polls: view.polls, failures: view.failures, averages: view.averages, uniform: view.uniform,
    hot: view.pods.filter((p) => p.hot || p.raised).map((p) => ({ pod: p.pod, signal: p.signal ?? p.hot, raised: p.raised ?? false })),
    scaleOut: view.scaleOut,
  };
}
