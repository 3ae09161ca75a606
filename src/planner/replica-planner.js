// Pure: where replicas (data) should move. A move {tableId, shard, from, to} is carried out in two writes,
// never changing the voting set while the new copy backfills:
//   stage:    `to` joins as a nonvoting replica and backfills;
//   finalize: once `to` is ready it becomes voting and `from` (if any) leaves.

import {
  canHostReplica, compareNamesOf, countPrimaries, countReplicas, createView, hasLiveMajority, isLiveReady,
  pickLeastLoaded, primaryIneligibility, replicaHostIneligibility, votingReplicas,
} from './eligibility.js';
import { pickByHeadroom } from './headroom.js';
import { configOf, explainNoCandidate } from './primary-planner.js';

// A replica plan is { moves: [{ tableId, shard, from, to }], skipped: [{ tableId, shard, reason }] }.

// Tables whose configuration RethinkDB could not give (none of their replicas reachable: `error`, no shards): no data
// move can be planned for them, and a plan says so rather than pass over them in silence.
function unreadableTables(tables) {
  return tables.filter((t) => t.error).map((t) => ({ tableId: t.id, shard: null, reason: `its configuration cannot be read (${t.error}); none of its replicas was planned` }));
}

export function planCreateReplica(cluster, tableId, shardIndex, serverId, { draining = [] } = {}) {
  const view = createView(cluster, { draining });
  const table = cluster.tables.find((t) => t.id === tableId);
  const shard = table.shards[shardIndex];
  const skip = (reason) => ({ moves: [], skipped: [{ tableId, shard: shardIndex, reason }] });
  if (votingReplicas(shard).includes(serverId)) return skip(`${view.nameOf(serverId)} is already a replica`);
  const why = replicaHostIneligibility(view, serverId);
  if (why) return skip(`${view.nameOf(serverId)} is ${why}`);
  if (!hasLiveMajority(view, shard)) return skip('shard has no live voting majority');
  return { moves: [{ tableId, shard: shardIndex, from: null, to: serverId }], skipped: [] };
}

// Move every replica off `serverId`, each to the connected, non-draining server holding the fewest replicas (or to the
// server a half-done move already staged a nonvoting replica on). headroom (HEADROOM_TARGETS: see
// planMovePrimariesFromServers): of those servers, by headroom first, the move carrying the scores.
export function planMigrateReplicasOff(cluster, serverId, { draining = [], headroom = null } = {}) {
  const view = createView(cluster, { draining: [...draining, serverId] });
  const counts = countReplicas(cluster.tables);
  const hosts = cluster.servers.filter((s) => canHostReplica(view, s.id)).map((s) => s.id);
  const moves = [];
  const skipped = [];
  for (const table of cluster.tables) {
    for (const shard of table.shards) {
      if (!shard.replicas.includes(serverId)) continue;
      // A nonvoting replica staged by a move that did not finish (a manager that stopped between staging and
      // finalizing, its journal write lost): finish that move rather than look for a server the shard does not use.
      const staged = shard.nonvoting.find((id) => id !== serverId && hosts.includes(id));
      const candidates = hosts.filter((id) => !shard.replicas.includes(id));
      const roomy = !staged && headroom ? pickByHeadroom(candidates, counts, headroom.scores, { tolerance: headroom.tolerance, nameOf: view.nameOf }) : null;
      const to = staged ?? roomy?.id ?? pickLeastLoaded(view, candidates, counts);
      if (to === null) {
        skipped.push({ tableId: table.id, shard: shard.index, reason: 'no connected server without a replica of this shard that the manager does not keep off (a server draining or under a performance warning is kept off)' });
        continue;
      }
      counts.set(to, (counts.get(to) ?? 0) + 1);
      moves.push({
        tableId: table.id, shard: shard.index, from: serverId, to, ...(roomy ? { headroom: { score: roomy.score, parts: roomy.parts, among: roomy.among } } : {}),
      });
    }
  }
  return { moves, skipped: [...skipped, ...unreadableTables(cluster.tables)] };
}

// A replacement's replica moves, lost server -> new server, for every shard that lists the lost one.
export function planReplaceServer(cluster, lostId, newId) {
  const moves = [];
  const skipped = [];
  for (const table of cluster.tables) {
    for (const shard of table.shards) {
      if (!shard.replicas.includes(lostId)) continue;
      // A nonvoting replica here is a move staged earlier (an attempt the cluster was not ready for): finish it.
      if (shard.replicas.includes(newId) && !shard.nonvoting.includes(newId)) {
        skipped.push({ tableId: table.id, shard: shard.index, reason: 'the new server already holds a replica of this shard' });
        continue;
      }
      moves.push({ tableId: table.id, shard: shard.index, from: lostId, to: newId });
    }
  }
  return { moves, skipped: [...skipped, ...unreadableTables(cluster.tables)] };
}

// Give a (new) server a fair share of replicas, taken from the servers holding the most. With grow, the
// server is added as an extra replica instead, raising those shards' replica counts by one.
export function planAddServer(cluster, serverId, { draining = [], tableIds = null, grow = false } = {}) {
  const view = createView(cluster, { draining });
  const tables = tableIds ? cluster.tables.filter((t) => tableIds.includes(t.id)) : cluster.tables;
  const why = replicaHostIneligibility(view, serverId);
  if (why) {
    const advice = why === 'draining' ? '; release it first' : '';
    return { moves: [], skipped: [{ tableId: null, shard: null, reason: `${view.nameOf(serverId)} is ${why}${advice}` }] };
  }
  const hosts = new Set(cluster.servers.filter((s) => canHostReplica(view, s.id)).map((s) => s.id));
  hosts.add(serverId);
  const counts = countReplicas(tables);
  const open = [];
  for (const table of tables) {
    for (const shard of table.shards) {
      if (!shard.replicas.includes(serverId) && hasLiveMajority(view, shard)) open.push({ table, shard });
    }
  }
  const total = [...counts.entries()].filter(([id]) => hosts.has(id)).reduce((n, [, c]) => n + c, 0);
  const fairShare = grow ? open.length : Math.floor(total / hosts.size);
  const moves = [];
  const perTable = new Map();
  const pick = grow ? growthPicker(open, perTable) : donationPicker(view, open, counts, perTable, serverId, hosts);
  while ((counts.get(serverId) ?? 0) < fairShare) {
    const next = pick();
    if (!next) break;
    moves.push({ tableId: next.ref.table.id, shard: next.ref.shard.index, from: next.from, to: serverId });
    counts.set(serverId, (counts.get(serverId) ?? 0) + 1);
    if (next.from) counts.set(next.from, counts.get(next.from) - 1);
    perTable.set(next.ref.table.id, (perTable.get(next.ref.table.id) ?? 0) + 1);
  }
  return { moves: sortMoves(tables, moves), skipped: unreadableTables(tables) };
}

// Each pick takes a shard from the table the server has the fewest new replicas of.
function growthPicker(open, perTable) {
  const taken = new Set();
  const pickShard = createShardPicker(open, taken, perTable);
  return () => {
    const ref = pickShard();
    if (!ref) return null;
    taken.add(ref);
    return { ref, from: null };
  };
}

// Each pick takes a replica from the most loaded server (a non-primary voting one, so no primary moves),
// preferring tables the new server has the fewest replicas of. Shards are indexed by donor once, and a donor with
// nothing left to give is dropped for good (taken shards are never given back).
function donationPicker(view, open, counts, perTable, serverId, hosts) {
  const byDonor = new Map();
  for (const ref of open) {
    for (const id of ref.shard.replicas) {
      if (id === ref.shard.primary || ref.shard.nonvoting.includes(id) || !hosts.has(id)) continue;
      const refs = byDonor.get(id);
      if (refs) refs.push(ref);
      else byDonor.set(id, [ref]);
    }
  }
  const taken = new Set();
  const pickers = new Map([...byDonor].map(([id, refs]) => [id, createShardPicker(refs, taken, perTable)]));
  const compareNames = compareNamesOf(view, byDonor.keys());
  const count = (id) => counts.get(id) ?? 0;
  return () => {
    for (;;) {
      const from = mostLoadedDonor(pickers, count, compareNames, count(serverId));
      if (from === null) return null;
      const ref = pickers.get(from)();
      if (ref) {
        taken.add(ref);
        return { ref, from };
      }
      pickers.delete(from);
    }
  };
}

// The donor holding the most replicas, 2+ more than the receiver; of equal ones the first by name, then the first
// indexed. One pass: sorting every donor at every pick cost more than the rest of the plan.
function mostLoadedDonor(donors, count, compareNames, receiverCount) {
  let best = null;
  let bestCount = receiverCount + 1;
  for (const id of donors.keys()) {
    const c = count(id);
    if (c > bestCount || (c === bestCount && best !== null && compareNames(id, best) < 0)) {
      best = id;
      bestCount = c;
    }
  }
  return best;
}

// Picks from `refs` the first shard not taken yet whose table has the fewest new replicas so far (null if all are
// taken). Shards are only taken and tables only gain new replicas, so a shard once passed over in the search for a
// table with none is never the answer again: each search resumes where the last stopped. Only once every table
// has some does a pick read the whole list.
function createShardPicker(refs, taken, perTable) {
  let start = 0;
  const newIn = (ref) => perTable.get(ref.table.id) ?? 0;
  return () => {
    while (start < refs.length && (taken.has(refs[start]) || newIn(refs[start]) > 0)) start += 1;
    if (start < refs.length) return refs[start];
    return minBy(refs.filter((r) => !taken.has(r)), newIn);
  };
}

function minBy(items, score) {
  let best = null;
  let bestScore = Infinity;
  for (const item of items) {
    const s = score(item);
    if (s < bestScore) { best = item; bestScore = s; }
  }
  return best;
}

function sortMoves(tables, moves) {
  const order = new Map(tables.map((t, i) => [t.id, i]));
  return moves.sort((a, b) => order.get(a.tableId) - order.get(b.tableId) || a.shard - b.shard);
}

// Stage: `to` joins as nonvoting. Idempotent when already staged.
export function stageReplica(shard, to) {
  const next = configOf(shard);
  if (!next.replicas.includes(to)) next.replicas.push(to);
  if (!next.nonvoting.includes(to) && !votingReplicas(shard).includes(to)) next.nonvoting.push(to);
  return next;
}

// Finalize: `to` votes, `from` leaves. If `from` held the primary, it goes to the least-loaded live-ready
// voter first. Returns { shard, error } where error explains why finalizing is not possible yet.
export function finalizeReplica(cluster, table, shardIndex, { from, to }, { draining = [] } = {}) {
  const view = createView(cluster, { draining });
  const shard = table.shards[shardIndex];
  if (!shard.replicas.includes(to)) return { shard: null, error: `${view.nameOf(to)} is not a replica` };
  if (!isLiveReady(view, shard, to)) return { shard: null, error: `${view.nameOf(to)} is not ready yet` };
  const next = configOf(shard);
  // A nonvoting replica that moves stays nonvoting: the shard's voting set (and its majority) is unchanged.
  const keepNonvoting = from !== null && from !== undefined && shard.nonvoting.includes(from);
  next.nonvoting = next.nonvoting.filter((id) => id !== from && (keepNonvoting || id !== to));
  if (from) next.replicas = next.replicas.filter((id) => id !== from);
  if (from && shard.primary === from) {
    const candidates = next.replicas.filter((id) => !next.nonvoting.includes(id)
      && !primaryIneligibility(view, shard, id));
    const primary = pickLeastLoaded(view, candidates, countPrimaries(cluster.tables));
    if (primary === null) return { shard: null, error: explainNoCandidate(view, shard, from) };
    next.primary = primary;
  }
  return { shard: next, error: null };
}

// The two writes of a move, as plans for the reconfigurer: each re-decides on the cluster as it is when the
// table lock is held, and plans nothing when that step is already done (so a retried move is idempotent).
export function planStageReplica(cluster, move, { draining = [] } = {}) {
  const table = cluster.tables.find((t) => t.id === move.tableId);
  if (!table) return skipMove(move, 'table disappeared');
  const shard = table.shards[move.shard];
  const view = createView(cluster, { draining });
  const fromHere = move.from !== null && move.from !== undefined && shard.replicas.includes(move.from);
  // Already staged (a nonvoting replica: this move's, retried, or a half-done one's from before a restart; a move of the
  // same shard never runs alongside): nothing to write.
  if (shard.nonvoting.includes(move.to)) return { changes: [], skipped: [] };
  if (shard.replicas.includes(move.to)) {
    // Already voting: done, if `from` has left; otherwise another move put it there since this one was planned, and
    // finishing this one would take the shard one replica short.
    if (!fromHere) return { changes: [], skipped: [] };
    return skipMove(move, `${view.nameOf(move.to)} already holds a voting replica of this shard (another move put it there since this one was planned); ${view.nameOf(move.from)} keeps its replica`);
  }
  if (move.from && !fromHere) return skipMove(move, `${view.nameOf(move.from)} no longer holds a replica of this shard (another move took it off since this one was planned)`);
  const why = replicaHostIneligibility(view, move.to);
  if (why) return skipMove(move, `${view.nameOf(move.to)} is ${why} now`);
  return singleShardChange(table, move.shard, stageReplica(shard, move.to));
}

export function planFinalizeReplica(cluster, move, { draining = [] } = {}) {
  const table = cluster.tables.find((t) => t.id === move.tableId);
  if (!table) return skipMove(move, 'table disappeared');
  const shard = table.shards[move.shard];
  const done = votingReplicas(shard).includes(move.to) && !(move.from && shard.replicas.includes(move.from));
  if (done) return { changes: [], skipped: [] };
  // A target that started draining (its pod stopping) while it backfilled does not get the vote: the source stays.
  const view = createView(cluster, { draining });
  if (view.draining.has(move.to)) return skipMove(move, `${view.nameOf(move.to)} started draining while it backfilled${move.from ? `; ${view.nameOf(move.from)} keeps its replica` : ''}`);
  const { shard: next, error } = finalizeReplica(cluster, table, move.shard, move, { draining });
  if (error) return skipMove(move, error);
  return singleShardChange(table, move.shard, next);
}

// Undo a stage whose finalize was refused: `to`'s nonvoting replica leaves again, so that no staged replica is left
// behind with nothing to finish it (it would take every write's replication and vote for nothing). Only a nonvoting
// replica is taken out, which changes neither the voting set nor the primary. Plans nothing when `to` is not
// nonvoting any more (voting, or gone).
export function planUnstageReplica(cluster, move) {
  const table = cluster.tables.find((t) => t.id === move.tableId);
  if (!table) return skipMove(move, 'table disappeared');
  const shard = table.shards[move.shard];
  if (!shard.nonvoting.includes(move.to)) return { changes: [], skipped: [] };
  const next = configOf(shard);
  next.replicas = next.replicas.filter((id) => id !== move.to);
  next.nonvoting = next.nonvoting.filter((id) => id !== move.to);
  return singleShardChange(table, move.shard, next);
}

function skipMove(move, reason) {
  return { changes: [], skipped: [{ tableId: move.tableId, shard: move.shard, reason }] };
}

function singleShardChange(table, index, next) {
  const shards = table.shards.map(configOf);
  shards[index] = next;
  return { changes: [{ tableId: table.id, shards, moves: [] }], skipped: [] };
}

// The cluster as it will be once `moves` are done, in order, each staged, ready and finalized as the real run does it
// (a primary on the server a replica leaves goes where finalizeReplica puts it): what a dry run plans the primaries
// given afterwards on, so that it plans what the real run writes. A move that could not finalize is left out.
export function projectMoves(cluster, moves, { draining = [] } = {}) {
  let projected = cluster;
  for (const move of moves) {
    const table = projected.tables.find((t) => t.id === move.tableId);
    if (!table?.shards[move.shard]) continue;
    const shard = table.shards[move.shard];
    const staged = { ...stageReplica(shard, move.to), index: shard.index, acting: shard.acting, states: { ...shard.states, [move.to]: 'ready' } };
    const stagedTable = { ...table, shards: table.shards.map((s) => (s.index === move.shard ? staged : s)) };
    const stagedCluster = withTable(projected, stagedTable);
    const { shard: next } = finalizeReplica(stagedCluster, stagedTable, move.shard, move, { draining });
    if (!next) continue;
    const states = Object.fromEntries(Object.entries(staged.states).filter(([id]) => next.replicas.includes(id)));
    const done = { ...next, index: shard.index, acting: [next.primary], states };
    projected = withTable(projected, { ...stagedTable, shards: stagedTable.shards.map((s) => (s.index === move.shard ? done : s)) });
  }
  return projected;
}

function withTable(cluster, table) {
  return { ...cluster, tables: cluster.tables.map((t) => (t.id === table.id ? table : t)) };
}
