// The operator REST API: one route per intent. Each route validates, calls its action, and responds.
// Data-moving actions answer 202 with an operation to follow; `?dryRun=true` returns the plan only.

import { Router } from 'express';
import { callerActor } from '../audit/actor.js';
import { deadlineIn } from '../lib/clock.js';
import { traced } from '../lib/trace.js';
import { dryRunQuery, fields, mountRoute, objectSchema } from './validation.js';

const common = { deadlineSeconds: fields.deadlineSeconds, reason: fields.reason };

// The route table is also what docs/api.md and the OpenAPI document describe.
export const ACTION_ROUTES = [
  {
    path: 'move-primaries-from-server', action: 'movePrimariesFromServer', schema: objectSchema({ server: fields.server, ...common }, ['server']),
    summary: 'Demote every primary on a server and mark it draining',
  },
  {
    path: 'move-primaries-from-node', action: 'movePrimariesFromNode', schema: objectSchema({ node: fields.node, ...common }, ['node']),
    summary: 'Demote every primary of the RethinkDB pods on a Kubernetes node, in one plan',
  },
  {
    path: 'rebalance-primaries', action: 'rebalancePrimaries', schema: objectSchema({ ...common }),
    summary: 'Even out primaries over healthy, non-draining servers',
  },
  {
    path: 'release-server', action: 'releaseServer', report: 'ReleaseResult', schema: objectSchema({ server: fields.server, rebalance: fields.flag, ...common }, ['server']),
    summary: "Clear a server's draining mark and (unless rebalance is false) rebalance",
  },
  {
    path: 'add-server', action: 'addServer', movesData: true,
    schema: objectSchema({ server: fields.server, tables: { type: 'array', items: fields.table, minItems: 1, maxItems: 1000, uniqueItems: true }, grow: fields.flag, ...common }, ['server']),
    summary: 'Give a server a fair share of replicas, then of primaries',
  },
  {
    path: 'create-replica', action: 'createReplica', movesData: true,
    schema: objectSchema({ table: fields.table, shard: fields.shard, server: fields.server, ...common }, ['table', 'shard', 'server']),
    summary: 'Add one replica of one shard on a given server',
  },
  {
    path: 'migrate-replicas-off', action: 'migrateReplicasOff', movesData: true, schema: objectSchema({ server: fields.server, ...common }, ['server']),
    summary: 'Move every replica off a server, one shard at a time',
  },
];

// What the OpenAPI document and the router both read: method, path and the three input schemas.
export const ACTION_ROUTE_SPECS = ACTION_ROUTES.map((route) => ({
  method: 'post',
  path: `/v1/actions/${route.path}`,
  operationId: route.action,
  tag: 'actions',
  summary: route.summary,
  description: route.movesData
    ? 'Answers 202 with an operation to follow (also in Location); with ?dryRun=true, 200 with the plan and nothing changes.'
    : 'Answers 200 with the report once the new primaries act, or at the deadline; with ?dryRun=true, the plan and nothing changes.',
  query: dryRunQuery,
  body: route.schema,
  ok: route.movesData
    ? [{ status: 202, description: 'the operation started; follow operation.href', schema: 'DataMoveStarted', location: true }, { status: 200, description: 'dry run: the plan', schema: 'ActionResult' }]
    : [{ status: 200, description: 'the report: changes, skipped, notDone, outcome (planned for a dry run)', schema: route.report ?? 'ActionResult' }],
  errors: ['SERVER_NOT_FOUND', 'TABLE_NOT_FOUND', 'SHARD_NOT_FOUND', 'NODE_NOT_FOUND', 'RECONFIGURATION_REJECTED', 'STARTING', 'SHUTTING_DOWN', 'DATA_STORE_UNAVAILABLE', 'KUBERNETES_UNAVAILABLE', 'DEADLINE_EXCEEDED'],
  run: route.action,
}));

// clock: the manager's; a request's deadlineSeconds becomes one deadline here, which the action and every write it makes
// share.
export function createActionRoutes({ actions, work, clock }) {
  const router = Router();
  for (const spec of ACTION_ROUTE_SPECS) {
    mountRoute(router, spec, async ({ query, body, identity }, res) => {
      const { deadlineSeconds, ...input } = body ?? {};
      // The operation context (src/actions/operation-context.js), made once here.
      const ctx = { actor: callerActor(identity), dryRun: query.dryRun === true, deadline: deadlineIn(clock, deadlineSeconds) };
      const { result, timings } = await traced(() => work.track(() => actions[spec.run](input, ctx)));
      if (result.operation) {
        const href = `/v1/operations/${result.operation.id}`;
        res.status(202).location(href).json({ ...result, operation: { id: result.operation.id, status: result.operation.status, href } });
        return;
      }
      res.status(200).json({ ...result, timings });
    });
  }
  return router;
}
