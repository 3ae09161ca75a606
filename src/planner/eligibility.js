// Pure rules about who may hold which role. Every planner decision and the final safety check use these.

// A view indexes a cluster snapshot once, so that the planners stay linear on large clusters.
export function createView(cluster, { draining = [] } = {}) {
  const serversById = new Map(cluster.servers.map((s) => [s.id, s]));
  return {
    cluster,
    serversById,
    draining: new Set(draining),
    isConnected: (id) => serversById.get(id)?.connected === true,
    nameOf: (id) => serversById.get(id)?.name ?? id,
  };
}

// nonvoting lists hold a server or two, so includes beats building a Set for every shard of a large plan.
export function votingReplicas(shard) {
  return shard.replicas.filter((id) => !shard.nonvoting.includes(id));
}

// Live and up to date: connected, and its replica of this shard is `ready` in table_status.
export function isLiveReady(view, shard, id) {
  return view.isConnected(id) && shard.states[id] === 'ready';
}

// Why a server may not become this shard's primary, or null if it may.
export function primaryIneligibility(view, shard, id) {
  if (!shard.replicas.includes(id)) return 'not a replica';
  if (shard.nonvoting.includes(id)) return 'nonvoting';
  if (!view.isConnected(id)) return 'disconnected';
  if (view.draining.has(id)) return 'draining';
  const state = shard.states[id];
  if (state !== 'ready') return state ?? 'state unknown';
  return null;
}

// gone: servers counted as not live whatever their state (about to leave), e.g. a server being drained or evicted.
// Counted in one pass without arrays: the safety check and planAddServer ask this of every shard.
export function hasLiveMajority(view, shard, { gone = null } = {}) {
  let voters = 0;
  let live = 0;
  for (const id of shard.replicas) {
    if (shard.nonvoting.includes(id)) continue;
    voters += 1;
    if (isLiveReady(view, shard, id) && !gone?.has(id)) live += 1;
  }
  return live * 2 > voters;
}

// The shards in which `serverId` is a voter whose replica is not ready yet (backfilling, or not seen at all).
export function unreadyReplicasOf(cluster, serverId) {
  return cluster.tables.flatMap((t) => t.shards.filter((s) => votingReplicas(s).includes(serverId) && s.states[serverId] !== 'ready'));
}

// Still settling: a live majority of voters is connected, but the shard has no acting primary yet or a connected
// voter is not ready (an election or a catch-up under way). Work refused now may be possible in a moment.
export function isSettling(view, shard) {
  const voters = votingReplicas(shard);
  const connected = voters.filter((id) => view.isConnected(id));
  if (connected.length * 2 <= voters.length) return false;
  return shard.acting.length === 0 || connected.some((id) => shard.states[id] !== 'ready');
}

// Whether RethinkDB may still elect one of `leaving` (a Set of ids) as this shard's acting primary: its configured
// primary is lost, one of them votes, and no other live server acts for it yet (an election under way, about
// 0.5 s after a crash: fixture 09).
export function mayElectOneOf(view, shard, leaving) {
  return !leaving.has(shard.primary) && !view.isConnected(shard.primary) && votingReplicas(shard).some((id) => leaving.has(id))
    && !shard.acting.some((id) => !leaving.has(id) && view.isConnected(id));
}

// The skipped shards ({ tableId, shard }) a drain stops waiting for: not those still settling (an election or a
// catch-up under way), whose replicas may be eligible in a moment.
export function settledSkips(cluster, skipped) {
  const view = createView(cluster);
  return skipped.filter((item) => {
    const shard = cluster.tables.find((t) => t.id === item.tableId)?.shards[item.shard];
    return !shard || !isSettling(view, shard);
  });
}

// Why a server may not receive a new replica ('disconnected' or 'draining'), or null if it may.
export function replicaHostIneligibility(view, id) {
  if (!view.isConnected(id)) return 'disconnected';
  if (view.draining.has(id)) return 'draining';
  return null;
}

export function canHostReplica(view, id) {
  return replicaHostIneligibility(view, id) === null;
}

// Primaries configured per server, over the given tables.
export function countPrimaries(tables) {
  const counts = new Map();
  for (const table of tables) {
    for (const shard of table.shards) counts.set(shard.primary, (counts.get(shard.primary) ?? 0) + 1);
  }
  return counts;
}

export function countReplicas(tables) {
  const counts = new Map();
  for (const table of tables) {
    for (const shard of table.shards) {
      for (const id of shard.replicas) counts.set(id, (counts.get(id) ?? 0) + 1);
    }
  }
  return counts;
}

// A comparator of server ids by name that agrees with localeCompare, from ranks collated once: planners that
// sort servers again at every move then compare integers. Names that collate equal share a rank, so ties stay
// ties (and a stable sort keeps their order). Every id later compared must be in `ids`.
export function compareNamesOf(view, ids) {
  const byName = (a, b) => view.nameOf(a).localeCompare(view.nameOf(b));
  const sorted = [...new Set(ids)].sort(byName);
  const rank = new Map();
  sorted.forEach((id, i) => rank.set(id, i > 0 && byName(sorted[i - 1], id) === 0 ? rank.get(sorted[i - 1]) : i));
  return (a, b) => rank.get(a) - rank.get(b);
}

// The candidate with the fewest items so far; ties go to the lower name so that plans are deterministic.
export function pickLeastLoaded(view, candidates, counts) {
  let best = null;
  let bestCount = 0;
  for (const id of candidates) {
    const count = counts.get(id) ?? 0;
    if (best === null || count < bestCount || (count === bestCount && view.nameOf(id) < view.nameOf(best))) {
      best = id;
      bestCount = count;
    }
  }
  return best;
}
