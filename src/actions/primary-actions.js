// The actions that move primaries: moving them off servers (the paper's movePrimariesFromServer and -Node) and
// levelling them (rebalancePrimaries), and naming the primaries RethinkDB elected after a failover (adoptActingPrimaries). Each plans (src/planner/primary-planner.js), commits through the reconfigurer
// and waits until the new primaries act, and returns a report; none writes a mark on a server.

import { resolveServer, shardLoads } from '../cluster/cluster-model.js';
import { createDeadline, deadlineOr, withinMs } from '../lib/clock.js';
import { timePlanning } from '../lib/trace.js';
import { clusterOf, marksOf } from './operation-context.js';
import { settledSkips } from '../planner/eligibility.js';
import { headroomOption } from '../planner/headroom.js';
import {
  needsWriteOrder, orderBusiestFirst, planAdoptActingPrimaries, planMovePrimariesFromServers, planRebalancePrimaries,
} from '../planner/primary-planner.js';
import {
  namedItems, outcomeOf, plannedPrimaryChanges, primaryChanges,
} from './report.js';

// How long a drain waits for its servers to stop acting before it reads the cluster and plans again.
const drainReplanIntervalMs = 1000;
// How long a drain waits for its new primaries to take over before it reads the cluster again: one that meanwhile
// became ineligible (a frozen server dropped by the heartbeat) is handed to another replica then.
const handoverRoundMs = 2000;
// The share of an action's remaining time that reading the client traffic, to order its writes, may take.
const TRAFFIC_READ_SHARE = 0.1;

// podNameOf: see ./actions.js. headroom() -> null (HEADROOM_TARGETS off) or what the targets' headroom is scored from
// now: { pods, latency, weights, factor, minDeltaMs, tolerance } (src/planner/headroom.js).
export function createPrimaryActions({
  store, reconfigurer, marks, clock, logger, config, audit, podNameOf, headroom = () => null,
}) {
  const log = logger.child({ module: 'actions' });

  // Plans, and unless dryRun, commits and waits for the new primaries to act (and, for a drain, until none of
  // the drained servers acts as primary any more, except where the plan could not move it).
  // leaving: the servers a drain takes primaries from, kept off by the plan whether or not they are marked (a dry
  // run writes no mark). busiestFirst: when the plan has more tables than are written at once, read the client
  // traffic once and write the busiest tables first (orderBusiestFirst), so that a deadline cuts the quiet ones.
  // ctx: the operation context (./operation-context.js).
  async function runPrimaryPlan({
    action, target, planFn: plans, reason, leaving = [], pod = null, busiestFirst = false,
  }, ctx) {
    const { actor, dryRun = false } = ctx;
    const marksView = marksOf(ctx, marks);
    // stats: the traffic rows (null: the plan's order), as the commit's third argument gives them.
    // stalled: see planMovePrimariesFromServers (a drain's shards whose new primary did not take over).
    const planFn = (c, draining, stats = null, stalled = []) => timePlanning(() => {
      const planned = plans(c, draining, stalled);
      return stats ? orderBusiestFirst(planned, shardLoads(c, stats)) : planned;
    });
    const startedAt = clock.now();
    const deadline = deadlineOr(ctx.deadline ?? null, clock, config.deadlines.actionSeconds * 1000);
    const cluster = await clusterOf(store, ctx);
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
    audit.record({ actor, action, target, pod, ...report });
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
      if (!fresh) return { cluster: current.cluster, plan: { changes: [], skipped: current.plan.skipped }, stale: true };
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
      // A round planned on a fresh read supersedes what earlier rounds did not do: each table is planned again (and
      // refused again, if it still is), has nothing left to do (an unknown write outcome that had landed) or is skipped.
      if (!current.stale) notDone.length = 0;
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
      // A table not written because RethinkDB was unavailable (a frozen server still counted in) is waited for and
      // planned again next round, while the deadline allows; one refused for good is not waited for.
      const stays = notDone.filter((n) => !n.unavailable);
      const wait = await reconfigurer.waitUntilNotActing(leaving, round, { except: [...settledSkips(committed.cluster, committed.plan.skipped), ...stays] });
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
    servers, node = null, pods = null, reason, prefer = null,
  }, ctx = {}) {
    const cluster = await clusterOf(store, ctx);
    const resolved = servers.map((ref) => resolveServer(cluster, ref));
    const names = resolved.map((s) => s.name);
    const target = node ? { node, ...(pods ? { pods } : {}), servers: names } : { server: names.join(', ') };
    const action = node ? 'move-primaries-from-node' : 'move-primaries-from-server';
    const ids = resolved.map((s) => s.id);
    // The servers' headroom as measured when the action starts: every plan of it (a drain plans again) scores alike.
    const room = headroomOption(headroom(), cluster.servers);
    const planFn = (c, draining, stalled = []) => planMovePrimariesFromServers(c, ids, {
      draining, stalled, prefer, headroom: room,
    });
    const pod = resolved.length === 1 ? podNameOf(resolved[0]) : null;
    return runPrimaryPlan({
      action, target, planFn, reason, leaving: ids, pod, busiestFirst: true,
    }, { ...ctx, snapshot: cluster });
  }

  // byLoad: level with the least busy shards (client traffic read once from rethinkdb.stats; if that read fails,
  // on counts alone). Levelling the manager starts itself (POSTSTART, a warning's end, the primaries a new or
  // replacement server gets after its replicas) goes by load; the operator's rebalance-primaries by counts.
  // take 'busiest' (with byLoad): the busiest shards instead, for a server added to take load (planRebalancePrimaries).
  async function rebalancePrimaries({
    reason, tableIds = null, prefer = [], byLoad = false, take = 'quietest',
  } = {}, ctx = {}) {
    const stats = byLoad ? await store.readTableServerStats().catch((err) => { log.warn({ err: err.message }, 'traffic not read; levelling by counts'); return null; }) : null;
    const planFn = (c, draining) => planRebalancePrimaries(c, {
      draining, tableIds, prefer, loads: stats && shardLoads(c, stats), take,
    });
    return runPrimaryPlan({
      action: 'rebalance-primaries', target: {}, planFn, reason, pod: ctx.pod ?? null,
    }, ctx);
  }

  // After RethinkDB has failed over from a disconnected server: the shards' acting primaries become their configured
  // ones (planAdoptActingPrimaries), which hands nothing over.
  async function adoptActingPrimaries({ reason } = {}, ctx = {}) {
    const planFn = (c, draining) => planAdoptActingPrimaries(c, { draining });
    return runPrimaryPlan({
      action: 'adopt-acting-primaries', target: {}, planFn, reason, pod: ctx.pod ?? null,
    }, ctx);
  }

  return { movePrimariesFromServers, rebalancePrimaries, adoptActingPrimaries };
}
