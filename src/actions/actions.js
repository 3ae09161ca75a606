// The paper's actions (moving primaries off servers, addServer, createReplica) and the ones around them
// (rebalancePrimaries, migrateReplicasOff, replaceServer): those that move primaries (./primary-actions.js) and those
// that move data (./replica-actions.js). Each reconfigures RethinkDB and returns a report; none writes a mark on a
// server (the events' executor does, src/events/executor.js).

import { createPrimaryActions } from './primary-actions.js';
import { createReplicaActions } from './replica-actions.js';

export { MIGRATION_VERSION } from './replica-actions.js';

export function createActions(deps) {
  const primaries = createPrimaryActions(deps);
  const replicas = createReplicaActions({ ...deps, rebalancePrimaries: primaries.rebalancePrimaries });
  return { ...primaries, ...replicas };
}
