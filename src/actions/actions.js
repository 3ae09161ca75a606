// The paper's actions (moving primaries off servers, addServer, createReplica) and the ones around them
// (rebalancePrimaries, migrateReplicasOff, replaceServer): those that move primaries (./primary-actions.js) and those
// that move data (./replica-actions.js). Each reconfigures RethinkDB and returns a report; none writes a mark on a
// server (the events' executor does, src/events/executor.js).

import { podNameForServer } from '../cluster/cluster-model.js';
import { createPrimaryActions } from './primary-actions.js';
import { createReplicaActions } from './replica-actions.js';

export { MIGRATION_VERSION } from './replica-actions.js';

// podNameOf(server): the pod a server runs in (its audit records name it), with POD_SERVER_OVERRIDES applied.
export function createActions(deps) {
  const podNameOf = (server) => podNameForServer(server, deps.config.podServerOverrides);
  const primaries = createPrimaryActions({ ...deps, podNameOf });
  const replicas = createReplicaActions({ ...deps, podNameOf, rebalancePrimaries: primaries.rebalancePrimaries });
  return { ...primaries, ...replicas };
}
