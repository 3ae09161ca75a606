// The actions that move data, one replica at a time as an operation whose progress is visible: createReplica and
// addServer (the paper's), migrateReplicasOff and replaceServer; the retry of a migration left unfinished, and the
// finishing of a move a restarted manager found half done. Each keeps the journal of its own data moves (the
// migration record on the server concerned), so that a restarted manager can resume them; none writes another mark.

import { appError } from '../errors.js';
import { findTable, resolveServer, tableLabel } from '../cluster/cluster-model.js';
import { managerActor } from '../audit/actor.js';
import { createDeadline, deadlineOr } from '../lib/clock.js';
import { createKeyedMutex } from '../lib/keyed-mutex.js';
import { timePlanning } from '../lib/trace.js';
import { headroomOption } from '../planner/headroom.js';
import { clusterOf, marksOf } from './operation-context.js';
import { decideAfterRefusedFinalize, decideMigrationRetry } from '../policy/migrations.js';
import {
  planAddServer, planCreateReplica, planFinalizeReplica, planMigrateReplicasOff, planReplaceServer, planStageReplica, planUnstageReplica,
  projectMoves,
} from '../planner/replica-planner.js';
import {
  describeShard, namedItems, outcomeOf, plannedReplicaMoves,
} from './report.js';

// The shape of a persisted migration record ({ version, action, intent, ... }); older shapes are not replayed.
export const MIGRATION_VERSION = 1;

// rebalancePrimaries: the primary action (./primary-actions.js) that gives a new or replacement server its share of
// primaries once its replicas are in. podNameOf: see ./actions.js. headroom: see ./primary-actions.js (a migration's
// targets are chosen by it too).
export function createReplicaActions({
  store, reconfigurer, marks, operations, clock, logger, config, audit, rebalancePrimaries, podNameOf, headroom = () => null,
}) {
  const log = logger.child({ module: 'actions' });
  // One replica move of a shard at a time, held from its staging to its finalizing write: another move of the same
  // shard (a second migration, a create-replica) waits, then plans its step on what the first left. Without it, a move
  // counted another's staged nonvoting replica as its own and finalized the shard one replica short.
  const shardMoves = createKeyedMutex();

  function resolveTable(cluster, ref) {
    const table = findTable(cluster, ref);
    if (!table) {
      const known = cluster.tables.map(tableLabel).join(', ');
      throw appError('tableNotManaged', { ref, known });
    }
    return table;
  }

  // ctx (here and below): the operation context (./operation-context.js).
  async function createReplica({
    table, shard, server, reason,
  }, ctx = {}) {
    const cluster = await clusterOf(store, ctx);
    const t = resolveTable(cluster, table);
    // A table RethinkDB cannot describe (none of its replicas reachable) has no shards to name.
    if (t.error) throw appError('tableUnreadable', { table: tableLabel(t), error: t.error });
    if (!Number.isInteger(shard) || shard < 0 || shard >= t.shards.length) {
      throw appError('shardNotFound', { table: tableLabel(t), last: t.shards.length - 1, shard });
    }
    const s = resolveServer(cluster, server);
    const draining = await marksOf(ctx, marks).drainingIds();
    const plan = timePlanning(() => planCreateReplica(cluster, t.id, shard, s.id, { draining }));
    return startReplicaMoves({
      action: 'create-replica', target: { table: tableLabel(t), shard, server: s.name }, intent: { type: 'create-replica', tableId: t.id, shard, serverId: s.id }, stateServer: s,
      cluster, plan, reason,
    }, ctx);
  }

  // The server counts as draining for the plan whether or not it is marked (a perf warning keeps its own mark).
  async function migrateReplicasOff({ server, reason }, ctx = {}) {
    const cluster = await clusterOf(store, ctx);
    const s = resolveServer(cluster, server);
    const draining = await marksOf(ctx, marks).drainingIds([s.id]);
    const headroomNow = headroomOption(headroom(), cluster.servers);
    const plan = timePlanning(() => planMigrateReplicasOff(cluster, s.id, { draining, headroom: headroomNow }));
    return startReplicaMoves({
      action: 'migrate-replicas-off', target: { server: s.name }, intent: { type: 'migrate-replicas-off', serverId: s.id }, stateServer: s,
      cluster, plan, reason,
    }, ctx);
  }

  // POSTSTART replacement: recreate a lost server's replicas on the new server, then rebalance primaries.
  async function replaceServer({ lost, server, reason }, ctx = {}) {
    const cluster = await clusterOf(store, ctx);
    const gone = resolveServer(cluster, lost);
    const s = resolveServer(cluster, server);
    if (gone.connected) throw appError('replaceConnected', { server: gone.name });
    const plan = timePlanning(() => planReplaceServer(cluster, gone.id, s.id));
    return startReplicaMoves({
      action: 'replace-server', target: { lost: gone.name, server: s.name }, intent: { type: 'replace-server', lostId: gone.id, serverId: s.id }, stateServer: s,
      cluster, plan, reason, afterMoves: giveShareOfPrimaries(s, ctx),
    }, ctx);
  }

  async function addServer({
    server, tables, grow = false, reason,
  }, ctx = {}) {
    const cluster = await clusterOf(store, ctx);
    const s = resolveServer(cluster, server);
    const tableIds = tables ? tables.map((ref) => resolveTable(cluster, ref).id) : null;
    const draining = await marksOf(ctx, marks).drainingIds();
    const plan = timePlanning(() => planAddServer(cluster, s.id, { draining, tableIds, grow }));
    return startReplicaMoves({
      action: 'add-server', target: { server: s.name, tables: tables ?? null, grow }, intent: { type: 'add-server', serverId: s.id, tableIds, grow }, stateServer: s,
      cluster, plan, reason, afterMoves: giveShareOfPrimaries(s, ctx, { take: 'busiest' }),
    }, ctx);
  }

  // After a new or replacement server's replicas are in: the primaries it gets, by load, on the tables it was given.
  // A replacement takes the quietest shards (a handover fails what reaches its shard meanwhile); a server added for
  // capacity (add-server) the busiest, so that it takes load at once. planned: a dry run's context ({ dryRun,
  // snapshot }: the cluster as the moves will leave it); the real run's levelling reads the cluster then, and has its
  // own deadline.
  function giveShareOfPrimaries(s, { actor, marks: view }, { take = 'quietest' } = {}) {
    const reason = take === 'busiest' ? `give ${s.name} its share of primaries, the busiest it can take (it adds capacity)` : `give ${s.name} its share of primaries`;
    return (touched, planned = {}) => rebalancePrimaries(
      { tableIds: touched, reason, byLoad: true, take },
      { actor, pod: podNameOf(s), marks: view, ...planned },
    );
  }

  // Data moves: a dry run returns the plan; otherwise an operation runs them one replica at a time. While it
  // runs, the migration is recorded on the server concerned, so that a restarted manager can resume it.
  async function startReplicaMoves({
    action, target, intent, stateServer, cluster, plan, reason, afterMoves,
  }, ctx) {
    const { actor, dryRun = false, deadline = null } = ctx;
    const planned = plannedReplicaMoves(cluster, plan.moves);
    const skipped = namedItems(cluster, plan.skipped);
    if (dryRun) {
      // The primaries given afterwards, planned on the cluster as the moves will leave it.
      const touched = [...new Set(plan.moves.map((m) => m.tableId))];
      const primaries = touched.length > 0 && afterMoves
        ? await afterMoves(touched, { dryRun: true, snapshot: projectMoves(cluster, plan.moves, { draining: await marksOf(ctx, marks).drainingIds() }) })
        : null;
      return { action, target, dryRun, outcome: 'planned', changes: planned, skipped, notDone: [], ...(primaries ? { primaries } : {}) };
    }
    const pod = podNameOf(stateServer);
    const op = operations.start(action, target, async (operation) => {
      const migration = { version: MIGRATION_VERSION, action, intent, operationId: operation.id, reason: reason ?? null, startedAt: operation.createdAt, inFlight: null };
      const ref = { serverName: stateServer.name, pod };
      // Read before the record is written again (which drops its retry), so that the backoff grows with each retry.
      const attempt = (await marks.getMigration(stateServer.id))?.retry?.attempt ?? 0;
      await marks.setMigration(stateServer.id, migration, ref);
      // The move being made is recorded too, so that a restarted manager can finish it before re-planning.
      const track = (move) => marks.setMigration(stateServer.id, { ...migration, inFlight: move }, ref);
      const outcome = { report: null, failure: null };
      try {
        outcome.report = await runReplicaMoves(operation, { action, target, moves: plan.moves, planned, skipped, deadline, reason, afterMoves, track });
        audit.record({ actor, pod, operation: operation.id, ...outcome.report });
        return outcome.report;
      } catch (err) {
        outcome.failure = err;
        audit.record({ actor, action, target, pod, reason, operation: operation.id, outcome: 'failed', notDone: [{ reason: err.message }] });
        throw err;
      } finally {
        // Work the cluster was not ready for stays recorded, to be retried (and resumed after a restart).
        const retry = await retryLater({ ...outcome, tableIds: [...plan.moves, ...plan.skipped].map((m) => m.tableId), attempt: attempt + 1 });
        if (retry) await marks.setMigration(stateServer.id, { ...migration, inFlight: null, retry }, ref);
        else await marks.clearMigration(stateServer.id);
      }
    });
    return { action, target, dryRun, operation: op };
  }

  // When a migration that ended unfinished is tried again (decided by the policy); null when not at all.
  async function retryLater({ report = null, failure = null, tableIds = [], attempt }) {
    const unfinished = report && (report.notDone.length > 0 || report.skipped.length > 0);
    const cluster = unfinished ? await store.readCluster().catch(() => null) : null;
    const retry = decideMigrationRetry({ report, failure, cluster, tableIds, attempt, now: clock.now(), retry: config.retry });
    if (retry) log.info({ attempt, retryAt: retry.at, reason: retry.reason }, 'migration unfinished; it will be retried');
    return retry;
  }

  // A recorded migration, started again from its intent (re-planned from the cluster as it is now). Servers and
  // tables are named by id, which a rename or a replacement under the same name does not change.
  // A draining mark the migration set stays on the server with the rest of its marks; it is not set again.
  // ctx: the operation context (its snapshot: the cluster as the caller read it, to plan on).
  function restartMigration(migration, { reason }, ctx = {}) {
    const { version, intent } = migration;
    if (version !== MIGRATION_VERSION || !intent) throw appError('migrationVersion', { version, expected: MIGRATION_VERSION });
    const run = {
      'migrate-replicas-off': () => migrateReplicasOff({ server: intent.serverId, reason }, ctx),
      'add-server': () => addServer({
        server: intent.serverId, tables: intent.tableIds ?? undefined, grow: intent.grow, reason,
      }, ctx),
      'replace-server': () => replaceServer({ lost: intent.lostId, server: intent.serverId, reason }, ctx),
      'create-replica': () => createReplica({
        table: intent.tableId, shard: intent.shard, server: intent.serverId, reason,
      }, ctx),
    }[intent.type];
    if (!run) throw appError('migrationIntentUnknown', { type: intent.type });
    return run();
  }

  // Periodic: migrations whose retry is due run again, until they finish or are no longer needed (their
  // servers are gone, or the lost server came back). They are planned on one read of the cluster, made only when
  // one is due (each operation reads again under its table locks before it writes).
  async function retryDueMigrations({ actor = managerActor('retry') } = {}) {
    const results = [];
    const due = (await marks.migrations())
      .filter((m) => m.retry && Date.parse(m.retry.at) <= clock.now() && operations.get(m.operationId)?.status !== 'running');
    // A failed read: each restart reads (and fails, and is retried later) on its own.
    const snapshot = due.length > 0 ? await store.readCluster().catch(() => null) : null;
    for (const m of due) {
      try {
        const { operation } = await restartMigration(m, { reason: `retry ${m.retry.attempt} (${m.retry.reason}); first: ${m.reason}` }, { actor, snapshot });
        results.push({ server: m.serverName, action: m.action, operation: operation.id, outcome: 'retried' });
      } catch (err) {
        const retry = err.statusCode === 503 ? await retryLater({ failure: err, attempt: m.retry.attempt + 1 }) : null;
        const { serverId, serverName, pod, persisted, ...migration } = m;
        if (retry) await marks.setMigration(serverId, { ...migration, retry }, { serverName, pod });
        else await marks.clearMigration(serverId);
        results.push({ server: serverName, action: m.action, outcome: retry ? 'retry later' : 'no longer needed', reason: err.message });
      }
    }
    return results;
  }

  async function runReplicaMoves(op, { action, target, moves, planned, skipped, deadline: given = null, reason, afterMoves, track = async () => {} }) {
    const startedAt = clock.now();
    const deadline = deadlineOr(given, clock, config.deadlines.migrationSeconds * 1000);
    // A step keeps only its target's headroom score (the report has its parts and the other candidates').
    op.steps = planned.map(({ headroom, ...p }) => ({
      ...p, ...(headroom ? { headroom: headroom.score } : {}), status: 'pending', state: null, progress: null, error: null, startedAt: null, finishedAt: null,
    }));
    const changes = [];
    const notDone = [];
    const unsettled = [];
    for (let i = 0; i < moves.length; i += 1) {
      const step = op.steps[i];
      if (deadline.expired()) {
        step.status = 'not_started';
        notDone.push({ table: step.table, shard: step.shard, reason: 'deadline passed before this move started' });
        continue;
      }
      const {
        tableId, shard, from, to,
      } = moves[i];
      await track({
        tableId, shard, from, to,
      });
      const result = await moveOneReplica(moves[i], step, deadline);
      await track(null);
      if (!result.change) {
        notDone.push({ table: step.table, shard: step.shard, reason: step.error });
        continue;
      }
      changes.push(result.change);
      if (!result.settled) unsettled.push({ table: step.table, shard: step.shard, reason: step.error });
    }
    const touched = [...new Set(changes.map((c) => c.tableId))];
    const primaries = touched.length > 0 && afterMoves ? await afterMoves(touched) : null;
    const report = {
      action, target, dryRun: false, reason: reason ?? null, changes, skipped, notDone,
      settled: unsettled.length === 0, pending: unsettled, primaries, durationMs: clock.now() - startedAt,
    };
    report.outcome = outcomeOf(report);
    log.info({ action, target, reason, outcome: report.outcome, moved: changes.length, notDone: notDone.length, durationMs: report.durationMs }, 'action finished');
    return report;
  }

  async function moveOneReplica(move, step, deadline) {
    step.status = 'waiting';
    try {
      return await shardMoves.runExclusive(`${move.tableId}:${move.shard}`, () => moveHeldReplica(move, step, deadline), { timeoutMs: deadline.remainingMs() });
    } catch (err) {
      if (err.code !== 'DEADLINE_EXCEEDED' || step.status !== 'waiting') throw err;
      step.status = 'not_started';
      step.error = 'deadline passed while another move of this shard was running';
      return { change: null };
    }
  }

  // The move's two writes and the wait between them, while no other move of the shard runs.
  async function moveHeldReplica(move, step, deadline) {
    const stamp = () => new Date(clock.now()).toISOString();
    const fail = (status, error) => { step.status = status; step.error = error; step.finishedAt = stamp(); return { change: null }; };
    step.status = 'staging';
    step.startedAt = stamp();
    const staged = await reconfigurer.commit((c, draining) => planStageReplica(c, move, { draining }), { tableIds: [move.tableId], deadline });
    const stageProblem = staged.notDone[0] ?? staged.plan.skipped[0];
    if (stageProblem) return fail('failed', stageProblem.reason);
    const before = staged.cluster.tables.find((t) => t.id === move.tableId)?.shards[move.shard];
    step.status = 'backfilling';
    const ready = await reconfigurer.waitForReplicaReady(move.tableId, move.shard, move.to, deadline, (p) => {
      step.state = p.state;
      step.progress = p.progress;
    });
    if (!ready.settled) return fail('timed_out', `deadline passed while the replica was ${step.state}; it stays as a nonvoting replica`);
    step.status = 'finalizing';
    const finalized = await reconfigurer.commit((c, draining) => planFinalizeReplica(c, move, { draining }), { tableIds: [move.tableId], deadline });
    const finalProblem = finalized.notDone[0] ?? finalized.plan.skipped[0];
    if (finalProblem) {
      const refusal = decideAfterRefusedFinalize({ planRefused: Boolean(finalized.plan.skipped[0]), stageWrote: staged.written.length > 0 });
      const undone = refusal.unstage ? await unstage(move, step.to) : '';
      return fail('failed', `${finalProblem.reason}${undone}`);
    }
    const table = finalized.cluster.tables.find((t) => t.id === move.tableId);
    const after = finalized.written[0]?.change.shards[move.shard] ?? table.shards[move.shard];
    const settleDeadline = createDeadline(clock, Math.min(deadline.remainingMs(), config.deadlines.actionSeconds * 1000));
    const settled = await reconfigurer.waitForPrimaries([{ tableId: move.tableId, shards: [move.shard] }], settleDeadline);
    step.status = settled.settled ? 'done' : 'done_unsettled';
    step.progress = 1;
    step.finishedAt = stamp();
    if (!settled.settled) step.error = `written, but not settled in time: ${settled.pending.map((p) => p.reason).join('; ')}`;
    return {
      settled: settled.settled,
      change: {
        table: step.table, tableId: move.tableId, shard: move.shard, kind: 'replica', from: step.from, to: step.to,
        before: before ? describeShard(finalized.cluster, before) : null, after: describeShard(finalized.cluster, after),
      },
    };
  }

  // Takes the replica a move staged out again, on its own deadline (the move's may be spent). Returns what to add to
  // the move's reason: what became of the staged replica (on `name`).
  async function unstage(move, name) {
    const deadline = createDeadline(clock, config.deadlines.actionSeconds * 1000);
    try {
      const undone = await reconfigurer.commit((c) => planUnstageReplica(c, move), { tableIds: [move.tableId], deadline });
      const problem = undone.notDone[0] ?? undone.plan.skipped[0];
      if (!problem) return `; the replica staged on ${name} was taken out again`;
      log.warn({ move, reason: problem.reason }, 'staged replica not taken out');
      return `; the replica staged on ${name} could not be taken out (${problem.reason}) and stays nonvoting`;
    } catch (err) {
      log.warn({ move, err: err.message }, 'staged replica not taken out');
      return `; the replica staged on ${name} could not be taken out (${err.message}) and stays nonvoting`;
    }
  }

  // Restart recovery: finish one half-done move (stage again if needed, wait, finalize) as an operation.
  async function finishMove({ move, reason }, ctx = {}) {
    const { actor } = ctx;
    const cluster = await clusterOf(store, ctx);
    const [planned] = plannedReplicaMoves(cluster, [move]);
    const op = operations.start('finish-move', planned, async (operation) => {
      const deadline = createDeadline(clock, config.deadlines.migrationSeconds * 1000);
      operation.steps = [{ ...planned, status: 'pending', state: null, progress: null, error: null }];
      const result = await moveOneReplica(move, operation.steps[0], deadline);
      const report = {
        action: 'finish-move', target: planned, dryRun: false, reason, changes: result.change ? [result.change] : [], skipped: [],
        notDone: result.change ? [] : [{ table: planned.table, shard: planned.shard, reason: operation.steps[0].error }], settled: Boolean(result.settled),
      };
      report.outcome = outcomeOf(report);
      audit.record({ actor, operation: operation.id, ...report });
      return report;
    });
    return { operation: op };
  }

  return {
    finishMove, restartMigration, retryDueMigrations, createReplica, migrateReplicasOff, addServer, replaceServer,
  };
}
