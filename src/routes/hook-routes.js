// Lifecycle-hook endpoints called by the RethinkDB pods' container hooks (curl from an exec hook).
// preStop blocks the pod's termination while the grace period runs, so this answers by its deadline, always.

import { Router } from 'express';
import { AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { compileValidator, objectSchema } from './validation.js';

const podQuery = objectSchema({
  pod: { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$' },
  dryRun: { enum: ['true', 'false'] },
}, ['pod']);

export function createHookRoutes({ hooks, work, prestopDeadlineSeconds }) {
  const router = Router();
  const validateQuery = compileValidator(podQuery, 'query');

  router.post('/v1/hooks/prestop', async (req, res) => {
    const query = validateQuery({ ...req.query });
    const deadlineMs = prestopDeadlineSeconds * 1000;
    // The action has its own deadline for waiting; this outer limit also covers a data store that hangs.
    const result = await withinMs(
      work.track(() => hooks.prestop({ pod: query.pod, dryRun: query.dryRun === 'true', deadlineSeconds: Math.max(1, prestopDeadlineSeconds - 1) })),
      deadlineMs,
      () => new AppError('DEADLINE_EXCEEDED', `preStop for ${query.pod} did not finish within ${prestopDeadlineSeconds} s; the pod may stop with primaries still on it`),
    );
    res.status(200).json(result);
  });

  return router;
}
