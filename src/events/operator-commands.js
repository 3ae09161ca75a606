// The operator's actions that put or take a draining mark (move-primaries-from-server and -node,
// release-server, migrate-replicas-off). Like the events, each reads the cluster once, takes its intents from the
// pure policy and has the executor run them, so that the executor stays the only writer of marks and the actions
// only reconfigure RethinkDB. The other operator actions are the actions themselves.

import { decideOperatorDrain, decideRelease } from '../policy/lifecycle.js';
import { decideMigrateReplicasOff } from '../policy/migrations.js';
import { resultOf } from './executor.js';

// deadline (each command): the request's, made by the route (src/routes/action-routes.js), or null.
export function createOperatorCommands({ marks, executor, targets, audit, logger }) {
  const log = logger.child({ module: 'operator' });

  async function movePrimariesFromServer({ server, dryRun = false, deadline, reason, actor }) {
    const { cluster, server: s } = await targets.serverByRef(server);
    const decision = decideOperatorDrain({ servers: [s], reason });
    const done = await executor.run(decision.intents, { actor, dryRun, deadline, snapshot: cluster });
    return resultOf(done, 'demote');
  }

  // Every RethinkDB pod on the node, in one plan; pods without a connected server are listed as unmapped.
  async function movePrimariesFromNode({ node, dryRun = false, deadline, reason, actor }) {
    const { cluster, targets: found } = await targets.serversOnNode(node);
    const servers = found.filter((t) => t.server).map((t) => t.server);
    const decision = decideOperatorDrain({ servers, node, pods: found.map((t) => t.pod), reason });
    const done = await executor.run(decision.intents, { actor, dryRun, deadline, snapshot: cluster });
    const unmappedPods = found.filter((t) => !t.server).map((t) => ({ pod: t.pod, reason: 'no connected RethinkDB server matches this pod' }));
    return { ...resultOf(done, 'demote'), unmappedPods };
  }

  async function releaseServer({ server, rebalance = true, dryRun = false, deadline, reason, actor }) {
    const { cluster, server: s } = await targets.serverByRef(server);
    const wasDraining = Boolean(await marks.getDraining(s.id));
    const decision = decideRelease({ server: s, rebalance, reason });
    const done = await executor.run(decision.intents, { actor, pod: s.pod, dryRun, deadline, snapshot: cluster });
    log.info({ server: s.name, wasDraining, reason }, 'server released');
    if (!dryRun && !rebalance) {
      audit.record({ actor, action: 'release-server', target: { server: s.name }, pod: s.pod, reason, outcome: wasDraining ? 'completed' : 'nothing_to_do' });
    }
    const rebalanced = resultOf(done, 'rebalance-primaries');
    return { action: 'release-server', target: { server: s.name }, dryRun, wasDraining, rebalance: rebalanced, outcome: rebalanced?.outcome ?? 'completed' };
  }

  async function migrateReplicasOff({ server, dryRun = false, deadline, reason, actor }) {
    const { cluster, server: s } = await targets.serverByRef(server);
    const decision = decideMigrateReplicasOff({ server: s, reason });
    const done = await executor.run(decision.intents, { actor, dryRun, deadline, snapshot: cluster });
    return { ...resultOf(done, 'migrate-replicas-off'), demotion: resultOf(done, 'demote') };
  }

  return {
    movePrimariesFromServer, movePrimariesFromNode, releaseServer, migrateReplicasOff,
  };
}
