// Start-up reconciliation: the state persisted on the pods (draining, perf warnings, migrations) is loaded
// and checked against the live cluster. A mark whose server has left the cluster is released; a migration
// that was in flight when the manager stopped is resumed (its plan is made again from the cluster as it is
// now, so finished moves are not repeated and half-done ones are completed).

export async function reconcileState({ kube, store, marks, actions, operations, clock, logger }) {
  const log = logger.child({ module: 'reconcile' });
  const at = new Date(clock.now()).toISOString();
  if (!kube?.listRethinkDbPods) return { at, source: 'none', note: 'no Kubernetes API: state is kept in memory only', loaded: [], released: [], resumed: [] };
  const pods = await kube.listRethinkDbPods();
  const { loaded, unreadable } = marks.load(pods);
  const cluster = await store.readCluster();
  const present = new Set(cluster.servers.map((s) => s.id));
  const released = [];
  for (const mark of await marks.list()) {
    if (!present.has(mark.serverId)) {
      await marks.release(mark.serverId);
      released.push({ server: mark.serverName, pod: mark.pod, reason: 'its server is no longer in the cluster' });
    }
  }
  const resumed = [];
  for (const m of await marks.migrations()) {
    const fn = {
      'migrate-replicas-off': actions.migrateReplicasOff, 'add-server': actions.addServer,
      'replace-server': actions.replaceServer, 'create-replica': actions.createReplica,
    }[m.action];
    if (!fn) {
      await marks.clearMigration(m.serverId);
      resumed.push({ server: m.serverName, action: m.action, outcome: 'dropped', reason: 'unknown action' });
      continue;
    }
    try {
      let finished = null;
      if (m.inFlight) {
        const { operation } = await actions.finishMove({ move: m.inFlight, reason: 'finish the move a stopped manager left half-done', actor: 'manager:reconcile' });
        finished = await operations.wait(operation.id);
      }
      const started = await fn({ ...m.params, reason: `resumed after a manager restart (was operation ${m.operationId})`, actor: 'manager:reconcile' });
      resumed.push({
        server: m.serverName, action: m.action, previousOperation: m.operationId, operation: started.operation.id, outcome: 'resumed',
        halfDoneMove: finished ? { operation: finished.id, status: finished.status } : null,
      });
    } catch (err) {
      await marks.clearMigration(m.serverId);
      resumed.push({ server: m.serverName, action: m.action, previousOperation: m.operationId, outcome: 'not resumed', reason: err.message });
    }
  }
  const result = { at, source: 'pod annotations', loaded, unreadable, released, resumed };
  log.info({ loaded: loaded.length, released: released.length, resumed: resumed.length, unreadable: unreadable.length }, 'state reconciled');
  return result;
}
