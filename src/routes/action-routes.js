// The operator REST API: one route per intent. Each route validates, calls its action, and responds.
// Data-moving actions answer 202 with an operation to follow; `?dryRun=true` returns the plan only.

import { Router } from 'express';
import { actorName } from '../auth/access-policy.js';
import { compileValidator, dryRunQuery, fields, objectSchema } from './validation.js';

const common = { deadlineSeconds: fields.deadlineSeconds, reason: fields.reason };

// The route table is also what the README's API reference and later the OpenAPI document describe.
export const ACTION_ROUTES = [
  { path: 'move-primaries-from-server', action: 'movePrimariesFromServer', schema: objectSchema({ server: fields.server, ...common }, ['server']) },
  { path: 'move-primaries-from-node', action: 'movePrimariesFromNode', schema: objectSchema({ node: fields.node, ...common }, ['node']) },
  { path: 'rebalance-primaries', action: 'rebalancePrimaries', schema: objectSchema({ ...common }) },
  { path: 'release-server', action: 'releaseServer', schema: objectSchema({ server: fields.server, rebalance: fields.flag, ...common }, ['server']) },
  {
    path: 'add-server', action: 'addServer', movesData: true,
    schema: objectSchema({ server: fields.server, tables: { type: 'array', items: fields.table, minItems: 1, maxItems: 1000, uniqueItems: true }, grow: fields.flag, ...common }, ['server']),
  },
  { path: 'create-replica', action: 'createReplica', movesData: true, schema: objectSchema({ table: fields.table, shard: fields.shard, server: fields.server, ...common }, ['table', 'shard', 'server']) },
  { path: 'migrate-replicas-off', action: 'migrateReplicasOff', movesData: true, schema: objectSchema({ server: fields.server, ...common }, ['server']) },
];

export function createActionRoutes({ actions, work }) {
  const router = Router();
  const validateQuery = compileValidator(dryRunQuery, 'query');
  for (const route of ACTION_ROUTES) {
    const validateBody = compileValidator(route.schema, 'body');
    router.post(`/v1/actions/${route.path}`, async (req, res) => {
      const query = validateQuery({ ...req.query });
      const body = validateBody(req.body ?? {});
      const dryRun = query.dryRun === 'true';
      const result = await work.track(() => actions[route.action]({ ...body, dryRun, actor: actorName(req.identity) }));
      if (result.operation) {
        const href = `/v1/operations/${result.operation.id}`;
        res.status(202).location(href).json({ ...result, operation: { id: result.operation.id, status: result.operation.status, href } });
        return;
      }
      res.status(200).json(result);
    });
  }
  return router;
}
