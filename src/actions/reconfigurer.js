// Carries out plans against the data store: locks the tables, re-plans on a fresh read with the draining
// marks as they are now, checks safety, writes one table_config update per table, and waits until the
// change has really taken effect. Everything respects the action's deadline.

import { AppError } from '../errors.js';
import { tableLabel } from '../cluster/cluster-model.js';
import {
  timePlanning, timeReading, timeWaiting, timeWriting,
} from '../lib/trace.js';
import {
  actingPending, primariesPending, raftLeadersPending, replicaReadyPending,
} from '../planner/settled.js';
import { checkTransition } from '../planner/safety.js';

// The votes a Raft leadership move owes (the marks' journal), by `${tableId}:${shard}`: [serverId, ...].
function owedVotes(restores) {
  const owed = new Map();
  for (const r of restores) {
    for (const t of r.tables ?? []) {
      for (const index of t.shards) owed.set(`${t.tableId}:${index}`, [...(owed.get(`${t.tableId}:${index}`) ?? []), r.serverId]);
    }
  }
  return owed;
}

// writeConcurrency: how many tables' configs are written at once (TABLE_WRITE_CONCURRENCY).
// queryHolds: src/actions/query-holds.js (holds on the query gates around a write that moves primaries), or null.
export function createReconfigurer({
  store, locks, marks, clock, logger, waitPollIntervalMs, writeConcurrency = 1, queryHolds = null,
}) {
  const log = logger.child({ module: 'reconfigurer' });

  // planFn(cluster, draining) -> { changes, skipped }. `leaving` are servers the action itself takes primaries
  // from, kept off whether or not they are marked yet. Returns what was written and what was not.
  // alongside: a read started with the cluster's (() => promise), whose value planFn gets as its third argument
  // (e.g. the client traffic a drain orders its writes by), so that the two reads overlap.
  async function commit(planFn, { tableIds, deadline, leaving = [], alongside = null }) {
    return withTableLocks(tableIds, deadline, () => commitLocked(planFn, { tableIds, deadline, leaving, alongside }));
  }

  // The same, for a caller that already holds the locks of `tableIds` (withTableLocks).
  // Every table is checked on the one read first; the safe ones are then written up to writeConcurrency at a time
  // (each table's config is its own Raft group, and its lock is held: never two writes to one table at once).
  async function commitLocked(planFn, { tableIds, deadline, leaving = [], alongside = null }) {
    const [cluster, read] = await timeReading(() => Promise.all([store.readCluster(), alongside?.()]));
    // Read under the locks: a drain that committed while we waited is seen here (no primary onto it).
    const draining = await marks.drainingIds(leaving);
    const owed = owedVotes(await marks.votingRestores());
    const plan = timePlanning(() => planFn(cluster, draining, read));
    const notDone = [];
    const safe = [];
    for (const change of plan.changes) {
      const table = cluster.tables.find((t) => t.id === change.tableId);
      if (!tableIds.includes(change.tableId)) {
        // Planned on a read older than this one, the table was not locked: the caller may plan again with it locked.
        notDone.push({ tableId: change.tableId, reason: 'table changed concurrently; run the action again', concurrent: true });
        continue;
      }
      const violations = timePlanning(() => checkTransition(cluster, table, change.shards, {
        draining, mayLowerVoters: change.lowersVoters === true, owedVoters: (index) => owed.get(`${change.tableId}:${index}`) ?? [],
      }));
      if (violations.length > 0) {
        notDone.push({ tableId: change.tableId, reason: `unsafe, not written: ${violations.join('; ')}` });
        log.error({ table: tableLabel(table), violations }, 'unsafe transition refused');
        continue;
      }
      safe.push({ change, before: table });
    }
    const connected = new Set(cluster.servers.filter((s) => s.connected).map((s) => s.id));
    const writes = await timeWriting(() => writeAll(safe, deadline, (id) => connected.has(id)));
    return { cluster, plan, written: writes.written, notDone: [...notDone, ...writes.notDone], draining };
  }

  // Writes each { change, before } in order, up to writeConcurrency at once. Once RethinkDB is unavailable, or the
  // deadline is nearer than the slowest write so far took (a write started then would end after it), no further
  // write starts; each table not written says why (`unavailable`: because RethinkDB was, which may pass, so a caller
  // with time left may plan it again). `written` keeps the plan's order.
  // isConnected: as the cluster read saw each server (the holds' old primaries).
  async function writeAll(items, deadline, isConnected) {
    const outcomes = new Array(items.length).fill(null);
    let stopped = null;
    let slowestMs = 0;
    let next = 0;
    async function worker() {
      while (next < items.length) {
        const i = next;
        next += 1;
        const { change, before } = items[i];
        if (stopped || deadline.expired() || deadline.remainingMs() < slowestMs) {
          outcomes[i] = { notDone: { tableId: change.tableId, reason: stopped ?? 'deadline passed before this table was written', ...(stopped ? { unavailable: true } : {}) } };
          continue;
        }
        const startedAt = clock.now();
        try {
          const write = () => store.writeTableShards(change.tableId, change.shards);
          const { hold } = queryHolds ? await queryHolds.around(before, change.shards, write, { deadline, isConnected }) : { result: await write(), hold: null };
          slowestMs = Math.max(slowestMs, clock.now() - startedAt);
          outcomes[i] = { written: hold ? { ...items[i], hold } : items[i] };
        } catch (err) {
          if (err.code === 'DATA_STORE_UNAVAILABLE') {
            stopped ??= `not written: RethinkDB became unavailable during another table's write (${err.message})`;
            // The write may or may not have been applied: say so rather than guess.
            outcomes[i] = { notDone: { tableId: change.tableId, reason: `write outcome unknown, RethinkDB became unavailable: ${err.message}`, unavailable: true } };
          } else {
            outcomes[i] = { notDone: { tableId: change.tableId, reason: err.message } };
            log.warn({ table: tableLabel(before), err: err.message }, 'table_config write failed');
          }
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(writeConcurrency, items.length) }, worker));
    return {
      written: outcomes.filter((o) => o.written).map((o) => o.written),
      notDone: outcomes.filter((o) => o.notDone).map((o) => o.notDone),
    };
  }

  // Runs fn holding the locks of every table in tableIds (in a fixed order), so that no other writer touches
  // those configs meanwhile, across several commits (commitLocked).
  async function withTableLocks(tableIds, deadline, fn) {
    return withLocks([...new Set(tableIds)].sort(), deadline, fn);
  }

  async function withLocks(keys, deadline, fn, index = 0) {
    if (index >= keys.length) return fn();
    return locks.runExclusive(keys[index], () => withLocks(keys, deadline, fn, index + 1), { timeoutMs: deadline.remainingMs() });
  }

  // Until each changed shard's acting primary is the configured one and the shard has a live voting majority
  // (primariesPending). targets: [{ tableId, shards: [index, ...] }]
  function waitForPrimaries(targets, deadline) {
    return pollUntil(deadline, (cluster) => primariesPending(cluster, targets));
  }

  // Until none of `serverIds` acts as primary of any shard, nor may be elected for one (actingPending). except: shards
  // known to stay, reported as such, which are not waited for.
  function waitUntilNotActing(serverIds, deadline, { except = [] } = {}) {
    return pollUntil(deadline, (cluster) => actingPending(cluster, serverIds, except));
  }

  // Until `serverId`'s replica of the shard is ready; reports backfill progress from jobs as it goes.
  function waitForReplicaReady(tableId, shardIndex, serverId, deadline, onProgress) {
    return pollUntil(deadline, (cluster) => {
      const { pending, state, progress } = replicaReadyPending(cluster, { tableId, shard: shardIndex, serverId });
      if (pending[0]?.reason !== 'table disappeared') onProgress?.({ state, progress });
      return pending;
    }, { backfills: true });
  }

  // Until none of the tables (ids) is led by `serverId` in Raft and each has a leader again (raftLeadersPending).
  // A pending item without a tableId is a failed read (pollUntil): nothing is known of any table then.
  function waitForRaftLeaders(tableIds, serverId, deadline) {
    return pollUntil(deadline, (cluster) => raftLeadersPending(cluster, tableIds, serverId));
  }

  // Polls the cluster until check() returns no pending items or the deadline passes. The request's trace counts
  // it as waiting for RethinkDB.
  // read: what readCluster reads (backfills only where progress is reported).
  function pollUntil(deadline, check, read = {}) {
    return timeWaiting(() => poll(deadline, check, read));
  }

  async function poll(deadline, check, read) {
    let pending = [{ reason: 'not checked yet' }];
    for (;;) {
      try {
        pending = check(await store.readCluster(read));
      } catch (err) {
        if (!(err instanceof AppError) || err.code !== 'DATA_STORE_UNAVAILABLE') throw err;
        pending = [{ reason: err.message }];
      }
      if (pending.length === 0) return { settled: true, pending };
      if (deadline.expired()) return { settled: false, pending };
      await clock.sleep(Math.min(waitPollIntervalMs, deadline.remainingMs()));
    }
  }

  return {
    commit, commitLocked, withTableLocks, waitForPrimaries, waitUntilNotActing, waitForReplicaReady, waitForRaftLeaders,
  };
}
