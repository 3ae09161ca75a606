// The paper's actions (moving primaries off servers, addServer, createReplica) and the ones around them
// (rebalancePrimaries, migrateReplicasOff, replaceServer). Each reconfigures RethinkDB and returns a report; none
// writes a mark on a server (the events' executor does, src/events/executor.js). They keep the journal of their
// own data moves (the migration record), so that a restarted manager can resume them.

import { AppError } from '../errors.js';
import {
  findTable, podNameForServer, resolveServer, shardLoads, tableLabel,
} from '../cluster/cluster-model.js';
import { managerActor } from '../audit/actor.js';
import { createDeadline, deadlineOr, withinMs } from '../lib/clock.js';
import { createKeyedMutex } from '../lib/keyed-mutex.js';
import { timePlanning } from '../lib/trace.js';
import { settledSkips } from '../planner/eligibility.js';
import { decideMigrationRetry } from '../policy/migrations.js';
import {
  needsWriteOrder, orderBusiestFirst, planMovePrimariesFromServers, planRebalancePrimaries,
} from '../planner/primary-planner.js';
import {
  planAddServer, planCreateReplica, planFinalizeReplica, planMigrateReplicasOff, planReplaceServer, planStageReplica, projectMoves,
} from '../planner/replica-planner.js';
import {
  describeShard, namedItems, outcomeOf, plannedPrimaryChanges, plannedReplicaMoves, primaryChanges,
} from './report.js';

// The shape of a persisted migration record ({ version, action, intent, ... }); older shapes are not replayed.
export const MIGRATION_VERSION = 1;

// How long a drain waits for its servers to stop acting before it reads the cluster and plans again.
const drainReplanIntervalMs = 1000;
// How long a drain waits for its new primaries to take over before it reads the cluster again: one that meanwhile
// became ineligible (a frozen server dropped by the heartbeat) is handed to another replica then.
const handoverRoundMs = 2000;
// The share of an action's remaining time that reading the client traffic, to order its writes, may take.
const TRAFFIC_READ_SHARE = 0.1;

export function createActions({
  store, reconfigurer, marks, operations, clock, logger, config, audit,
}) {
  const log = logger.child({ module: 'actions' });
  // One replica move of a shard at a time, held from its staging to its finalizing write: another move of the same
  // shard (a second migration, a create-replica) waits, then plans its step on what the first left. Without it, a move
  // counted another's staged nonvoting replica as its own and finalized the shard one replica short.
  const shardMoves = createKeyedMutex();

  const podNameOf = (server) => podNameForServer(server, config.podServerOverrides);

  function resolveTable(cluster, ref) {
    const table = findTable(cluster, ref);
    if (!table) {
      const known = cluster.tables.map(tableLabel).join(', ');
      throw new AppError('TABLE_NOT_FOUND', `table "${ref}" is not managed by this manager (managed: ${known})`);
    }
    return table;
  }

  // Plans, and unless dryRun, commits and waits for the new primaries to act (and, for a drain, until none of
  // the drained servers acts as primary any more, except where the plan could not move it).
  // leaving: the servers a drain takes primaries from, kept off by the plan whether or not they are marked (a dry
  // run writes no mark). snapshot: the cluster as the caller read it to decide (one read per decision); read here
  // otherwise. The commit reads it again under the table locks before it writes.
  // busiestFirst: when the plan has more tables than are written at once, read the client traffic once and write
  // the busiest tables first (orderBusiestFirst), so that a deadline cuts the quiet ones.
  // marksView: the marks the plan reads (a dry run's copy, changed as the real run would change the real ones).
  async function runPrimaryPlan({
    action, target, planFn: plans, dryRun, deadline: given = null, reason, leaving = [], actor, pod, snapshot = null, busiestFirst = false, marksView = marks,
  }) {
    // stats: the traffic rows (null: the plan's order), as the commit's third argument gives them.
    // stalled: see planMovePrimariesFromServers (a drain's shards whose new primary did not take over).
    const planFn = (c, draining, stats = null, stalled = []) => timePlanning(() => {
      const planned = plans(c, draining, stalled);
      return stats ? orderBusiestFirst(planned, shardLoads(c, stats)) : planned;
    });
    const startedAt = clock.now();
    const deadline = deadlineOr(given, clock, config.deadlines.actionSeconds * 1000);
    const cluster = snapshot ?? await store.readCluster();
    const plan = planFn(cluster, await marksView.drainingIds(leaving));
    // Read alongside the commit's own read of the cluster, once (a dry run reads it here).
    let trafficRead = null;
    const traffic = busiestFirst && needsWriteOrder(plan, config.tableWriteConcurrency)
      ? () => { trafficRead ??= readTrafficWithin(deadline); return trafficRead; }
      : null;
    const base = { action, target, dryRun, reason: reason ?? null };
    if (dryRun) {
      const stats = await traffic?.();
      const ordered = stats ? timePlanning(() => orderBusiestFirst(plan, shardLoads(cluster, stats))) : plan;
      const changes = plannedPrimaryChanges(cluster, ordered);
      return { ...base, outcome: 'planned', changes, skipped: namedItems(cluster, plan.skipped), notDone: [], settled: null, durationMs: clock.now() - startedAt };
    }
    const committed = await commitAndWait({ planFn, plan, cluster, deadline, leaving, traffic });
    const report = {
      ...base,
      changes: committed.changes,
      skipped: namedItems(committed.cluster, committed.skipped),
      notDone: namedItems(committed.cluster, committed.notDone),
      settled: committed.wait.settled,
      pending: committed.wait.settled ? [] : namedItems(committed.cluster, committed.wait.pending),
      durationMs: clock.now() - startedAt,
    };
    report.outcome = outcomeOf(report);
    log.info({ action, target, reason, outcome: report.outcome, changes: report.changes.length, skipped: report.skipped.length, durationMs: report.durationMs }, 'action finished');
    audit.record({ actor, action, target, pod: pod ?? null, ...report });
    return report;
  }

  // rethinkdb.stats' traffic rows, or null (then the plan's order) when the read fails or takes more than a tenth of
  // what is left of the deadline: the order is worth less than the writes the time would pay for.
  async function readTrafficWithin(deadline) {
    const limitMs = deadline.remainingMs() * TRAFFIC_READ_SHARE;
    try {
      return await withinMs(store.readTableServerStats(), limitMs, () => new Error(`not read within ${Math.round(limitMs)} ms`));
    } catch (err) {
      log.warn({ err: err.message }, 'traffic not read; writing the tables in the plan\'s order');
      return null;
    }
  }

  // Commits the plan and waits for its new primaries to act; for a drain (leaving), also until the drained
  // servers act for no shard they could leave. RethinkDB may still be electing a lost primary's successor when
  // the plan is made (about 0.5 s after a crash) and then elect a drained server, or the other replicas may still
  // be waiting_for_primary just after it elected one: so a drain that still waits after a round plans again on a
  // fresh read and hands such shards over too, until its deadline.
  // A table another writer changed between the plan's read and the commit's (a concurrent PRESTOP that handed this
  // drain's server a primary) is planned again with its lock held, while the deadline allows, rather than reported.
  // traffic: () => a promise of the client traffic that orders the writes (null: the plan's order).
  // A drain waits for its new primaries in rounds (handoverRoundMs): a shard whose new primary has not taken over by
  // then is planned again as stalled (planMovePrimariesFromServers), so that a new primary frozen after the write
  // (SIGSTOP, a hung node) does not hold the drain until its deadline once RethinkDB has dropped it.
  async function commitAndWait({ planFn, plan, cluster, deadline, leaving, traffic = null }) {
    const changes = [];
    const notDone = [];
    let current = { cluster, plan };
    let stalled = [];
    // The shards written and not yet seen with their new primary acting, by `${tableId}:${shard}`.
    const awaited = new Map();
    // A read that fails (RethinkDB stalls while a frozen server is still counted in) plans nothing this round: the
    // drain goes on waiting and reads again next round, until its deadline.
    const replan = async () => {
      const fresh = await store.readCluster().catch((err) => {
        if (err.code !== 'DATA_STORE_UNAVAILABLE') throw err;
        log.warn({ err: err.message }, 'cluster not read for the next round; waiting');
        return null;
      });
      if (!fresh) return { cluster: current.cluster, plan: { changes: [], skipped: current.plan.skipped } };
      const frozen = stalled;
      const planStalled = (c, draining, stats) => planFn(c, draining, stats, frozen);
      return { cluster: fresh, plan: planStalled(fresh, await marks.drainingIds(leaving), await traffic?.()), planFn: planStalled };
    };
    for (;;) {
      const tableIds = current.plan.changes.map((c) => c.tableId);
      const committed = tableIds.length > 0
        ? await reconfigurer.commit(current.planFn ?? planFn, { tableIds, deadline, leaving, alongside: traffic })
        : { cluster: current.cluster, plan: current.plan, written: [], notDone: [] };
      changes.push(...primaryChanges(committed.cluster, committed.written));
      const raced = committed.notDone.filter((n) => n.concurrent);
      notDone.push(...committed.notDone.filter((n) => !n.concurrent));
      for (const w of committed.written) for (const m of w.change.moves) awaited.set(`${w.change.tableId}:${m.shard}`, { tableId: w.change.tableId, shard: m.shard });
      const targets = [...awaited.values()].map(({ tableId, shard }) => ({ tableId, shards: [shard] }));
      const waitDeadline = leaving.length > 0 ? createDeadline(clock, Math.min(deadline.remainingMs(), handoverRoundMs)) : deadline;
      const primaries = targets.length > 0 ? await reconfigurer.waitForPrimaries(targets, waitDeadline) : { settled: true, pending: [] };
      if (raced.length > 0 && !deadline.expired()) {
        log.info({ tables: raced.map((n) => n.tableId) }, 'tables changed concurrently; planning them again');
        current = await replan();
        continue;
      }
      notDone.push(...raced.map(({ concurrent, ...n }) => n));
      const done = {
        changes, notDone: uniqueItems(notDone), skipped: committed.plan.skipped, cluster: committed.cluster,
      };
      if (leaving.length > 0 && !primaries.settled && !deadline.expired()) {
        stalled = primaries.pending.filter((p) => p.tableId !== undefined && p.shard !== undefined).map(({ tableId, shard }) => ({ tableId, shard }));
        current = await replan();
        continue;
      }
      if (leaving.length === 0 || !primaries.settled) return { ...done, wait: primaries };
      awaited.clear();
      const round = createDeadline(clock, Math.min(deadline.remainingMs(), drainReplanIntervalMs));
      const wait = await reconfigurer.waitUntilNotActing(leaving, round, { except: [...settledSkips(committed.cluster, committed.plan.skipped), ...notDone] });
      if (wait.settled || deadline.expired()) return { ...done, wait };
      stalled = [];
      current = await replan();
    }
  }

  // notDone items reported once each: a table planned again in a later round is refused again for the same reason.
  function uniqueItems(items) {
    const seen = new Set();
    return items.filter((item) => {
      const key = JSON.stringify(item);
      if (seen.has(key)) return false;
      seen.add(key);
      return true;
    });
  }

  // Demotes every primary on the servers (refs: names or ids) in one plan: none receives another's primaries, and
  // they count as draining for it whether or not they are marked. node (and pods): the node they share, when
  // that is why they are named together.
  async function movePrimariesFromServers({
    servers, node = null, pods = null, dryRun = false, deadline, reason, actor, snapshot = null, marksView = marks, prefer = null,
  }) {
    const cluster = snapshot ?? await store.readCluster();
    const resolved = servers.map((ref) => resolveServer(cluster, ref));
    const names = resolved.map((s) => s.name);
    const target = node ? { node, ...(pods ? { pods } : {}), servers: names } : { server: names.join(', ') };
    const action = node ? 'move-primaries-from-node' : 'move-primaries-from-server';
    const ids = resolved.map((s) => s.id);
    const planFn = (c, draining, stalled = []) => planMovePrimariesFromServers(c, ids, { draining, stalled, prefer });
    const pod = resolved.length === 1 ? podNameOf(resolved[0]) : null;
    return runPrimaryPlan({
      action, target, planFn, dryRun, deadline, reason, leaving: ids, actor, pod, snapshot: cluster, busiestFirst: true, marksView,
    });
  }

  // byLoad: level with the least busy shards (client traffic read once from rethinkdb.stats; if that read fails,
  // on counts alone). Levelling the manager starts itself (POSTSTART, a warning's end, the primaries a new or
  // replacement server gets after its replicas) goes by load; the operator's rebalance-primaries by counts.
  async function rebalancePrimaries({
    dryRun = false, deadline, reason, tableIds = null, actor, pod, prefer = [], snapshot = null, byLoad = false, marksView = marks,
  } = {}) {
    const stats = byLoad ? await store.readTableServerStats().catch((err) => { log.warn({ err: err.message }, 'traffic not read; levelling by counts'); return null; }) : null;
    const planFn = (c, draining) => planRebalancePrimaries(c, { draining, tableIds, prefer, loads: stats && shardLoads(c, stats) });
    return runPrimaryPlan({ action: 'rebalance-primaries', target: {}, planFn, dryRun, deadline, reason, actor, pod, snapshot, marksView });
  }

  // snapshot (here and below): the cluster the caller decided on, planned on instead of reading it again.
  async function createReplica({ table, shard, server, dryRun = false, deadline, reason, actor, snapshot = null }) {
    const cluster = snapshot ?? await store.readCluster();
    const t = resolveTable(cluster, table);
    // A table RethinkDB cannot describe (none of its replicas reachable) has no shards to name.
    if (t.error) throw new AppError('DATA_STORE_UNAVAILABLE', `table ${tableLabel(t)}: ${t.error}`);
    if (!Number.isInteger(shard) || shard < 0 || shard >= t.shards.length) {
      throw new AppError('SHARD_NOT_FOUND', `table ${tableLabel(t)} has shards 0 to ${t.shards.length - 1}, not ${shard}`);
    }
    const s = resolveServer(cluster, server);
    const draining = await marks.drainingIds();
    const plan = timePlanning(() => planCreateReplica(cluster, t.id, shard, s.id, { draining }));
    return startReplicaMoves({
      action: 'create-replica', target: { table: tableLabel(t), shard, server: s.name }, intent: { type: 'create-replica', tableId: t.id, shard, serverId: s.id }, stateServer: s,
      cluster, plan, dryRun, deadline, reason, actor,
    });
  }

  // The server counts as draining for the plan whether or not it is marked (a perf warning keeps its own mark).
  async function migrateReplicasOff({ server, dryRun = false, deadline, reason, actor, snapshot = null, marksView = marks }) {
    const cluster = snapshot ?? await store.readCluster();
    const s = resolveServer(cluster, server);
    const draining = await marksView.drainingIds([s.id]);
    const plan = timePlanning(() => planMigrateReplicasOff(cluster, s.id, { draining }));
    return startReplicaMoves({
      action: 'migrate-replicas-off', target: { server: s.name }, intent: { type: 'migrate-replicas-off', serverId: s.id }, stateServer: s,
      cluster, plan, dryRun, deadline, reason, actor,
    });
  }

  // POSTSTART replacement: recreate a lost server's replicas on the new server, then rebalance primaries.
  async function replaceServer({ lost, server, dryRun = false, deadline, reason, actor, snapshot = null }) {
    const cluster = snapshot ?? await store.readCluster();
    const gone = resolveServer(cluster, lost);
    const s = resolveServer(cluster, server);
    if (gone.connected) throw new AppError('BAD_REQUEST', `${gone.name} is connected; only a lost (disconnected) server can be replaced`);
    const plan = timePlanning(() => planReplaceServer(cluster, gone.id, s.id));
    return startReplicaMoves({
      action: 'replace-server', target: { lost: gone.name, server: s.name }, intent: { type: 'replace-server', lostId: gone.id, serverId: s.id }, stateServer: s,
      cluster, plan, dryRun, deadline, reason, actor,
      afterMoves: (touched, planned = {}) => rebalancePrimaries({ tableIds: touched, reason: `give ${s.name} its share of primaries`, actor, pod: podNameOf(s), byLoad: true, ...planned }),
    });
  }

  async function addServer({ server, tables, grow = false, dryRun = false, deadline, reason, actor, snapshot = null }) {
    const cluster = snapshot ?? await store.readCluster();
    const s = resolveServer(cluster, server);
    const tableIds = tables ? tables.map((ref) => resolveTable(cluster, ref).id) : null;
    const draining = await marks.drainingIds();
    const plan = timePlanning(() => planAddServer(cluster, s.id, { draining, tableIds, grow }));
    return startReplicaMoves({
      action: 'add-server', target: { server: s.name, tables: tables ?? null, grow }, intent: { type: 'add-server', serverId: s.id, tableIds, grow }, stateServer: s,
      cluster, plan, dryRun, deadline, reason, actor,
      afterMoves: (touched, planned = {}) => rebalancePrimaries({ tableIds: touched, reason: `give ${s.name} its share of primaries`, actor, pod: podNameOf(s), byLoad: true, ...planned }),
    });
  }

  // Data moves: a dry run returns the plan; otherwise an operation runs them one replica at a time. While it
  // runs, the migration is recorded on the server concerned, so that a restarted manager can resume it.
  async function startReplicaMoves({ action, target, intent, stateServer, cluster, plan, dryRun, deadline, reason, afterMoves, actor }) {
    const planned = plannedReplicaMoves(cluster, plan.moves);
    const skipped = namedItems(cluster, plan.skipped);
    if (dryRun) {
      // The primaries given afterwards, planned on the cluster as the moves will leave it.
      const touched = [...new Set(plan.moves.map((m) => m.tableId))];
      const primaries = touched.length > 0 && afterMoves
        ? await afterMoves(touched, { dryRun: true, snapshot: projectMoves(cluster, plan.moves, { draining: await marks.drainingIds() }) })
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
  // snapshot: the cluster as the caller read it, to plan on.
  function restartMigration(migration, { reason, actor, snapshot = null }) {
    const { version, intent } = migration;
    if (version !== MIGRATION_VERSION || !intent) throw new AppError('BAD_REQUEST', `migration record version ${version ?? 'none'} is not ${MIGRATION_VERSION}; it is not resumed`);
    const common = { reason, actor, snapshot };
    const run = {
      'migrate-replicas-off': () => migrateReplicasOff({ server: intent.serverId, ...common }),
      'add-server': () => addServer({ server: intent.serverId, tables: intent.tableIds ?? undefined, grow: intent.grow, ...common }),
      'replace-server': () => replaceServer({ lost: intent.lostId, server: intent.serverId, ...common }),
      'create-replica': () => createReplica({ table: intent.tableId, shard: intent.shard, server: intent.serverId, ...common }),
    }[intent.type];
    if (!run) throw new AppError('BAD_REQUEST', `unknown migration intent ${intent.type}`);
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
        const { operation } = await restartMigration(m, { reason: `retry ${m.retry.attempt} (${m.retry.reason}); first: ${m.reason}`, actor, snapshot });
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
    op.steps = planned.map((p) => ({ ...p, status: 'pending', state: null, progress: null, error: null, startedAt: null, finishedAt: null }));
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
      await track(moves[i]);
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
    if (finalProblem) return fail('failed', finalProblem.reason);
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

  // Restart recovery: finish one half-done move (stage again if needed, wait, finalize) as an operation.
  async function finishMove({ move, reason, actor, snapshot = null }) {
    const cluster = snapshot ?? await store.readCluster();
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
    finishMove, restartMigration, retryDueMigrations,
    movePrimariesFromServers, rebalancePrimaries, createReplica, migrateReplicasOff, addServer, replaceServer,
  };
}
