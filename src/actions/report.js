// Builds the report every action returns: what changed (before and after), what was skipped and why,
// what was not done, and how long it took. Names are for humans; ids are kept for tooling.

import { serverName, tableLabel } from '../cluster/cluster-model.js';

export function describeShard(cluster, shard) {
  const name = (id) => serverName(cluster, id);
  return { primary: name(shard.primary), replicas: shard.replicas.map(name), nonvoting: shard.nonvoting.map(name) };
}

export function primaryChanges(cluster, written) {
  const rows = [];
  for (const { change, before, hold } of written) {
    for (const move of change.moves) {
      rows.push({
        table: tableLabel(before),
        tableId: before.id,
        shard: move.shard,
        kind: 'primary',
        from: serverName(cluster, move.from),
        to: serverName(cluster, move.to),
        before: describeShard(cluster, before.shards[move.shard]),
        after: describeShard(cluster, change.shards[move.shard]),
        ...(move.headroom ? { headroom: move.headroom } : {}),
        ...(hold ? { queryHold: hold } : {}),
      });
    }
  }
  return rows;
}

export function plannedPrimaryChanges(cluster, plan) {
  const written = plan.changes.map((change) => ({ change, before: cluster.tables.find((t) => t.id === change.tableId) }));
  return primaryChanges(cluster, written);
}

export function namedItems(cluster, items) {
  return items.map(({ tableId, shard, reason }) => {
    const table = cluster.tables.find((t) => t.id === tableId);
    return { table: table ? tableLabel(table) : tableId, ...(shard !== undefined && shard !== null ? { shard } : {}), reason };
  });
}

export function plannedReplicaMoves(cluster, moves) {
  return moves.map((m) => {
    const table = cluster.tables.find((t) => t.id === m.tableId);
    return {
      table: tableLabel(table),
      tableId: m.tableId,
      shard: m.shard,
      kind: 'replica',
      from: m.from ? serverName(cluster, m.from) : null,
      to: serverName(cluster, m.to),
      ...(m.headroom ? { headroom: m.headroom } : {}),
    };
  });
}

// Outcomes that mean the work did all it was asked: done, nothing to do, a dry run's plan, or (an operation's first
// answer) started. Anything else is partial, failed or timed out: a Warning Event, exit 4 of the command-line client.
const FULL_OUTCOMES = new Set(['completed', 'nothing_to_do', 'planned', 'started']);
export const isFullOutcome = (outcome) => FULL_OUTCOMES.has(outcome);

export function outcomeOf({ changes, notDone, skipped, settled }) {
  if (notDone.length > 0) return changes.length > 0 ? 'partial' : 'failed';
  if (!settled) return 'timed_out';
  if (changes.length === 0) return skipped.length > 0 ? 'partial' : 'nothing_to_do';
  return skipped.length > 0 ? 'partial' : 'completed';
}
