// Pure: turns RethinkDB system-table documents into the manager's cluster snapshot, and looks things up in it.
// Identities are uuids (stable across renames); names are kept for humans.

import { appError } from '../errors.js';

// raw: { tableConfig, tableConfigByName, tableStatus, serverStatus, serverConfig, dbConfig, jobs }
// tableConfig and tableStatus are read with identifierFormat 'uuid'; tableConfigByName, serverStatus and jobs with names.
export function normalizeSystemTables(raw) {
  const dbNames = new Map((raw.dbConfig ?? []).map((d) => [d.id, d.name]));
  const tagsById = new Map((raw.serverConfig ?? []).map((s) => [s.id, s.tags ?? []]));
  const servers = new Map();
  for (const status of raw.serverStatus ?? []) {
    servers.set(status.id, {
      id: status.id,
      name: status.name,
      connected: true,
      tags: tagsById.get(status.id) ?? [],
      hostname: status.network?.hostname ?? null,
      canonicalAddresses: (status.network?.canonical_addresses ?? []).map((a) => ({ host: a.host, port: a.port })),
    });
  }
  // Servers that configs reference but server_status no longer lists are disconnected; name-format
  // table_config still knows their names, shard by shard in the same order as the uuid form.
  const namesFromConfig = zipConfigNames(raw.tableConfig ?? [], raw.tableConfigByName ?? []);
  const statusById = new Map((raw.tableStatus ?? []).map((t) => [t.id, t]));
  const tables = (raw.tableConfig ?? []).map((config) => {
    for (const id of referencedServers(config)) {
      if (!servers.has(id)) {
        servers.set(id, {
          id, name: namesFromConfig.get(id) ?? id, connected: false, tags: [], hostname: null, canonicalAddresses: [],
        });
      }
    }
    return normalizeTable(config, statusById.get(config.id), dbNames);
  });
  // A job names servers by name: a connected server wins over a disconnected one of the same name (a replacement).
  const byConnection = [...servers.values()].sort((a, b) => Number(a.connected) - Number(b.connected));
  const idByName = new Map(byConnection.map((s) => [s.name, s.id]));
  const tableIdByName = new Map(tables.map((t) => [`${t.db}.${t.name}`, t.id]));
  const backfills = (raw.jobs ?? [])
    .filter((job) => job.type === 'backfill' && job.info)
    .map((job) => ({
      tableId: tableIdByName.get(`${job.info.db}.${job.info.table}`) ?? null,
      db: job.info.db,
      table: job.info.table,
      sourceId: idByName.get(job.info.source_server) ?? null,
      destinationId: idByName.get(job.info.destination_server) ?? null,
      sourceName: job.info.source_server ?? null,
      destinationName: job.info.destination_server ?? null,
      progress: typeof job.info.progress === 'number' ? job.info.progress : null,
    }));
  return {
    servers: [...servers.values()].sort(byName),
    tables: tables.sort((a, b) => `${a.db}.${a.name}`.localeCompare(`${b.db}.${b.name}`)),
    backfills,
    // null when the read did not include it (recorded fixtures older than this field).
    heartbeatTimeoutSecs: raw.heartbeat?.heartbeat_timeout_secs ?? null,
  };
}

// A table none of whose replicas is reachable: RethinkDB 2.4.4 gives its table_config row no shards, only
// `error` ("None of the replicas for this table are accessible."), and its table_status row `shards: null`
// (test/data/rethinkdb-2.4.4/table-with-no-accessible-replica.json). It is kept with no shards and the error: the
// connected servers hold none of it, nothing can be planned for it, and no write to its config would be taken.
function unavailableTable(config, dbNames) {
  return {
    id: config.id,
    db: dbNames.get(config.db) ?? config.db,
    name: config.name,
    shards: [],
    error: config.error ?? 'RethinkDB gave no shards for this table',
    readyForWrites: false,
    readyForReads: false,
    allReplicasReady: false,
    raftLeader: null,
  };
}

function normalizeTable(config, status, dbNames) {
  if (!Array.isArray(config.shards)) return unavailableTable(config, dbNames);
  const statusShards = status?.shards ?? null;
  return {
    id: config.id,
    db: dbNames.get(config.db) ?? config.db,
    name: config.name,
    shards: config.shards.map((shard, index) => {
      const observed = statusShards?.[index];
      return {
        index,
        primary: shard.primary_replica,
        replicas: [...shard.replicas],
        nonvoting: [...(shard.nonvoting_replicas ?? [])],
        acting: observed ? [...observed.primary_replicas] : [],
        states: Object.fromEntries((observed?.replicas ?? []).map((r) => [r.server, r.state])),
      };
    }),
    readyForWrites: status?.status?.ready_for_writes ?? false,
    readyForReads: status?.status?.ready_for_reads ?? false,
    allReplicasReady: status?.status?.all_replicas_ready ?? false,
    raftLeader: status?.raft_leader ?? null,
  };
}

function zipConfigNames(byId, byName) {
  const names = new Map();
  const nameDocs = new Map(byName.map((t) => [t.id, t]));
  for (const table of byId) {
    const named = nameDocs.get(table.id);
    if (!named || !Array.isArray(table.shards) || !Array.isArray(named.shards) || named.shards.length !== table.shards.length) continue;
    table.shards.forEach((shard, i) => {
      shard.replicas.forEach((id, j) => {
        const name = named.shards[i].replicas[j];
        if (name !== undefined) names.set(id, name);
      });
    });
  }
  return names;
}

function referencedServers(config) {
  const ids = new Set();
  for (const shard of config.shards ?? []) {
    for (const id of shard.replicas) ids.add(id);
    if (shard.primary_replica) ids.add(shard.primary_replica);
  }
  return ids;
}

function byName(a, b) {
  return a.name.localeCompare(b.name) || a.id.localeCompare(b.id);
}

// Client traffic per shard, estimated from rethinkdb.stats ['table_server', table, server] rows: reads are counted
// where they run (the B-tree's keys_read, on the primary with read_mode single), so a server's read_docs_per_sec
// for a table is split evenly over the shards of that table it is the primary of. An estimate: writes are left
// out (every replica applies them, so they do not tell shards apart), and the rate covers the last second only.
// Returns Map `${tableId}:${shard}` -> docs/s; a shard whose primary has no row (an error row from an unresponsive
// server) is absent, and the planner counts it as the busiest.
export function shardLoads(cluster, statsRows) {
  const reads = new Map();
  for (const row of statsRows ?? []) {
    if (row?.id?.[0] !== 'table_server' || typeof row.query_engine?.read_docs_per_sec !== 'number') continue;
    reads.set(`${row.id[1]}:${row.id[2]}`, row.query_engine.read_docs_per_sec);
  }
  const loads = new Map();
  for (const table of cluster.tables) {
    for (const shard of table.shards) {
      const rate = reads.get(`${table.id}:${shard.primary}`);
      if (rate === undefined) continue;
      const sharing = table.shards.filter((s) => s.primary === shard.primary).length;
      loads.set(`${table.id}:${shard.index}`, rate / sharing);
    }
  }
  return loads;
}

// Lookups. A reference is a name (what humans type) or a uuid.
// A replacement can join under the name of the lost server it replaces (RethinkDB 2.4 allows it while the lost
// one is disconnected): a name then means the connected server.
export function findServer(cluster, ref) {
  return cluster.servers.find((s) => s.id === ref)
    ?? cluster.servers.find((s) => s.name === ref && s.connected)
    ?? cluster.servers.find((s) => s.name === ref) ?? null;
}

// The server a reference names, or SERVER_NOT_FOUND listing the known ones.
export function resolveServer(cluster, ref) {
  const server = findServer(cluster, ref);
  if (!server) {
    const known = cluster.servers.map((s) => s.name).join(', ');
    throw appError('serverNotFound', { ref, known });
  }
  return server;
}

export function findTable(cluster, ref) {
  return cluster.tables.find((t) => t.id === ref) ?? cluster.tables.find((t) => `${t.db}.${t.name}` === ref) ?? null;
}

export function serverName(cluster, id) {
  return cluster.servers.find((s) => s.id === id)?.name ?? id;
}

export function tableLabel(table) {
  return `${table.db}.${table.name}`;
}

// selectors: ['db.table', 'db.*']; empty means every user table.
// The system-table documents without the tables of database `db` whose names start with `prefix` (the manager's own
// disk probes, src/policy/disk-probe.js): nothing the manager plans, holds or counts sees them, nor the servers only
// they name. Other tables of that database are kept.
export function withoutProbeTables(raw, { db, prefix }) {
  if (!db) return raw;
  const dbIds = new Set((raw.dbConfig ?? []).filter((d) => d.name === db).map((d) => d.id));
  if (dbIds.size === 0) return raw;
  const dropped = new Set((raw.tableConfig ?? []).filter((t) => dbIds.has(t.db) && t.name.startsWith(prefix)).map((t) => t.id));
  if (dropped.size === 0) return raw;
  const keep = (t) => !dropped.has(t.id);
  return {
    ...raw,
    tableConfig: (raw.tableConfig ?? []).filter(keep),
    tableConfigByName: (raw.tableConfigByName ?? []).filter(keep),
    tableStatus: (raw.tableStatus ?? []).filter(keep),
    ...(raw.jobs ? { jobs: raw.jobs.filter((j) => !(j.info?.db === db && `${j.info?.table ?? ''}`.startsWith(prefix))) } : {}),
  };
}

export function filterManagedTables(cluster, selectors) {
  if (!selectors || selectors.length === 0) return cluster;
  const matches = (t) => selectors.some((sel) => sel === `${t.db}.${t.name}` || sel === `${t.db}.*`);
  return { ...cluster, tables: cluster.tables.filter(matches) };
}

// Maps a Kubernetes pod to its RethinkDB server: explicit override first, then the server's hostname
// (a StatefulSet pod's hostname is its name), then canonical addresses (pod DNS name or pod IP).
export function findServerForPod(cluster, { podName, podIp = null, overrides = {} }) {
  const override = overrides[podName];
  if (override) return findServer(cluster, override);
  const connected = cluster.servers.filter((s) => s.connected);
  return connected.find((s) => s.hostname === podName)
    ?? connected.find((s) => s.canonicalAddresses.some((a) => a.host === podName
      || a.host.startsWith(`${podName}.`) || (podIp && a.host === podIp)))
    ?? null;
}

// The StatefulSet's naming (deploy/k8s's start script): pod rethinkdb-N runs server rethinkdb_N.
export function conventionalPodName(serverName) {
  return serverName.replace(/_/g, '-');
}

// The reverse: the pod that runs a server (an override naming it, else its hostname, which is the pod's name in
// a StatefulSet). Null when the server is disconnected and no override names it.
export function podNameForServer(server, overrides = {}) {
  const override = Object.entries(overrides).find(([, serverName]) => serverName === server.name || serverName === server.id);
  return override?.[0] ?? server.hostname ?? null;
}
