// Lifecycle-hook endpoints called by the RethinkDB pods' container hooks (curl from an exec hook), and the
// PERFWARNING endpoints used by operators, predictors and our own monitor.
// preStop blocks the pod's termination while the grace period runs, so it answers by its deadline, always.
// postStart must never hold up (or kill) the container, so it answers 202 at once and works in the background.

import { Router } from 'express';
import { callerActor, hookActor } from '../audit/actor.js';
import { requesterOf } from '../auth/access-policy.js';
import { appError, AppError } from '../errors.js';
import { createDeadline, withinMs } from '../lib/clock.js';
import { traced } from '../lib/trace.js';
import { prestopActionSeconds } from '../policy/lifecycle.js';
import { fields, mountRoute, objectSchema } from './validation.js';

const HOOK_SCHEMAS = {
  prestopQuery: objectSchema({ pod: fields.pod, dryRun: fields.flag }, ['pod']),
  poststartQuery: objectSchema({ pod: fields.pod }, ['pod']),
  perfwarningBody: {
    ...objectSchema({ pod: fields.pod, node: fields.node, durationSeconds: { type: 'integer', minimum: 1, maximum: 604800 }, reason: fields.reason }),
    oneOf: [{ required: ['pod'] }, { required: ['node'] }],
  },
  // Exactly one of pod and node: checked by the route (a query's parameters cannot say it in OpenAPI).
  perfwarningEndQuery: objectSchema({ pod: fields.pod, node: fields.node }),
};

const storeErrors = ['STARTING', 'SHUTTING_DOWN', 'DATA_STORE_UNAVAILABLE', 'KUBERNETES_UNAVAILABLE', 'RECONFIGURATION_REJECTED'];

// Method, path and input schemas of each hook route: what the router enforces and /openapi.json describes.
export const HOOK_ROUTES = {
  prestop: {
    method: 'post', path: '/v1/hooks/prestop', operationId: 'prestop', tag: 'hooks',
    summary: "PRESTOP: move the pod's primaries away before it stops",
    description: 'Answers once the new primaries act, or at PRESTOP_DEADLINE_SECONDS (504). The input is the query; the route takes no body.',
    query: HOOK_SCHEMAS.prestopQuery,
    ok: [{ status: 200, description: 'primariesOff true/false and the report', schema: 'PrestopResult' }],
    errors: ['POD_NOT_FOUND', 'DEADLINE_EXCEEDED', ...storeErrors],
  },
  poststart: {
    method: 'post', path: '/v1/hooks/poststart', operationId: 'poststart', tag: 'hooks',
    summary: 'POSTSTART: a pod (re)started; answered at once, the work runs as an operation',
    description: 'The input is the query; the route takes no body.',
    query: HOOK_SCHEMAS.poststartQuery,
    ok: [{ status: 202, description: 'the operation started; follow operation.href', schema: 'PoststartStarted', location: true }],
    errors: ['POD_NOT_FOUND', ...storeErrors],
  },
  perfwarning: {
    method: 'post', path: '/v1/hooks/perfwarning', operationId: 'raisePerfWarning', tag: 'hooks',
    summary: 'PERFWARNING: a pod (or every RethinkDB pod on a node) is about to suffer interference',
    description: 'Exactly one of pod and node. A long warning (durationSeconds >= PERFWARNING_LONG_SECONDS) also migrates replicas off.',
    body: HOOK_SCHEMAS.perfwarningBody,
    ok: [{ status: 200, description: 'the decision and its report', schema: 'PerfWarningResult' }],
    errors: ['POD_NOT_FOUND', 'NODE_NOT_FOUND', 'DEADLINE_EXCEEDED', ...storeErrors],
  },
  endPerfWarning: {
    method: 'delete', path: '/v1/hooks/perfwarning', operationId: 'endPerfWarning', tag: 'hooks',
    summary: "End a pod's perf warning now, or those of every RethinkDB pod on a node",
    description: 'Exactly one of pod and node. 404 if no warning (of the pod, or of any pod on the node) is active. The input is the query; the route takes no body.',
    query: HOOK_SCHEMAS.perfwarningEndQuery,
    ok: [{ status: 200, description: 'the warnings ended; what is restored (for a node, per pod)', schema: 'PerfWarningEndResult' }],
    errors: ['NOT_FOUND', 'POD_NOT_FOUND', 'NODE_NOT_FOUND', ...storeErrors],
  },
};

// An operation as answered: its id, status and where to follow it.
function withHref({ id, status }) {
  return { id, status, href: `/v1/operations/${id}` };
}

// logger: where a preStop's timings go (reading, planning, writing, waiting for RethinkDB; src/lib/trace.js).
// clock: the manager's; the preStop's deadline is made here, once, from the hook's.
export function createHookRoutes({ events, work, prestopDeadlineSeconds, clock, logger }) {
  const router = Router();
  const log = logger.child({ module: 'hooks' });
  const logTimings = (pod, result, timings) => log.info({ pod, outcome: result.outcome, timings }, 'preStop timings');

  mountRoute(router, HOOK_ROUTES.prestop, async ({ query, identity, relayDeadlineMs }, res) => {
    // Relayed by a follower: what is left of the hook's deadline after waiting for this leader.
    const deadlineMs = Math.min(prestopDeadlineSeconds * 1000, relayDeadlineMs ?? Infinity);
    const deadline = createDeadline(clock, prestopActionSeconds(deadlineMs) * 1000);
    // The action has its own deadline for waiting; this outer limit also covers a data store that hangs.
    const ctx = { actor: hookActor('prestop', query.pod, callerActor(identity)), dryRun: query.dryRun === true, deadline };
    const run = traced(() => work.track(() => events.prestop({ pod: query.pod }, ctx)));
    // Logged when the work ends, also after a 504: where the time went is what an operator needs then.
    run.then(({ result, timings }) => logTimings(query.pod, result, timings), () => {});
    const { result, timings } = await withinMs(
      run,
      deadlineMs,
      () => appError('prestopTooSlow', { pod: query.pod, seconds: Math.round(deadlineMs / 100) / 10 }),
    );
    res.status(200).json({ ...result, timings });
  });

  mountRoute(router, HOOK_ROUTES.poststart, async ({ query, identity }, res) => {
    const ctx = { actor: hookActor('poststart', query.pod, callerActor(identity)), requester: requesterOf(identity) };
    const result = await work.track(() => events.poststart({ pod: query.pod }, ctx));
    const operation = withHref(result.operation);
    res.status(202).location(operation.href).json({ ...result, operation });
  });

  mountRoute(router, HOOK_ROUTES.perfwarning, async ({ body, identity }, res) => {
    const ctx = { actor: callerActor(identity), requester: requesterOf(identity) };
    const { result, timings } = await traced(() => work.track(() => events.perfwarning(body, ctx)));
    res.status(200).json({ ...result, timings, pods: result.pods.map((p) => (p.migration ? { ...p, migration: withHref(p.migration) } : p)) });
  });

  mountRoute(router, HOOK_ROUTES.endPerfWarning, async ({ query, identity }, res) => {
    const reason = 'perf warning withdrawn (DELETE)';
    const ctx = { actor: callerActor(identity), requester: requesterOf(identity) };
    if ((query.pod === undefined) === (query.node === undefined)) {
      throw appError('podOrNode');
    }
    const withRestoreHref = (ended) => (ended.restore.operation ? { ...ended, restore: { ...ended.restore, operation: withHref(ended.restore.operation) } } : ended);
    if (query.node !== undefined) {
      const result = await work.track(() => events.endPerfWarningsOnNode({ node: query.node, reason }, ctx));
      if (!result.ended) throw new AppError('NOT_FOUND', result.reason);
      res.status(200).json({ ...result, pods: result.pods.map(withRestoreHref) });
      return;
    }
    const result = await work.track(() => events.endPerfWarning({ pod: query.pod, reason }, ctx));
    if (!result.ended) throw new AppError('NOT_FOUND', result.reason);
    res.status(200).json(withRestoreHref(result));
  });

  return router;
}
