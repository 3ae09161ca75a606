// Start-up reconciliation: the state persisted on the pods (draining, perf warnings, migrations) is loaded
// and checked against the live cluster. A mark whose server has left the cluster is released; a migration
// that was in flight when the manager stopped is resumed (its plan is made again from the cluster as it is
// now, so finished moves are not repeated and half-done ones are completed).
// Everything is read before anything changes, so a failed read (Kubernetes or RethinkDB unavailable) leaves
// nothing half-loaded and the caller simply tries again; a migration whose resumption meets an unavailable
// store is retried on its own, so that none is resumed twice.

import { MIGRATION_VERSION } from '../actions/actions.js';
import { managerActor } from '../audit/actor.js';
import { retryUntilDone } from '../lib/retry.js';

const transient = (err) => err?.statusCode === 503;

// Marks change through the executor, as everywhere; the migration records are the actions' own journal.
export async function reconcileState({ kube, store, marks, actions, executor, operations, clock, logger, retry }) {
  const log = logger.child({ module: 'reconcile' });
  const at = new Date(clock.now()).toISOString();
  if (!kube?.listRethinkDbPods) return { at, source: 'none', note: 'no Kubernetes API: state is kept in memory only', loaded: [], released: [], resumed: [] };
  const pods = await kube.listRethinkDbPods();
  const cluster = await store.readCluster();
  // Replacing what memory holds: a replica that leads again must not act on marks another leader has since changed.
  const { loaded, unreadable } = marks.load(pods, { replace: true });
  const present = new Set(cluster.servers.map((s) => s.id));
  const gone = (await marks.list()).filter((mark) => !present.has(mark.serverId));
  if (gone.length > 0) await executor.run([{ type: 'release', servers: gone.map((mark) => mark.serverId) }], { actor: managerActor('reconcile'), pod: null });
  const released = gone.map((mark) => ({ server: mark.serverName, pod: mark.pod, reason: 'its server is no longer in the cluster' }));
  const resumed = [];
  // The migrations are planned on the cluster read above, until a half-done move had to be finished first or an
  // attempt failed: from then on each reads it again.
  const read = { cluster };
  const migrations = await marks.migrations();
  // Shared by the attempts: a half-done move finished by one attempt is not finished again by the next.
  const progressOf = new Map(migrations.map((m) => [m.serverId, { finished: null }]));
  const settledIds = new Set();
  // Every half-done move first, then the migrations: a resumed migration holds each shard while it moves it, so a
  // half-done move of one of its shards, finished after it started, would wait for that move.
  for (const phase of ['finish', 'restart']) {
    for (const m of migrations) {
      if (settledIds.has(m.serverId)) continue;
      const outcome = await retryUntilDone(() => resumeMigration(m, progressOf.get(m.serverId), read, { marks, actions, operations }, phase), {
        clock, ...retry, retryable: transient,
        onFailure: (err, { attempt, delayMs }) => {
          read.cluster = null;
          log.warn({ server: m.serverName, err: err.message, attempt, retryInMs: delayMs }, 'migration not resumed yet; retrying');
        },
      }).catch(async (err) => {
        await marks.clearMigration(m.serverId);
        return { server: m.serverName, action: m.action, previousOperation: m.operationId, outcome: 'not resumed', reason: err.message };
      });
      if (outcome) {
        resumed.push(outcome);
        settledIds.add(m.serverId);
      }
    }
  }
  const result = { at, source: 'pod annotations', loaded, unreadable, released, resumed };
  log.info({ loaded: loaded.length, released: released.length, resumed: resumed.length, unreadable: unreadable.length }, 'state reconciled');
  return result;
}

// phase 'finish': drop a record of another version, or finish its half-done move; resolves null when the migration
// goes on to the next phase. phase 'restart': start it again from its intent.
async function resumeMigration(m, progress, read, { marks, actions, operations }, phase) {
  if (m.version !== MIGRATION_VERSION || !m.intent) {
    await marks.clearMigration(m.serverId);
    return { server: m.serverName, action: m.action, outcome: 'dropped', reason: `a migration record of version ${m.version ?? 'none'}, not ${MIGRATION_VERSION}` };
  }
  if (phase === 'finish') {
    if (m.inFlight && !progress.finished) {
      const { operation } = await actions.finishMove(
        { move: m.inFlight, reason: 'finish the move a stopped manager left half-done' },
        { actor: managerActor('reconcile'), snapshot: read.cluster },
      );
      // eslint-disable-next-line no-param-reassign
      read.cluster = null;
      // eslint-disable-next-line no-param-reassign
      progress.finished = await operations.wait(operation.id);
    }
    return null;
  }
  const { finished } = progress;
  const started = await actions.restartMigration(
    m,
    { reason: `resumed after a manager restart (was operation ${m.operationId})` },
    { actor: managerActor('reconcile'), snapshot: read.cluster },
  );
  return {
    server: m.serverName, action: m.action, previousOperation: m.operationId, operation: started.operation.id, outcome: 'resumed',
    halfDoneMove: finished ? { operation: finished.id, status: finished.status } : null,
  };
}
