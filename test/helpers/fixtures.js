// Loads the recorded RethinkDB and Kubernetes fixtures, and derives the variations tests need.

import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const FIXTURES_DIR = process.env.FIXTURES_DIR ?? join(here, '..', '..', '..', 'shared', 'fixtures');

export function loadRethinkFixture(name) {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, 'rethinkdb-2.4.4', name), 'utf8'));
}

export function loadKubeFixture(name) {
  return JSON.parse(readFileSync(join(FIXTURES_DIR, 'kubernetes-1.34', name), 'utf8'));
}

// Server and db uuids as recorded in 01-healthy (server_status) and 01-healthy-uuid (db).
export function recordedIds() {
  const healthy = loadRethinkFixture('01-healthy.json');
  const uuid = loadRethinkFixture('01-healthy-uuid.json');
  const servers = Object.fromEntries(healthy.server_status.map((s) => [s.name, s.id]));
  return { servers, dbs: { [healthy.table_config[0].db]: uuid.table_config[0].db } };
}

// Name-format table_config/table_status documents rewritten as identifierFormat 'uuid' would return them.
export function toUuidFormat(doc, ids = recordedIds()) {
  const id = (name) => ids.servers[name] ?? name;
  const out = structuredClone(doc);
  out.db = ids.dbs[doc.db] ?? doc.db;
  if (doc.raft_leader !== undefined) out.raft_leader = doc.raft_leader === null ? null : id(doc.raft_leader);
  out.shards = doc.shards.map((s) => (s.primary_replicas
    ? { primary_replicas: s.primary_replicas.map(id), replicas: s.replicas.map((r) => ({ ...r, server: id(r.server) })) }
    : { ...s, primary_replica: id(s.primary_replica), replicas: s.replicas.map(id), nonvoting_replicas: s.nonvoting_replicas.map(id) }));
  return out;
}

// The raw snapshot the adapter's one read query returns, built from a recorded situation file.
export function rawSnapshot(name) {
  const f = loadRethinkFixture(name);
  const ids = recordedIds();
  return {
    tableConfig: f.table_config.map((t) => toUuidFormat(t, ids)),
    tableConfigByName: f.table_config.map((t) => ({ id: t.id, shards: t.shards })),
    tableStatus: f.table_status.map((t) => toUuidFormat(t, ids)),
    serverStatus: f.server_status,
    serverConfig: f.server_config.map(({ id, name, tags }) => ({ id, name, tags })),
    dbConfig: Object.entries(ids.dbs).map(([dbName, id]) => ({ id, name: dbName })),
    jobs: (f.jobs ?? []).filter((j) => j.type === 'backfill'),
  };
}
