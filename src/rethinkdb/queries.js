// ReQL for the system tables the manager reads and writes, and for its disk probes' tables (src/policy/disk-probe.js).
// Builders only; nothing runs here.

const UUID = { identifierFormat: 'uuid' };

// One round trip for a consistent-enough snapshot of the cluster. backfills: also read `jobs` (backfill progress).
// It is left out unless asked for: RethinkDB builds `jobs` by asking every server about every table, which took
// 0.6-2.5 s with 1,000 tables on 4 servers and no backfill running, more than the rest of the read together.
export function buildReadSystemTables(r, { backfills = true } = {}) {
  const sys = r.db('rethinkdb');
  return r.expr({
    tableConfig: sys.table('table_config', UUID).coerceTo('array'),
    tableConfigByName: sys.table('table_config').pluck('id', 'shards').coerceTo('array'),
    tableStatus: sys.table('table_status', UUID).coerceTo('array'),
    serverStatus: sys.table('server_status').coerceTo('array'),
    serverConfig: sys.table('server_config').pluck('id', 'name', 'tags').coerceTo('array'),
    dbConfig: sys.table('db_config').coerceTo('array'),
    ...(backfills ? { jobs: sys.table('jobs').filter({ type: 'backfill' }).coerceTo('array') } : {}),
    heartbeat: sys.table('cluster_config').get('heartbeat'),
  });
}

// One table's table_status (by uuid, servers as uuids), or null: what a hold on the query gates polls.
export function buildReadTableStatus(r, tableId) {
  return r.db('rethinkdb').table('table_status', UUID).get(tableId);
}

// Client traffic per table and server (rethinkdb.stats), for choosing which primaries are cheap to move.
export function buildReadTableServerStats(r) {
  return r.db('rethinkdb').table('stats').filter(r.row('id').nth(0).eq('table_server'))
    .pluck('id', { query_engine: ['read_docs_per_sec'] }).coerceTo('array');
}

// The cluster-wide heartbeat timeout: how long servers wait before they declare a silent peer gone (min 2 s).
export function buildSetHeartbeatTimeout(r, seconds) {
  return r.db('rethinkdb').table('cluster_config').get('heartbeat').update({ heartbeat_timeout_secs: seconds });
}

// ONE update per table carrying the whole shards array, addressed by the table's uuid.
export function buildUpdateTableShards(r, tableId, shards) {
  return r.db('rethinkdb').table('table_config', UUID).get(tableId).update({ shards });
}

export function buildPing(r) {
  return r.db('rethinkdb').table('server_status').count();
}

// Our shard shape to table_config's.
export function toRawShards(shards) {
  return shards.map((s) => ({ primary_replica: s.primary, replicas: [...s.replicas], nonvoting_replicas: [...s.nonvoting] }));
}

// The disk probes' tables (name format: replicas by server name): [{ id, name, shards }]; an unreachable one has no shards.
export function buildReadProbeTables(r, db) {
  return r.db('rethinkdb').table('table_config').filter({ db }).pluck('id', 'name', 'shards').coerceTo('array');
}

export function buildCreateDatabase(r, db) {
  return r.branch(r.dbList().contains(db), { dbs_created: 0 }, r.dbCreate(db));
}

export function buildCreateProbeTable(r, db, table) {
  return r.db(db).tableCreate(table, { shards: 1, replicas: 1 });
}

// One shard, one replica: on `server` alone.
export function buildPlaceProbeTable(r, tableId, server) {
  return r.db('rethinkdb').table('table_config').get(tableId).update({ shards: [{ primary_replica: server, replicas: [server], nonvoting_replicas: [] }] });
}

// Deleting a table's row of table_config drops the table, reachable or not.
export function buildDropProbeTable(r, tableId) {
  return r.db('rethinkdb').table('table_config').get(tableId).delete();
}

// The disk probe: one document written again, durably (the write waits for the server's disk).
export function buildDiskProbe(r, db, table) {
  return r.db(db).table(table).insert({ id: 'probe', at: r.now() }, { conflict: 'replace', durability: 'hard' });
}
