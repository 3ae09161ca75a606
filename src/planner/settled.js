// Pure: whether a change has taken effect, on one read of the cluster. Each returns what is still pending, as
// [{ tableId, shard?, reason }]; none pending: settled. The reconfigurer (src/actions/reconfigurer.js) polls one of
// these until it returns nothing or its deadline passes.

import {
  createView, hasLiveMajority, isSettling, mayElectOneOf,
} from './eligibility.js';

// Each changed shard's acting primary is the configured one, and the shard has a live voting majority.
// ready_for_writes alone is true while the old primary still acts (fixtures 03); the table's flag is not used because
// another shard without quorum would keep it false forever. targets: [{ tableId, shards: [index, ...] }]; a table that
// is gone is not waited for.
export function primariesPending(cluster, targets) {
  const view = createView(cluster);
  const pending = [];
  for (const { tableId, shards } of targets) {
    const table = cluster.tables.find((t) => t.id === tableId);
    if (!table) continue;
    for (const index of shards) {
      const shard = table.shards[index];
      if (shard.acting.length !== 1 || shard.acting[0] !== shard.primary) {
        pending.push({ tableId, shard: index, reason: 'acting primary is not the configured one yet' });
      } else if (!hasLiveMajority(view, shard)) {
        pending.push({ tableId, shard: index, reason: 'shard has no live voting majority' });
      }
    }
  }
  return pending;
}

// None of `serverIds` acts as primary of any shard (a drain is done only then, whatever the configs say), nor may be
// elected for one: a lost primary's shard whose election is under way, with one of them voting. except: shards known
// to stay (skipped by the plan: { tableId, shard }; not written: { tableId }, the whole table), not waited for.
export function actingPending(cluster, serverIds, except = []) {
  const leaving = new Set(serverIds);
  const staying = new Set(except.map((s) => (s.shard === undefined ? s.tableId : `${s.tableId}:${s.shard}`)));
  const stays = (table, shard) => staying.has(table.id) || staying.has(`${table.id}:${shard.index}`);
  const view = createView(cluster);
  const why = (shard) => {
    if (shard.acting.some((id) => leaving.has(id))) return 'still the acting primary';
    // Written by another writer that planned before the drain's mark (it would be elected in a moment).
    if (leaving.has(shard.primary)) return 'still the configured primary';
    if (mayElectOneOf(view, shard, leaving) && isSettling(view, shard)) return 'an election that may pick it is under way';
    return null;
  };
  return cluster.tables.flatMap((table) => table.shards
    .filter((shard) => why(shard) && !stays(table, shard))
    .map((shard) => ({ tableId: table.id, shard: shard.index, reason: why(shard) })));
}

// `serverId`'s replica of the shard is ready and the server connected. Also the replica's state and its backfill's
// progress (1 once ready; null when no job reports it), which the caller reports as it waits.
export function replicaReadyPending(cluster, { tableId, shard: shardIndex, serverId }) {
  const table = cluster.tables.find((t) => t.id === tableId);
  if (!table) return { pending: [{ tableId, reason: 'table disappeared' }], state: 'unknown', progress: null };
  const state = table.shards[shardIndex]?.states[serverId];
  const job = cluster.backfills.find((b) => b.tableId === tableId && b.destinationId === serverId);
  const progress = state === 'ready' ? 1 : job?.progress ?? null;
  if (state === 'ready' && createView(cluster).isConnected(serverId)) return { pending: [], state, progress };
  return { pending: [{ tableId, shard: shardIndex, reason: `replica is ${state ?? 'not listed yet'}` }], state: state ?? 'unknown', progress };
}

// None of the tables (ids) is led by `serverId` in Raft, and each has a leader again (table_status.raft_leader).
export function raftLeadersPending(cluster, tableIds, serverId) {
  return cluster.tables.filter((t) => tableIds.includes(t.id))
    .filter((t) => t.raftLeader === serverId || !t.raftLeader)
    .map((t) => ({ tableId: t.id, reason: t.raftLeader ? 'the server still leads the table\'s Raft group' : 'no Raft leader yet' }));
}
