// Pure: which servers the manager suspects of being lost before RethinkDB's heartbeat says so, and what it does
// about it. A server that vanishes silently (a node powered off, its network gone: no FIN, no RST) keeps every write
// sent to it hanging until the other servers' heartbeat drops it (1.4-1.6 times heartbeat_timeout_secs after its last
// byte), and each of those writes then answers OP_INDETERMINATE, which no one may send again. The manager probes every
// server (src/rethinkdb/prober.js); a server whose probe has waited SUSPICION_AFTER_MS is suspected, and the query
// gates hold new writes for the tables it acts as primary for, until RethinkDB has failed over (another server acts),
// the server answers again, or the hold's ttl. A hold only delays writes: a wrong suspicion costs latency, never an
// answer.

// probes: [{ serverId, waitingSince, vias }] (waitingSince: when the direct probe or connect still unanswered was
// sent, or null; vias: [{ viaId, waitingSince, unreachable, reachable }] for each probe of the server through another
// server, src/rethinkdb/prober.js: unreachable, that server's last answer said it does not reach this one; reachable,
// its last answer was the server's row). -> the ids of the servers silent for suspectAfterMs or more:
// - most of their probes through other servers have waited that long or found them unreachable (a server cut off from
//   the others, whether or not the manager still reaches it); or
// - their direct probe has waited that long, unless most of the other servers still reach them (then it is the
//   manager that does not: RethinkDB will not fail over, and holding their writes would only delay them).
// A via that is itself directly silent is not counted: its own probes wait, which says nothing of the server.
// busy (serverIds) and busyAfterMs: a server the monitor last found at its CPU limit (or on a saturated node) is
// silent only after busyAfterMs. The kernel throttles a container at its CPU limit for the rest of each period (CFS),
// so a busy server answers late, not never: on real kubelets servers held at 200m of CPU went 150-375 ms without
// answering, again and again, and each time their tables' writes were held for nothing.
export function silentServers(probes, now, { suspectAfterMs, busyAfterMs = suspectAfterMs, busy = new Set() }) {
  const waited = (serverId, since) => since !== null && since !== undefined && now - since >= (busy.has(serverId) ? busyAfterMs : suspectAfterMs);
  const directly = new Set(probes.filter((p) => waited(p.serverId, p.waitingSince)).map((p) => p.serverId));
  const most = (list, test) => list.length > 0 && list.filter(test).length * 2 > list.length;
  return probes.filter((p) => {
    const gone = (v) => v.unreachable || waited(p.serverId, v.waitingSince);
    const vias = (p.vias ?? []).filter((v) => !directly.has(v.viaId));
    if (most(vias, gone)) return true;
    return directly.has(p.serverId) && !most(vias, (v) => v.reachable && !gone(v));
  }).map((p) => p.serverId);
}

// The tables one of whose shards `serverId` acts as primary for, in a cluster read: [{ id, name: 'db.table' }].
export function tablesActedForBy(cluster, serverId) {
  return cluster.tables.filter((t) => t.shards.some((s) => s.acting.includes(serverId))).map((t) => ({ id: t.id, name: `${t.db}.${t.name}` }));
}

// suspects: silentServers' answer; probed: how many servers are probed; held: Map serverId -> { tables } (the holds
// in force); cluster: a recent read (acting primaries). -> { hold: [{ serverId, tables, reason }], release: [{ serverId,
// how, reason }], reason }.
// When half the probed servers or more are silent at once, the manager's own network is the likelier loss: it holds
// nothing new (and keeps what it holds until each ends on its own).
// settled: the suspects whose tables RethinkDB has already failed over (a hold ended so): not held again while they
// stay silent (the cluster read that names their tables may predate the failover).
// listed(id): whether the prober still probes the server (RethinkDB still lists it in server_status). A held server
// no longer silent is released: 'answered' if it answers again, 'dropped' if RethinkDB has dropped it (its failover is
// under way: a write released now meets "primary replica not available", which the gate sends again).
export function decideSuspicion({
  suspects, probed, held, cluster, settled = new Set(), nameOf = (id) => id, listed = () => true,
}) {
  const release = [...held.keys()].filter((id) => !suspects.includes(id)).map((serverId) => (listed(serverId)
    ? { serverId, how: 'answered', reason: `${nameOf(serverId)} answers again` }
    : { serverId, how: 'dropped', reason: `RethinkDB no longer lists ${nameOf(serverId)}: it dropped it and fails over` }));
  if (suspects.length === 0) return { hold: [], release, reason: 'every probed server answers' };
  if (suspects.length * 2 >= probed) {
    return {
      hold: [], release,
      reason: `${suspects.length} of ${probed} servers are silent to the manager at once: more likely its own network than theirs; nothing held`,
    };
  }
  const hold = suspects.filter((id) => !held.has(id) && !settled.has(id)).map((serverId) => {
    const tables = tablesActedForBy(cluster, serverId);
    return { serverId, tables, reason: `${nameOf(serverId)} has not answered a probe; its tables' new writes are held until another server acts for them` };
  }).filter((h) => h.tables.length > 0);
  return { hold, release, reason: `silent: ${suspects.map(nameOf).join(', ')}` };
}

// Whether a held suspect's tables are acted for by other servers now (RethinkDB has dropped it and failed over), from
// the acting primaries of each held table ([[serverId]] per shard, null when the row was not read).
export function failedOverFrom(serverId, actingByTable) {
  return actingByTable.every((acting) => acting !== null && acting.every((shard) => shard.length > 0 && !shard.includes(serverId)));
}
