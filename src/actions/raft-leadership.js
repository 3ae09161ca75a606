// Moves the Raft leadership of the tables a server leads off it (after its primaries have been moved off, for a
// hot-spot). Measured on 2.4.4: a leader made nonvoting keeps leading (40 s under light writes), but steps down
// during the next config write once the first has reached the shards' contracts (1.4-4 s). So each round, holding
// the tables' locks (no other writer meanwhile, a PRESTOP's demotion waits a second or two): the server is made
// nonvoting in every shard of those tables, RAFT_LEADER_MOVE_SETTLE_MS later it gets its vote back, and during that
// write another server is elected. For about a second each of those shards has one voter less. The vote owed is
// journaled on the server's pod before the first write (and the write waits for the annotation), so that a manager
// restarted in between gives it back on its next tick (restoreOwedVotes).

import { managerActor } from '../audit/actor.js';
import {
  findServer, podNameForServer, resolveServer, serverName, tableLabel,
} from '../cluster/cluster-model.js';
import { createDeadline, deadlineOr } from '../lib/clock.js';
import { createRetryBook } from '../lib/retry.js';
import {
  planRaftLeadershipMove, planVotingRestore, raftRoundMayStart, raftRoundMs, tablesLedBy, votesBack,
} from '../planner/raft-leader.js';
import { namedItems, outcomeOf } from './report.js';

// Rounds of flip and give-back before the action reports a table whose leadership did not move.
const MAX_ROUNDS = 2;
// Commits of the vote's return before the action leaves it to the next tick.
const RESTORE_ATTEMPTS = 3;

const reportBase = (serverName, reason) => ({ action: 'move-raft-leadership', target: { server: serverName }, dryRun: false, reason: reason ?? null });

// The report of a move that threw before it could report (the executor's answer for that server).
export function failedMoveReport(serverName, reason, err) {
  return {
    ...reportBase(serverName, reason), outcome: 'failed', changes: [], skipped: [], notDone: [{ reason: err.message }], settled: false, votesRestored: [], durationMs: null,
  };
}

// retries: the manager's retry book (src/lib/retry.js); a give-back that failed waits there under 'votes:<server id>'.
export function createRaftLeadership({
  store, reconfigurer, marks, clock, logger, config, audit, retries = createRetryBook({ clock, retry: config.retry }),
}) {
  const log = logger.child({ module: 'raft-leadership' });
  // Servers with a move under way: the tick leaves what they owe to the move itself.
  const inFlight = new Set();

  // stillWanted(): checked before a second round (the warning may have ended meanwhile). decided (in the context):
  // the cluster the caller decided on; where every table there has a known leader and none is the server, nothing is
  // read (a demotion does not move a table's Raft leadership, and a PRESTOP at 1,000 tables spends about 0.8 s on one
  // read); nor when the deadline has passed before the move starts (a PRESTOP's, spent on its demotion).
  // Returns a report like every action's; changes: one row per table that was flipped, and whether it moved.
  // ctx: the operation context (./operation-context.js): actor, deadline, decided.
  async function moveRaftLeadership({ server, reason, stillWanted = async () => true }, { actor, deadline: given = null, decided = null } = {}) {
    const startedAt = clock.now();
    const deadline = deadlineOr(given, clock, config.deadlines.actionSeconds * 1000);
    const known = decided && findServer(decided, server);
    const led = known && tablesLedBy(decided, known.id);
    if (led && (deadline.expired() || (led.tableIds.length === 0 && !led.unknown))) {
      const notDone = deadline.expired() ? namedItems(decided, led.tableIds.map((tableId) => ({ tableId, reason: 'not moved: the deadline passed first' }))) : [];
      return finish({ ...reportBase(known.name, reason), changes: [], skipped: [], notDone, settled: notDone.length === 0, votesRestored: [] }, startedAt);
    }
    const { cluster, server: s, plan: first, readMs } = await planWhenSettled(server, deadline);
    const roundMs = raftRoundMs({ readMs, settleMs: config.raftLeader.settleMs });
    const pod = podNameForServer(s, config.podServerOverrides);
    const base = reportBase(s.name, reason);
    const skipped = namedItems(cluster, first.skipped);
    if (first.changes.length === 0) {
      const report = finish({ ...base, changes: [], skipped, notDone: [], settled: true, votesRestored: [] }, startedAt);
      if (skipped.length > 0) audit.record({ actor, action: base.action, target: base.target, pod, ...report });
      return report;
    }
    inFlight.add(s.id);
    const rows = new Map();
    const notDone = [];
    const restored = [];
    // The tables no round was started for, the deadline being too near.
    let late = [];
    try {
      let tableIds = first.changes.map((c) => c.tableId);
      for (let round = 1; round <= MAX_ROUNDS && tableIds.length > 0; round += 1) {
        const may = raftRoundMayStart({ remainingMs: deadline.remainingMs(), roundMs });
        if (!may.start) {
          if (round === 1) late = namedItems(cluster, tableIds.map((tableId) => ({ tableId, reason: may.reason })));
          break;
        }
        if (round > 1 && !(await stillWanted())) break;
        const result = await reconfigurer.withTableLocks(tableIds, deadline, () => flipAndGiveBack(s, pod, tableIds, deadline, reason));
        notDone.push(...result.notDone);
        restored.push(...result.restored);
        if (result.flipped.length === 0) break;
        const leaderDeadline = createDeadline(clock, Math.min(deadline.remainingMs(), config.raftLeader.waitSeconds * 1000));
        const moved = await reconfigurer.waitForRaftLeaders(result.flipped.map((f) => f.tableId), s.id, leaderDeadline);
        const led = await store.readCluster().catch(() => null);
        // A pending item without a tableId is a failed read: nothing is known of any table then.
        const unknown = moved.pending.some((p) => !p.tableId);
        const stillLed = new Set(moved.pending.map((p) => p.tableId));
        for (const f of result.flipped) {
          const isMoved = unknown ? null : !stillLed.has(f.tableId);
          rows.set(f.tableId, { table: f.table, tableId: f.tableId, kind: 'raft-leader', from: s.name, to: leaderName(led, f.tableId), moved: isMoved, nonvotingFor: f.shards, rounds: round });
        }
        tableIds = result.flipped.filter((f) => rows.get(f.tableId).moved === false).map((f) => f.tableId);
        if (unknown || result.notDone.length > 0) break;
      }
    } finally {
      inFlight.delete(s.id);
    }
    const unmoved = [...rows.values()].filter((row) => row.moved !== true)
      .map((row) => ({ table: row.table, reason: row.moved === null ? 'could not read whether the leadership moved' : `still led by ${s.name} after ${row.rounds} round(s)` }));
    const report = finish({
      ...base, changes: [...rows.values()], skipped, notDone: [...notDone, ...unmoved, ...late], settled: unmoved.length === 0 && late.length === 0, votesRestored: restored,
    }, startedAt);
    log.info({ server: s.name, outcome: report.outcome, tables: report.changes.length, durationMs: report.durationMs }, 'Raft leadership move finished');
    audit.record({ actor, action: base.action, target: base.target, pod, ...report });
    return report;
  }

  // Right after the demotion a table is often still settling (the new primaries' secondaries resync): it is planned
  // again on fresh reads until none is, or RAFT_LEADER_MOVE_WAIT_SECONDS pass. Measured: skipped as settling in 1
  // of 3 runs otherwise, and then that table's writes stayed slow.
  // ref: the server (name or id), resolved on the first read. readMs: how long the last read took.
  async function planWhenSettled(ref, deadline) {
    const until = createDeadline(clock, Math.min(deadline.remainingMs(), config.raftLeader.waitSeconds * 1000));
    for (;;) {
      const readAt = clock.now();
      const cluster = await store.readCluster();
      const readMs = clock.now() - readAt;
      const server = resolveServer(cluster, ref);
      const plan = planRaftLeadershipMove(cluster, server.id, { draining: await marks.drainingIds() });
      if (!plan.skipped.some((x) => x.settling) || until.expired()) return { cluster, server, plan, readMs };
      await clock.sleep(Math.min(config.waitPollIntervalMs, until.remainingMs()));
    }
  }

  function finish(report, startedAt) {
    const done = { ...report, durationMs: clock.now() - startedAt };
    done.outcome = outcomeOf(done);
    return done;
  }

  // One round, under the tables' locks: plan on a fresh read, journal what will be owed (and wait for it to be
  // saved), flip, wait settleMs, give the vote back. A table whose flip has an unknown outcome is owed too.
  async function flipAndGiveBack(s, pod, tableIds, deadline, reason) {
    const cluster = await store.readCluster();
    const plan = planRaftLeadershipMove(cluster, s.id, { tableIds, draining: await marks.drainingIds() });
    if (plan.changes.length === 0) return { flipped: [], restored: [], notDone: namedItems(cluster, plan.skipped) };
    const owed = plan.changes.map((c) => ({ tableId: c.tableId, shards: c.flipped }));
    await marks.setVotingRestore(s.id, { tables: owed, since: new Date(clock.now()).toISOString(), reason }, { serverName: s.name, pod });
    const persisted = await marks.persistedVotingRestore(s.id);
    if (persisted?.startsWith('failed')) {
      await marks.settleVotingRestore(s.id, []);
      return { flipped: [], restored: [], notDone: namedItems(cluster, owed.map((o) => ({ tableId: o.tableId, reason: `not flipped: the vote owed could not be saved on pod ${pod} (${persisted})` }))) };
    }
    // The write plans again on its own read, but flips only what was journaled: a table skipped on the read above
    // (settling for a moment) and fine on the next would otherwise be flipped with no vote owed for it.
    const committed = await reconfigurer.commitLocked((c, draining) => planRaftLeadershipMove(c, s.id, { owed, draining }), { tableIds: owed.map((o) => o.tableId), deadline });
    await clock.sleep(config.raftLeader.settleMs);
    const back = await giveBack(s.id);
    const flipped = committed.written.map(({ change, before }) => ({ tableId: before.id, table: tableLabel(before), shards: change.flipped }));
    return { flipped, restored: back.restored, notDone: [
      ...namedItems(cluster, plan.skipped), ...namedItems(committed.cluster, [...committed.plan.skipped, ...committed.notDone]), ...back.notDone,
    ] };
  }

  // Gives back every vote the server's journal owes (the caller holds the tables' locks), re-reading after a
  // failed or unknown write (the write during which the leader steps down can outlast a query timeout under
  // load), and keeps in the journal only what a fresh read shows still owed. `restored`: the votes that read shows
  // back, whether or not the write that gave them back answered.
  async function giveBack(serverId) {
    const owedNow = (await marks.votingRestores()).find((v) => v.serverId === serverId)?.tables ?? [];
    const deadline = createDeadline(clock, config.deadlines.actionSeconds * 1000);
    let restored = [];
    let failures = [];
    let remaining = owedNow;
    for (let attempt = 1; attempt <= RESTORE_ATTEMPTS && remaining.length > 0; attempt += 1) {
      const committed = await reconfigurer.commitLocked((c) => planVotingRestore(c, serverId, owedNow), { tableIds: owedNow.map((o) => o.tableId), deadline })
        .catch((err) => ({ cluster: null, written: [], notDone: [{ reason: err.message }] }));
      failures = committed.notDone;
      const after = await store.readCluster().catch(() => null);
      if (after) {
        const label = (tableId) => tableLabel(after.tables.find((t) => t.id === tableId));
        remaining = planVotingRestore(after, serverId, owedNow).changes.map((c) => ({ tableId: c.tableId, shards: c.restored, table: label(c.tableId) }));
        restored = votesBack(after, serverId, owedNow).map((v) => ({ table: label(v.tableId), shards: v.shards }));
      }
      if (remaining.length === 0 || deadline.expired()) break;
      await clock.sleep(Math.min(config.waitPollIntervalMs * 4, deadline.remainingMs()));
    }
    await marks.settleVotingRestore(serverId, remaining.map(({ tableId, shards }) => ({ tableId, shards })));
    const reasonFor = (tableId) => failures.find((f) => f.tableId === tableId)?.reason ?? failures.find((f) => !f.tableId)?.reason ?? 'still nonvoting';
    const notDone = remaining.map((r) => ({ table: r.table ?? r.tableId, shards: r.shards, reason: `vote not given back yet (retried each tick): ${reasonFor(r.tableId)}` }));
    if (notDone.length > 0) log.warn({ serverId, notDone }, 'vote not given back yet; retried on a later tick');
    return { restored, notDone };
  }

  // Each tick: the votes an interrupted move (or a manager that stopped mid-move) still owes; not those of a move
  // under way. A give-back that fails waits longer each time (RETRY_MIN_MS doubling to RETRY_MAX_MS).
  async function restoreOwedVotes() {
    const results = [];
    for (const owed of await marks.votingRestores()) {
      const key = `votes:${owed.serverId}`;
      if (inFlight.has(owed.serverId) || !retries.due(key)) continue;
      const deadline = createDeadline(clock, config.deadlines.actionSeconds * 1000);
      const result = await reconfigurer.withTableLocks(owed.tables.map((t) => t.tableId), deadline, () => giveBack(owed.serverId));
      if (result.notDone.length > 0) retries.failed(key);
      else retries.succeeded(key);
      results.push({ server: owed.serverName, ...result });
      if (result.restored.length > 0) {
        audit.record({
          actor: managerActor('votes'), action: 'restore-votes', target: { server: owed.serverName }, pod: owed.pod,
          outcome: result.notDone.length ? 'partial' : 'completed', changes: result.restored.map((r) => ({ table: r.table, kind: 'vote', to: owed.serverName })), notDone: result.notDone,
        });
      }
    }
    return results;
  }

  return { moveRaftLeadership, restoreOwedVotes };
}

function leaderName(cluster, tableId) {
  const id = cluster?.tables.find((t) => t.id === tableId)?.raftLeader ?? null;
  return id ? serverName(cluster, id) : null;
}
