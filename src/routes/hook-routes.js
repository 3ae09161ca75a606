// Lifecycle-hook endpoints called by the RethinkDB pods' container hooks (curl from an exec hook), and the
// PERFWARNING endpoints used by operators, predictors and our own monitor.
// preStop blocks the pod's termination while the grace period runs, so it answers by its deadline, always.
// postStart must never hold up (or kill) the container, so it answers 202 at once and works in the background.

import { Router } from 'express';
import { actorName } from '../auth/access-policy.js';
import { AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { compileValidator, fields, objectSchema } from './validation.js';

const podName = { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' };

export const HOOK_SCHEMAS = {
  prestopQuery: objectSchema({ pod: podName, dryRun: { enum: ['true', 'false'] } }, ['pod']),
  poststartQuery: objectSchema({ pod: podName }, ['pod']),
  perfwarningBody: {
    ...objectSchema({ pod: podName, node: fields.node, durationSeconds: { type: 'integer', minimum: 1, maximum: 604800 }, reason: fields.reason }),
    oneOf: [{ required: ['pod'] }, { required: ['node'] }],
  },
  perfwarningEndQuery: objectSchema({ pod: podName }, ['pod']),
};

export function createHookRoutes({ hooks, work, prestopDeadlineSeconds }) {
  const router = Router();
  const validate = Object.fromEntries(Object.entries(HOOK_SCHEMAS).map(([name, schema]) => [name, compileValidator(schema, name.endsWith('Body') ? 'body' : 'query')]));

  router.post('/v1/hooks/prestop', async (req, res) => {
    const query = validate.prestopQuery({ ...req.query });
    const deadlineMs = prestopDeadlineSeconds * 1000;
    // The action has its own deadline for waiting; this outer limit also covers a data store that hangs.
    const result = await withinMs(
      work.track(() => hooks.prestop({
        pod: query.pod, dryRun: query.dryRun === 'true', deadlineSeconds: Math.max(1, prestopDeadlineSeconds - 1), actor: `hook:prestop:${query.pod} (${actorName(req.identity)})`,
      })),
      deadlineMs,
      () => new AppError('DEADLINE_EXCEEDED', `preStop for ${query.pod} did not finish within ${prestopDeadlineSeconds} s; the pod may stop with primaries still on it`),
    );
    res.status(200).json(result);
  });

  router.post('/v1/hooks/poststart', async (req, res) => {
    const query = validate.poststartQuery({ ...req.query });
    const result = await work.track(() => hooks.poststart({ pod: query.pod, actor: `hook:poststart:${query.pod} (${actorName(req.identity)})` }));
    const href = `/v1/operations/${result.operation.id}`;
    res.status(202).location(href).json({ ...result, operation: { id: result.operation.id, status: result.operation.status, href } });
  });

  router.post('/v1/hooks/perfwarning', async (req, res) => {
    const body = validate.perfwarningBody(req.body ?? {});
    const result = await work.track(() => hooks.perfwarning({ ...body, source: 'operator', actor: actorName(req.identity) }));
    res.status(200).json(result);
  });

  router.delete('/v1/hooks/perfwarning', async (req, res) => {
    const query = validate.perfwarningEndQuery({ ...req.query });
    const result = await work.track(() => hooks.endPerfWarning({ pod: query.pod, reason: 'perf warning withdrawn (DELETE)', actor: actorName(req.identity) }));
    if (!result.ended) throw new AppError('NOT_FOUND', result.reason);
    res.status(200).json(result);
  });

  return router;
}
