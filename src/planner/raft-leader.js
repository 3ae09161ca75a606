// Pure: moving a table's Raft leadership off a server, and putting its vote back afterwards.
// Every ReQL write asks the table's Raft leader for the table's config (get_write_hook), so a CPU-starved leader
// slows every write of the table wherever the primaries are (measured: updates stayed at p99 ~118 ms after a
// hot-spot demotion whenever the starved server led). RethinkDB has no command to hand the leadership over, but a
// server that votes in no shard of a table is not a voter of the table's Raft group
// (clustering/table_contract/coordinator/calculate_misc.cc). Measured on 2.4.4: the leader does not step down while
// it is nonvoting, but during the next config write once the first has reached the shards (1.4-4 s); so the move is
// the flip, a second's wait, and the vote given back, after which another server leads (Raft keeps its leader when
// voters are added back).

import {
  createView, hasLiveMajority, isSettling, votingReplicas,
} from './eligibility.js';

// A round (flip, settle, give-back) is started only with this much of the deadline left: the flip and the give-back
// writes (the give-back, during which the leader steps down, took 1.4 s on loopback), the settle time, and about
// ROUND_READS reads of the cluster as long as the one that planned the move. A round cut short by its deadline would
// make a PRESTOP answer late (504), or leave the vote to be given back by a later tick.
const ROUND_FLOOR_MS = 2000;
const ROUND_READS = 8;

// How long a round takes, from how long the read that planned the move took (readMs) and RAFT_LEADER_SETTLE_MS.
export function raftRoundMs({ readMs, settleMs }) {
  return ROUND_FLOOR_MS + ROUND_READS * readMs + settleMs;
}

// Whether a round may start with remainingMs of the deadline left: { start, reason } (reason: why not, for the tables
// the report says were not moved).
export function raftRoundMayStart({ remainingMs, roundMs }) {
  if (remainingMs >= roundMs) return { start: true, reason: null };
  return { start: false, reason: `not moved: ${Math.round(remainingMs)} ms of the deadline left, and a round takes about ${Math.round(roundMs)} ms` };
}

// The tables `serverId` leads and how to make it vote in none of their shards:
// { changes: [{ tableId, shards, flipped: [index], lowersVoters: true }], skipped: [{ tableId, reason, settling? }] }. A table is changed whole
// or not at all (a server still voting in one shard keeps its Raft vote): it is skipped while the server is the
// configured or acting primary of one of its shards, while a shard is settling, or where a shard would be left
// without a live voting majority of the others (draining servers count as gone: they are about to leave).
// owed: the votes journaled as owed ([{ tableId, shards: [index] }]): only those tables, and a table only if every
// shard it would flip is journaled (else the flip could never be given back).
export function planRaftLeadershipMove(cluster, serverId, { tableIds = null, draining = [], owed = null } = {}) {
  const view = createView(cluster);
  const leaving = new Set(draining.filter((id) => id !== serverId));
  const journaled = owed && new Map(owed.map((o) => [o.tableId, o.shards]));
  const changes = [];
  const skipped = [];
  for (const table of cluster.tables) {
    if (table.raftLeader !== serverId || (tableIds && !tableIds.includes(table.id)) || (journaled && !journaled.has(table.id))) continue;
    const why = leadershipMoveIneligibility(view, table, serverId, leaving);
    if (why) { skipped.push({ tableId: table.id, reason: why.reason, ...(why.settling ? { settling: true } : {}) }); continue; }
    const flipped = table.shards.filter((s) => votesIn(s, serverId)).map((s) => s.index);
    if (journaled && flipped.some((i) => !journaled.get(table.id).includes(i))) {
      skipped.push({ tableId: table.id, reason: 'its shards changed since the vote owed was journaled' });
      continue;
    }
    const shards = table.shards.map((s) => (flipped.includes(s.index) ? { ...s, nonvoting: [...s.nonvoting, serverId] } : s));
    // The one change that means to lower a shard's voting replicas (the safety check refuses it from anything else).
    changes.push({ tableId: table.id, shards, flipped, lowersVoters: true });
  }
  return { changes, skipped };
}

const votesIn = (shard, serverId) => votingReplicas(shard).includes(serverId);

// What a read says of the tables `serverId` leads: their ids, and whether some table's leader was unknown on it
// (table_status.raft_leader is null during an election, so the server may lead it by now).
export function tablesLedBy(cluster, serverId) {
  return {
    tableIds: cluster.tables.filter((t) => t.raftLeader === serverId).map((t) => t.id),
    unknown: cluster.tables.some((t) => !t.raftLeader),
  };
}

// Why the table cannot be flipped now ({ reason, settling }), or null. settling: it may be possible in a moment
// (right after a demotion the new primary's secondaries resync for a second or two).
function leadershipMoveIneligibility(view, table, serverId, leaving) {
  const name = view.nameOf(serverId);
  const primaryOf = table.shards.find((s) => s.primary === serverId || s.acting.includes(serverId));
  if (primaryOf) return { reason: `${name} is still the primary of shard ${primaryOf.index}`, settling: primaryOf.primary !== serverId };
  const voting = table.shards.filter((s) => votesIn(s, serverId));
  if (voting.length === 0) return { reason: `${name} votes in no shard; RethinkDB should elect another leader by itself` };
  const settling = table.shards.find((s) => isSettling(view, s));
  if (settling) return { reason: `shard ${settling.index} is settling (an election or a catch-up under way)`, settling: true };
  const exposed = voting.find((s) => !hasLiveMajority(view, { ...s, nonvoting: [...s.nonvoting, serverId] }, { gone: leaving }));
  if (exposed) return { reason: `shard ${exposed.index} would be left without a live voting majority of the other replicas` };
  return null;
}

// The vote back, in the shards the move took it from (flips: [{ tableId, shards: [index] }]) and where the server
// is still a nonvoting replica; a table or shard that changed since is left as it is now.
// { changes: [{ tableId, shards, restored: [index] }] }
export function planVotingRestore(cluster, serverId, flips) {
  const changes = [];
  for (const { tableId, shards: indexes } of flips) {
    const table = cluster.tables.find((t) => t.id === tableId);
    if (!table) continue;
    const restored = indexes.filter((i) => table.shards[i]?.replicas.includes(serverId) && table.shards[i].nonvoting.includes(serverId));
    if (restored.length === 0) continue;
    const shards = table.shards.map((s) => (restored.includes(s.index) ? { ...s, nonvoting: s.nonvoting.filter((id) => id !== serverId) } : s));
    changes.push({ tableId, shards, restored });
  }
  return { changes };
}

// Of the votes owed ([{ tableId, shards }]), those the server has back on this read: it is a voting replica of the
// shard again (not those whose shard it has left, nor a table that is gone). [{ tableId, shards }]
export function votesBack(cluster, serverId, owed) {
  return owed.map(({ tableId, shards }) => {
    const table = cluster.tables.find((t) => t.id === tableId);
    const back = shards.filter((i) => table?.shards[i] && votesIn(table.shards[i], serverId));
    return { tableId, shards: back };
  }).filter((v) => v.shards.length > 0);
}
