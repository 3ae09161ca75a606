// Pure: where shard primaries should go. Moving a primary is cheap (no data moves), so these plans are the
// manager's first answer to a stopping, returning or overloaded server.

import {
  compareNamesOf, countPrimaries, createView, mayElectOneOf, pickLeastLoaded, primaryIneligibility, votingReplicas,
} from './eligibility.js';
import { pickByHeadroom } from './headroom.js';

// A plan is { changes: [{ tableId, shards, moves: [{ shard, from, to }] }], skipped: [{ tableId, shard, reason }] }.
// `shards` is the table's whole new shards array: one write per table.

// Demote every primary on these servers (one, or all servers of a node) to the least-loaded eligible replica of
// the same shard: none of them receives another's primaries.
// A shard whose configured primary cannot serve (lost, draining) but which one of these servers still acts
// for is handed to another replica too: otherwise it would be left without a primary when they stop. So is a
// shard whose configured primary is lost and for which no other live server acts yet: RethinkDB is still
// electing (about 0.5 s after a crash, fixture 09), and could elect one of these servers just after the plan.
// stalled: shards ([{ tableId, shard }]) whose primary an earlier round of the same drain moved, and whose new primary
// has not taken over since: one that has meanwhile become ineligible (frozen, then dropped by the heartbeat) is handed
// to another replica too; one that is only slow keeps its turn.
// prefer ({ targets: [serverId], homes: [{ tableId, shard, serverId }] }, during a rollout): of the eligible replicas,
// those among `targets` (already restarted) are taken first, and of those a shard's home (the server it is owed
// back to) before the least loaded.
// headroom ({ scores: Map serverId -> { score, parts }, tolerance }, HEADROOM_TARGETS): where no rollout preference
// applies, the candidate is chosen by headroom (./headroom.js, pickByHeadroom), and the move says so (`headroom`:
// its score, its parts, every candidate's score); with a candidate unmeasured, by counts as without.
export function planMovePrimariesFromServers(cluster, serverIds, {
  draining = [], stalled = [], prefer = null, headroom = null,
} = {}) {
  const leaving = new Set(serverIds);
  const preferredTargets = new Set(prefer?.targets ?? []);
  const homes = new Map((prefer?.homes ?? []).map((h) => [`${h.tableId}:${h.shard}`, h.serverId]));
  const stalledKeys = new Set(stalled.map((s) => `${s.tableId}:${s.shard}`));
  const view = createView(cluster, { draining: [...draining, ...serverIds] });
  const counts = countPrimaries(cluster.tables);
  const changes = [];
  const skipped = [];
  for (const table of cluster.tables) {
    const moves = [];
    for (const shard of table.shards) {
      const from = shard.primary;
      const actsForIneligible = shard.acting.some((id) => leaving.has(id)) && primaryIneligibility(view, shard, from);
      const stalledOnIneligible = stalledKeys.has(`${table.id}:${shard.index}`) && !shard.acting.includes(from) && Boolean(primaryIneligibility(view, shard, from));
      if (!leaving.has(from) && !actsForIneligible && !stalledOnIneligible && !mayElectOneOf(view, shard, leaving)) continue;
      const candidates = votingReplicas(shard).filter((id) => !leaving.has(id) && !primaryIneligibility(view, shard, id));
      // Not acting for it, with nobody to take it: nothing these servers hold stays behind, so nothing to report.
      if (candidates.length === 0 && !leaving.has(from) && !actsForIneligible && !stalledOnIneligible) continue;
      if (candidates.length === 0) {
        const acting = !leaving.has(from) ? `${view.nameOf(shard.acting[0])} acts for ${view.nameOf(from)}, which is ${primaryIneligibility(view, shard, from)}; ` : '';
        skipped.push({ tableId: table.id, shard: shard.index, reason: `${acting}${explainNoCandidate(view, shard, from)}` });
        continue;
      }
      const home = homes.get(`${table.id}:${shard.index}`);
      const roomy = headroom && preferredTargets.size === 0 && home === undefined
        ? pickByHeadroom(candidates, counts, headroom.scores, { tolerance: headroom.tolerance, nameOf: view.nameOf }) : null;
      const to = roomy?.id ?? pickPreferred(view, candidates, counts, { targets: preferredTargets, home });
      bump(counts, from, -1);
      bump(counts, to, 1);
      moves.push({
        shard: shard.index, from, to, ...(roomy ? { headroom: { score: roomy.score, parts: roomy.parts, among: roomy.among } } : {}),
      });
    }
    if (moves.length > 0) changes.push(changeFor(table, moves));
  }
  return { changes, skipped };
}

// After RethinkDB has failed over: each shard whose configured primary is disconnected and for which one other server
// acts (RethinkDB elected it) is written with that server as its primary, so that the config names who acts. No
// handover: the new primary already acts, and the write only makes it the configured one. Without it, RethinkDB hands
// the shard back to its configured primary the moment that server returns, a handover nobody planned (clients meet
// "too many primary replicas" and "lost contact" meanwhile); with it, the returning server comes back a secondary and
// the manager gives primaries back, under holds, when it decides to (POSTSTART).
// A shard with no acting primary yet (RethinkDB still electing, or no live majority) is skipped with the reason, as is
// one whose acting primary may not be primary here (draining, not ready): it is not made the configured one.
export function planAdoptActingPrimaries(cluster, { draining = [] } = {}) {
  const view = createView(cluster, { draining });
  const changes = [];
  const skipped = [];
  for (const table of cluster.tables) {
    const moves = [];
    for (const shard of table.shards) {
      const from = shard.primary;
      if (view.isConnected(from)) continue;
      const acting = shard.acting.filter((id) => id !== from);
      if (acting.length !== 1) {
        const reason = acting.length === 0
          ? `${view.nameOf(from)} is disconnected and no other server acts for the shard yet (RethinkDB elects one once it has dropped ${view.nameOf(from)}, with a live majority)`
          : `${view.nameOf(from)} is disconnected and ${acting.length} servers claim the shard`;
        skipped.push({ tableId: table.id, shard: shard.index, reason });
        continue;
      }
      const [to] = acting;
      const why = primaryIneligibility(view, shard, to);
      if (why) {
        skipped.push({ tableId: table.id, shard: shard.index, reason: `${view.nameOf(to)} acts for disconnected ${view.nameOf(from)} but may not be its primary (${why})` });
        continue;
      }
      moves.push({ shard: shard.index, from, to });
    }
    if (moves.length > 0) changes.push(changeFor(table, moves));
  }
  return { changes, skipped };
}

// The least loaded candidate, of the preferred targets if any is a candidate; a candidate home wins among those.
function pickPreferred(view, candidates, counts, { targets, home }) {
  if (targets.size === 0 && home === undefined) return pickLeastLoaded(view, candidates, counts);
  const pool = candidates.some((id) => targets.has(id)) ? candidates.filter((id) => targets.has(id)) : candidates;
  return pool.includes(home) ? home : pickLeastLoaded(view, pool, counts);
}

// A drain's tables are written a few at a time (TABLE_WRITE_CONCURRENCY), so a deadline can cut it short: on a
// large cluster RethinkDB hands over about 8-15 primaries a second (README, Benchmarks). With more tables than are
// written at once the order decides which primaries are still on the server when it stops; with fewer it does not.
export function needsWriteOrder(plan, writeConcurrency) {
  return plan.changes.length > writeConcurrency;
}

// The plan's tables, busiest first: a primary left behind fails over when the server stops, which fails the
// operations that reach its shard meanwhile. A table's traffic is its busiest moved shard's; `loads` as for
// planRebalancePrimaries (a shard missing from it counts as the busiest). Without any traffic, and between equals,
// the plan's order stays. Only the order changes: the same writes, the same targets.
export function orderBusiestFirst(plan, loads) {
  if (!loads || ![...loads.values()].some((v) => v > 0)) return plan;
  const trafficOf = (change) => Math.max(...change.moves.map((m) => loadOf(loads, change.tableId, m.shard)));
  const changes = plan.changes
    .map((change, index) => ({ change, index, traffic: trafficOf(change) }))
    .sort((a, b) => compareTraffic(b.traffic, a.traffic) || a.index - b.index)
    .map((x) => x.change);
  return { ...plan, changes };
}

// Even out primaries over healthy, non-draining servers, moving as few as possible. `prefer` lists shards
// that should go back to a server ([{ tableId, shard, serverId }], e.g. what it held before a warning):
// they are returned first where that narrows the imbalance, so the restored placement is the old one.
// `loads` (Map `${tableId}:${shard}` -> client docs/s, see shardLoads in cluster-model.js): when some traffic is
// known, each levelling move takes the least busy of the shards it could move (of equally busy ones, a preferred
// return), because a handover fails the operations that reach the shard meanwhile: moving an idle shard's primary
// costs clients nothing. Without traffic every move is as cheap, and `prefer` restores the old placement.
// A shard missing from `loads` (its primary's stats not read) counts as the busiest: it is moved last.
// take 'busiest' turns the choice round, for a server that was added to take load (add-server, the monitor's
// scale-out): of the primaries it may take, the busiest, so that it serves reads at once instead of idle shards; the
// handover of a busy shard is the price (the query gates send its refused queries again).
// Of the plan by traffic and the plan by counts, the one with fewer handovers is kept, and on a tie the one that
// moves less traffic (greedy quiet moves can need an extra handover: then the count plan is the cheaper), or with
// take 'busiest' more.
export function planRebalancePrimaries(cluster, {
  draining = [], tableIds = null, prefer = [], loads = null, take = 'quietest',
} = {}) {
  const byCounts = levelPrimaries(cluster, { draining, tableIds, prefer, byTraffic: null });
  if (!loads || ![...loads.values()].some((v) => v > 0)) return byCounts;
  const busiest = take === 'busiest';
  const byTraffic = levelPrimaries(cluster, { draining, tableIds, prefer, byTraffic: loads, busiest });
  const cost = (plan) => {
    const moves = plan.changes.flatMap((c) => c.moves.map((m) => loadOf(loads, c.tableId, m.shard)));
    return { handovers: moves.length, traffic: moves.reduce((a, b) => a + b, 0) };
  };
  const [t, c] = [cost(byTraffic), cost(byCounts)];
  const trafficWins = busiest ? t.traffic >= c.traffic : t.traffic <= c.traffic;
  return t.handovers < c.handovers || (t.handovers === c.handovers && trafficWins) ? byTraffic : byCounts;
}

const loadOf = (loads, tableId, shard) => {
  const v = loads.get(`${tableId}:${shard}`);
  return Number.isFinite(v) ? v : Infinity;
};

function levelPrimaries(cluster, {
  draining, tableIds, prefer, byTraffic, busiest = false,
}) {
  const view = createView(cluster, { draining });
  const tables = tableIds ? cluster.tables.filter((t) => tableIds.includes(t.id)) : cluster.tables;
  const counts = countPrimaries(tables);
  if (isLevel(view, tables, counts)) return { changes: [], skipped: [] };
  const byServer = new Map();
  const moves = new Map();
  const skipped = [];
  const refs = [];
  // ref.primary is the shard's primary as planned so far; ref.shard.primary stays the configured one.
  for (const table of tables) {
    for (const shard of table.shards) {
      const ref = { table, shard, primary: shard.primary };
      refs.push(ref);
      addTo(byServer, ref.primary, ref);
    }
  }
  const compareNames = compareNamesOf(view, [...cluster.servers.map((s) => s.id), ...byServer.keys()]);
  const eligibleFor = (ref, exclude) => votingReplicas(ref.shard)
    .filter((id) => id !== exclude && !primaryIneligibility(view, ref.shard, id));
  const assign = (ref, to) => {
    const from = ref.primary;
    if (from === to) return;
    ref.primary = to;
    if (ref.shard.primary === to) moves.delete(ref);
    else moves.set(ref, { shard: ref.shard.index, from: ref.shard.primary, to });
    bump(counts, from, -1);
    bump(counts, to, 1);
    byServer.get(from)?.delete(ref);
    addTo(byServer, to, ref);
  };
  // First, primaries on servers that cannot serve them (draining, disconnected, not ready).
  for (const ref of refs) {
    if (!primaryIneligibility(view, ref.shard, ref.primary)) continue;
    const candidates = eligibleFor(ref, ref.primary);
    if (candidates.length === 0) {
      skipped.push({ tableId: ref.table.id, shard: ref.shard.index, reason: explainNoCandidate(view, ref.shard, ref.primary) });
      continue;
    }
    assign(ref, pickLeastLoaded(view, candidates, counts));
  }
  // Then, preferred returns that narrow the gap by 2+ (with traffic known, they only break ties below).
  const returns = byTraffic ? [] : prefer;
  const refAt = returns.length > 0 ? firstByShard(refs, (r) => r.table.id, (r) => r.shard.index) : null;
  for (const p of returns) {
    const ref = refAt(p.tableId, p.shard);
    if (!ref || ref.primary === p.serverId || !eligibleFor(ref, ref.primary).includes(p.serverId)) continue;
    if ((counts.get(ref.primary) ?? 0) - (counts.get(p.serverId) ?? 0) >= 2) assign(ref, p.serverId);
  }
  // Then, move one primary at a time from the most to a less loaded server while that narrows the gap by 2+.
  const homeOf = preferredHomes(prefer);
  for (;;) {
    const move = byTraffic ? findTrafficLevellingMove(view, byServer, counts, eligibleFor, compareNames, byTraffic, homeOf, busiest)
      : findLevellingMove(view, byServer, counts, eligibleFor, compareNames, homeOf);
    if (!move) break;
    assign(move.ref, move.to);
  }
  return { changes: groupMoves(tables, moves), skipped };
}

// Nothing to level, decided from counts without planning any shard: every primary may stay where it is, and no
// server holds 2+ more than one that may receive a primary, so no return or levelling move could narrow a gap.
function isLevel(view, tables, counts) {
  for (const table of tables) {
    for (const shard of table.shards) if (primaryIneligibility(view, shard, shard.primary)) return false;
  }
  let most = -Infinity;
  for (const count of counts.values()) most = Math.max(most, count);
  return most - fewestOnRecipients(view, counts) < 2;
}

// The fewest primaries on a server that may receive one (connected, not draining), counting servers that hold none.
// Every destination holds at least this many, so a server within 1 of it has nothing to give.
function fewestOnRecipients(view, counts) {
  let fewest = Infinity;
  for (const { id } of view.cluster.servers) {
    if (view.isConnected(id) && !view.draining.has(id)) fewest = Math.min(fewest, counts.get(id) ?? 0);
  }
  return fewest;
}

// Of the shards on the most loaded server, the one with the least loaded destination; between equals, not one that
// is at its preferred home (homeOf: a rollout's levelling would otherwise move a primary it already gave back, a
// third handover where another shard's second does as well).
function findLevellingMove(view, byServer, counts, eligibleFor, compareNames, homeOf) {
  const count = (id) => counts.get(id) ?? 0;
  const fewest = fewestOnRecipients(view, counts);
  const loaded = [...byServer.keys()]
    .filter((id) => count(id) - fewest >= 2)
    .sort((a, b) => count(b) - count(a) || compareNames(a, b));
  for (const from of loaded) {
    const fromCount = count(from);
    let best = null;
    for (const ref of byServer.get(from)) {
      const candidates = eligibleFor(ref, from).filter((id) => count(id) <= fromCount - 2);
      const to = pickLeastLoaded(view, candidates, counts);
      if (to === null) continue;
      const move = { ref, to, atHome: homeOf(ref) === from ? 1 : 0 };
      if (!best || count(to) < count(best.to) || (count(to) === count(best.to) && move.atHome < best.atHome)) best = move;
      // No server that may receive holds fewer, and it leaves no home: no other shard here can do better.
      if (count(best.to) === fewest && best.atHome === 0) break;
    }
    if (best) return { ref: best.ref, to: best.to };
  }
  return null;
}

// With shard loads: as by counts, a move takes a primary off the most loaded servers (the next ones down only where
// none of theirs can move), so it mostly takes as many moves (planRebalancePrimaries keeps the count plan where it
// does not); but of all the primaries on the servers with that count, it moves the quietest (busiest: the busiest).
// Ties go to a preferred return, then to the least loaded destination.
function findTrafficLevellingMove(view, byServer, counts, eligibleFor, compareNames, loads, homeOf, busiest) {
  const trafficOf = (ref) => loadOf(loads, ref.table.id, ref.shard.index);
  const count = (id) => counts.get(id) ?? 0;
  const fewest = fewestOnRecipients(view, counts);
  const byTraffic = (a, b) => (busiest ? compareTraffic(trafficOf(b.ref), trafficOf(a.ref)) : compareTraffic(trafficOf(a.ref), trafficOf(b.ref)));
  const better = (a, b) => byTraffic(a, b) || a.back - b.back || count(a.to) - count(b.to)
    || compareNames(a.from, b.from);
  const levels = [...new Set([...byServer.keys()].map(count))].filter((c) => c - fewest >= 2).sort((a, b) => b - a);
  for (const level of levels) {
    let best = null;
    for (const [from, refs] of byServer) {
      if (count(from) !== level) continue;
      for (const ref of refs) {
        const candidates = eligibleFor(ref, from).filter((id) => count(id) <= level - 2);
        const home = homeOf(ref);
        const to = candidates.includes(home) ? home : pickLeastLoaded(view, candidates, counts);
        const move = { ref, from, to, back: to === home ? 0 : 1 };
        if (to !== null && (!best || better(move, best) < 0)) best = move;
      }
    }
    if (best) return best;
  }
  return null;
}

// The server each shard should go back to, the first one `prefer` lists for it.
function preferredHomes(prefer) {
  const find = firstByShard(prefer, (p) => p.tableId, (p) => p.shard);
  return (ref) => find(ref.table.id, ref.shard.index)?.serverId;
}

// A lookup by (tableId, shard index) of the first item listed for a shard (what Array.find would return), so that
// matching a list against every shard stays linear.
function firstByShard(items, tableIdOf, indexOf) {
  const byTable = new Map();
  for (const item of items) {
    if (!byTable.has(tableIdOf(item))) byTable.set(tableIdOf(item), new Map());
    const shards = byTable.get(tableIdOf(item));
    if (!shards.has(indexOf(item))) shards.set(indexOf(item), item);
  }
  return (tableId, index) => byTable.get(tableId)?.get(index);
}

function addTo(byServer, id, ref) {
  if (!byServer.has(id)) byServer.set(id, new Set());
  byServer.get(id).add(ref);
}

// Infinity - Infinity is NaN: two unknown loads are equal.
const compareTraffic = (a, b) => (a === b ? 0 : a - b);

function groupMoves(tables, moves) {
  const byTable = new Map();
  for (const [ref, move] of moves) {
    if (!byTable.has(ref.table.id)) byTable.set(ref.table.id, []);
    byTable.get(ref.table.id).push(move);
  }
  return tables
    .filter((t) => byTable.has(t.id))
    .map((t) => changeFor(t, byTable.get(t.id).sort((a, b) => a.shard - b.shard)));
}

function changeFor(table, moves) {
  const shards = table.shards.map(configOf);
  for (const move of moves) shards[move.shard].primary = move.to;
  return { tableId: table.id, shards, moves };
}

// The writable part of a shard: what goes into table_config.
export function configOf(shard) {
  return { primary: shard.primary, replicas: [...shard.replicas], nonvoting: [...shard.nonvoting] };
}

export function explainNoCandidate(view, shard, current) {
  const others = shard.replicas.filter((id) => id !== current);
  if (others.length === 0) return 'no other replica';
  const reasons = others.map((id) => `${view.nameOf(id)} ${primaryIneligibility(view, shard, id)}`);
  return `no eligible replica (${reasons.join(', ')})`;
}

function bump(counts, id, delta) {
  counts.set(id, (counts.get(id) ?? 0) + delta);
}
