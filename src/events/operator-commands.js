// The operator's actions that put or take a draining mark (move-primaries-from-server and -node,
// release-server, migrate-replicas-off). Like the events, each reads the cluster once, takes its intents from the
// pure policy and has the executor run them, so that the executor stays the only writer of marks and the actions
// only reconfigure RethinkDB. The other operator actions are the actions themselves.

import { decideOperatorDrain, decideRelease } from '../policy/lifecycle.js';
import { decideMigrateReplicasOff } from '../policy/migrations.js';
import { resultOf } from './executor.js';

// ctx (each command): the operation context (src/actions/operation-context.js) the route made
// (src/routes/action-routes.js): actor, dryRun, deadline (or null); the command adds the cluster it read.
export function createOperatorCommands({ marks, executor, targets, audit, logger }) {
  const log = logger.child({ module: 'operator' });

  // The answer names the servers left marked draining (`draining`; a dry run: the ones it would mark): a server that
  // holds no primary answers nothing_to_do, yet it is kept off from then on, until release-server.
  async function movePrimariesFromServer({ server, reason }, ctx = {}) {
    const { cluster, server: s } = await targets.serverByRef(server);
    const decision = decideOperatorDrain({ servers: [s], reason });
    const done = await executor.run(decision.intents, { ...ctx, snapshot: cluster });
    return { ...resultOf(done, 'demote'), draining: [s.name] };
  }

  // Every RethinkDB pod on the node, in one plan; pods without a connected server are listed as unmapped.
  async function movePrimariesFromNode({ node, reason }, ctx = {}) {
    const { cluster, targets: found } = await targets.serversOnNode(node);
    const servers = found.filter((t) => t.server).map((t) => t.server);
    const decision = decideOperatorDrain({ servers, node, pods: found.map((t) => t.pod), reason });
    const done = await executor.run(decision.intents, { ...ctx, snapshot: cluster });
    const unmappedPods = found.filter((t) => !t.server).map((t) => ({ pod: t.pod, reason: 'no connected RethinkDB server matches this pod' }));
    return { ...resultOf(done, 'demote'), draining: servers.map((x) => x.name), unmappedPods };
  }

  async function releaseServer({ server, rebalance = true, reason }, ctx = {}) {
    const { actor, dryRun = false } = ctx;
    const { cluster, server: s } = await targets.serverByRef(server);
    const wasDraining = Boolean(await marks.getDraining(s.id));
    const decision = decideRelease({ server: s, rebalance, reason });
    const done = await executor.run(decision.intents, { ...ctx, pod: s.pod, snapshot: cluster });
    log.info({ server: s.name, wasDraining, reason }, 'server released');
    if (!dryRun && !rebalance) {
      audit.record({ actor, action: 'release-server', target: { server: s.name }, pod: s.pod, reason, outcome: wasDraining ? 'completed' : 'nothing_to_do' });
    }
    const rebalanced = resultOf(done, 'rebalance-primaries');
    return { action: 'release-server', target: { server: s.name }, dryRun, wasDraining, rebalance: rebalanced, outcome: rebalanced?.outcome ?? 'completed' };
  }

  async function migrateReplicasOff({ server, reason }, ctx = {}) {
    const { cluster, server: s } = await targets.serverByRef(server);
    const decision = decideMigrateReplicasOff({ server: s, reason });
    const done = await executor.run(decision.intents, { ...ctx, snapshot: cluster });
    return { ...resultOf(done, 'migrate-replicas-off'), demotion: resultOf(done, 'demote') };
  }

  return {
    movePrimariesFromServer, movePrimariesFromNode, releaseServer, migrateReplicasOff,
  };
}
