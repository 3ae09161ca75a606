// Read-only endpoints: liveness, readiness, the cluster at a glance, and operations.
// None takes a body or a query parameter it does not list; a probe or a read with stray input gets a 400.

import { Router } from 'express';
import { appError, AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { describeCluster } from '../cluster/cluster-view.js';
import { mountRoute, objectSchema } from './validation.js';
import { VERSION } from '../lib/version.js';

// Operation ids are UUIDs; the schema only bounds them, so that an unknown id is a 404 that names it.
const operationId = { type: 'string', minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' };

// Method, path and input schemas of each read route: what the router enforces and /openapi.json describes.
export const READ_ROUTES = {
  livez: {
    method: 'get', path: '/livez', operationId: 'livez', tag: 'probes',
    summary: 'Liveness: 200 while the process runs', ok: [{ status: 200, description: 'alive', schema: 'Liveness' }], errors: [],
  },
  readyz: {
    method: 'get', path: '/readyz', operationId: 'readyz', tag: 'probes',
    summary: 'Readiness: 200 while the data store answers (a follower too); 503 otherwise, while the leader loads its persisted state, or while shutting down',
    ok: [{ status: 200, description: 'ready', schema: 'Readiness' }], errors: ['STARTING', 'SHUTTING_DOWN', 'DATA_STORE_UNAVAILABLE', 'NO_LEADER'],
  },
  cluster: {
    method: 'get', path: '/v1/cluster', operationId: 'getCluster', tag: 'reads',
    summary: 'Servers, shard maps with acting primaries, draining marks, perf warnings, migrations, the monitor',
    ok: [{ status: 200, description: 'the cluster at a glance', schema: 'ClusterView' }], errors: ['DATA_STORE_UNAVAILABLE', 'KUBERNETES_UNAVAILABLE'],
  },
  monitor: {
    method: 'get', path: '/v1/monitor', operationId: 'getMonitor', tag: 'reads',
    summary: "The monitor's view: per-pod utilization, hot signals, decisions, scale-out state",
    ok: [{ status: 200, description: "the monitor's view", schema: 'MonitorView' }], errors: ['NOT_FOUND'],
  },
  events: {
    method: 'get', path: '/v1/events', operationId: 'listEvents', tag: 'reads',
    summary: 'Audit records, newest first: who, what, why, plan, outcome, duration',
    query: objectSchema({ limit: { type: 'integer', minimum: 1, maximum: 500, description: 'at most this many records (default 100)' } }),
    ok: [{ status: 200, description: 'the newest audit records', schema: 'AuditList' }], errors: [],
  },
  operations: {
    method: 'get', path: '/v1/operations', operationId: 'listOperations', tag: 'reads',
    summary: 'Recent operations (kept in memory)', ok: [{ status: 200, description: 'operation summaries', schema: 'OperationList' }], errors: [],
  },
  operation: {
    method: 'get', path: '/v1/operations/:id', operationId: 'getOperation', tag: 'reads',
    summary: 'One operation: status and per-shard steps',
    params: objectSchema({ id: operationId }, ['id']),
    ok: [{ status: 200, description: 'the operation', schema: 'Operation' }], errors: ['OPERATION_NOT_FOUND', 'NOT_FOUND'],
  },
};

export function createReadRoutes({
  store, marks, operations, work, monitor, audit, status, election: electionView = () => ({ enabled: false, leading: true }), readyTimeoutMs = 2000,
  logger, podServerOverrides = {},
}) {
  const router = Router();
  const readiness = createReadinessLog(logger);

  mountRoute(router, READ_ROUTES.livez, (input, res) => {
    res.json({ status: 'ok', version: VERSION });
  });

  mountRoute(router, READ_ROUTES.readyz, async (input, res) => {
    const body = await readiness.observe(ready());
    res.json(body);
  });

  async function ready() {
    if (work.shuttingDown()) throw appError('shuttingDown');
    // A follower is ready: it serves reads and relays the rest to the leader (src/routes/leader-relay.js).
    const election = electionView();
    const following = election.enabled && !election.leading;
    if (!following && !work.started()) throw new AppError('STARTING', work.startingReason());
    // A follower that cannot read the Lease cannot know where to relay: out of the Service until it can again.
    if (following && election.lastError) throw appError('leaseUnreadable', { error: election.lastError });
    await withinMs(store.ping(), readyTimeoutMs, () => appError('pingSlow', { ms: readyTimeoutMs }));
    return { status: 'ready', backend: store.kind, ...(election.enabled ? { role: following ? 'follower' : 'leader', leader: election.leader } : {}) };
  }

  mountRoute(router, READ_ROUTES.cluster, async (input, res) => {
    const cluster = await store.readCluster({ backfills: true });
    const extra = await status();
    const view = describeCluster(cluster, {
      backend: store.kind, draining: await marks.list(), operations: operations.list(), pods: extra.pods ?? null, overrides: podServerOverrides,
    });
    res.json({ ...view, ...extra, monitor: monitor ? monitorSummary(monitor.view()) : null });
  });

  mountRoute(router, READ_ROUTES.monitor, (input, res) => {
    if (!monitor) throw appError('noMonitor');
    res.json(monitor.view());
  });

  mountRoute(router, READ_ROUTES.events, ({ query }, res) => {
    res.json({ events: audit ? audit.list({ limit: query.limit }) : [] });
  });

  mountRoute(router, READ_ROUTES.operations, (input, res) => {
    res.json({ operations: operations.list().map(summary) });
  });

  mountRoute(router, READ_ROUTES.operation, ({ params }, res) => {
    const op = operations.get(params.id);
    if (!op) throw appError('operationNotFound', { id: params.id });
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

// Probes come every few seconds and are not logged one by one (src/app.js): readiness is logged when it changes,
// a warning when the replica stops being ready or for another reason, a line when it is ready (again).
function createReadinessLog(logger) {
  let lastCode = null;
  return {
    async observe(check) {
      try {
        const body = await check;
        if (lastCode !== null) logger?.info({ was: lastCode }, 'ready');
        lastCode = null;
        return body;
      } catch (err) {
        const code = err.code ?? 'INTERNAL';
        if (code !== lastCode) logger?.warn({ code, reason: err.message }, 'not ready');
        lastCode = code;
        throw err;
      }
    },
  };
}
