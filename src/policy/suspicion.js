// Pure: which servers the manager suspects of being lost before RethinkDB's heartbeat says so, and what it does
// about it. A server that vanishes silently (a node powered off, its network gone: no FIN, no RST) keeps every write
// sent to it hanging until the other servers' heartbeat drops it (1.4-1.6 times heartbeat_timeout_secs after its last
// byte), and each of those writes then answers OP_INDETERMINATE, which no one may send again. The manager probes every
// server (src/rethinkdb/prober.js); a server whose probe has waited SUSPICION_AFTER_MS is suspected, and the query
// gates hold new writes for the tables it acts as primary for, until RethinkDB has failed over (another server acts),
// the server answers again, or the hold's ttl. A hold only delays writes: a wrong suspicion costs latency, never an
// answer.

// probes: [{ serverId, waitingSince, vias }] (waitingSince: when the direct probe or connect still unanswered was
// sent, or null; vias: [{ waitingSince, unreachable }] for each probe of the server through another server,
// src/rethinkdb/prober.js; unreachable: that server answered that it does not reach it).
// -> the ids of the servers silent for suspectAfterMs or more: their direct probe has waited that long, or a majority
// of their probes through other servers have, or found it unreachable (one server cut off from the rest leaves only
// its own probes through it waiting, a minority of every other server's).
export function silentServers(probes, now, { suspectAfterMs }) {
  const waited = (since) => since !== null && since !== undefined && now - since >= suspectAfterMs;
  const cutOff = (vias = []) => vias.length > 0 && vias.filter((v) => v.unreachable || waited(v.waitingSince)).length * 2 > vias.length;
  return probes.filter((p) => waited(p.waitingSince) || cutOff(p.vias)).map((p) => p.serverId);
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
