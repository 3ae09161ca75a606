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

export function votingReplicas(shard) {
  const nonvoting = new Set(shard.nonvoting);
  return shard.replicas.filter((id) => !nonvoting.has(id));
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
export function hasLiveMajority(view, shard, { gone = null } = {}) {
  const voters = votingReplicas(shard);
  const live = voters.filter((id) => isLiveReady(view, shard, id) && !gone?.has(id)).length;
  return live * 2 > voters.length;
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

// The candidate with the fewest items so far; ties go to the lower name so that plans are deterministic.
export function pickLeastLoaded(view, candidates, counts) {
  let best = null;
  for (const id of candidates) {
    if (best === null) { best = id; continue; }
    const diff = (counts.get(id) ?? 0) - (counts.get(best) ?? 0);
    if (diff < 0 || (diff === 0 && view.nameOf(id) < view.nameOf(best))) best = id;
  }
  return best;
}
