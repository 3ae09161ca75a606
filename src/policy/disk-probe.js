// Pure: the disk probes' tables. The latency trigger's disk signal (src/policy/latency.js) is the time of a durable
// write to a table whose one replica is on the server: `<LATENCY_DISK_PROBE_DB>.disk_probe_<server>`, one shard, one
// replica, one document written again and again. The manager makes and places these tables itself, and leaves them out
// of every cluster read (src/cluster/cluster-model.js, withoutProbeTables): nothing it plans, holds or counts sees them.
// A server gone for good leaves a table none of whose replicas is reachable; it is dropped after dropAfterMs.

export const PROBE_TABLE_PREFIX = 'disk_probe_';

// The probe table of a server (RethinkDB server names and table names share the alphabet [A-Za-z0-9_]).
export const probeTableOf = (serverName) => `${PROBE_TABLE_PREFIX}${serverName}`;

// servers: the connected servers [{ name }]; tables: the probe database's tables [{ id, name, replicas }] (replicas:
// the server names of its one shard, or null when RethinkDB gives none: no replica reachable); missingSince: Map
// table name -> when its server was first seen gone (the state this returns, kept by the caller); now; dropAfterMs.
// -> { create: [{ table, server }], place: [{ tableId, table, server }], drop: [{ tableId, table, reason }], missingSince }.
// - a connected server without its table: create it (then it is placed);
// - a table of a connected server not on that server alone: place it there (one shard, one replica);
// - a table of a connected server that RethinkDB cannot reach: its replica is on a server gone under the same name (a
//   replacement, with new data): drop it, to be made again;
// - a table whose server is not connected for dropAfterMs: drop it. Tables of other names are not the manager's.
export function planProbeTables({
  servers, tables, missingSince = new Map(), now, dropAfterMs,
}) {
  const connected = new Set(servers.map((s) => s.name));
  const ours = tables.filter((t) => t.name.startsWith(PROBE_TABLE_PREFIX));
  const have = new Set(ours.map((t) => t.name));
  const create = servers.filter((s) => !have.has(probeTableOf(s.name))).map((s) => ({ table: probeTableOf(s.name), server: s.name }));
  const place = [];
  const drop = [];
  const missing = new Map();
  for (const t of ours) {
    const server = t.name.slice(PROBE_TABLE_PREFIX.length);
    if (connected.has(server)) {
      if (t.replicas === null) drop.push({ tableId: t.id, table: t.name, reason: `no replica of it is reachable while ${server} is connected (a server that replaced one of that name)` });
      else if (!(t.replicas.length === 1 && t.replicas[0] === server)) place.push({ tableId: t.id, table: t.name, server });
      continue;
    }
    const since = missingSince.get(t.name) ?? now;
    missing.set(t.name, since);
    if (now - since >= dropAfterMs) {
      drop.push({ tableId: t.id, table: t.name, reason: `server ${server} has not been connected for ${Math.round((now - since) / 1000)} s` });
      missing.delete(t.name);
    }
  }
  return {
    create, place, drop, missingSince: missing,
  };
}
