// GET /metrics for Prometheus, and the counter of hook requests. A scrape never waits on the data store for
// long: when the cluster cannot be read in time, it still answers with everything else and
// cluster_scrape_success 0.

import { Router } from 'express';
import { appError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { hookOutcome } from '../metrics/metrics.js';
import { mountRoute } from './validation.js';

const HOOKS = {
  'POST /v1/hooks/prestop': 'prestop',
  'POST /v1/hooks/poststart': 'poststart',
  'POST /v1/hooks/perfwarning': 'perfwarning',
  'DELETE /v1/hooks/perfwarning': 'perfwarning_end',
};

// Counts a hook request once its answer is sent (or the caller has gone), from the JSON body it was sent.
// Mounted before body parsing, so that refused requests (unparsable or non-JSON bodies) are counted too.
export function createHookCounter({ metrics }) {
  return function countHookRequest(req, res, next) {
    const hook = HOOKS[`${req.method} ${req.path.replace(/\/$/, '')}`];
    if (!hook) { next(); return; }
    let body;
    const json = res.json;
    res.json = function captureBody(value) { body = value; return json.call(this, value); };
    let counted = false;
    const count = () => {
      if (counted) return;
      counted = true;
      metrics.recordHook({ hook, outcome: hookOutcome(hook, res.writableFinished ? res.statusCode : null, body) });
    };
    res.on('finish', count);
    res.on('close', count);
    next();
  };
}

// What the router enforces and /openapi.json describes.
export const METRICS_ROUTE = {
  method: 'get', path: '/metrics', operationId: 'getMetrics', tag: 'meta', summary: 'Prometheus metrics',
  ok: [{ status: 200, description: 'Prometheus text exposition format', contentType: 'text/plain', schema: { type: 'string' } }], errors: [],
};

export function createMetricsRoutes({ metrics, store, marks, logger, clusterReadTimeoutMs = 2000 }) {
  const router = Router();
  const log = logger.child({ module: 'metrics' });

  mountRoute(router, METRICS_ROUTE, async (input, res) => {
    await refreshClusterState();
    res.set('content-type', metrics.contentType).send(await metrics.render());
  });

  async function refreshClusterState() {
    const [draining, perfWarnings] = await Promise.all([marks.list(), marks.perfWarnings()]);
    const cluster = await withinMs(
      store.readCluster(),
      clusterReadTimeoutMs,
      () => appError('clusterReadSlow', { ms: clusterReadTimeoutMs }),
    ).catch((err) => {
      log.warn({ err: err.message }, 'cluster not read for a metrics scrape; its per-server gauges are left out');
      return null;
    });
    metrics.setClusterState({ cluster, draining, perfWarnings });
  }

  return router;
}
