// The data-store port the actions use. It wraps a system-table source (the real driver, or the sandbox
// model): it parses the documents into a cluster snapshot and turns write results into success or an error.
// Each read and write is counted and timed in the request's trace (src/lib/trace.js).

import { appError } from '../errors.js';
import { filterManagedTables, normalizeSystemTables, withoutProbeTables } from '../cluster/cluster-model.js';
import { PROBE_TABLE_PREFIX } from '../policy/disk-probe.js';
import { timeQuery } from '../lib/trace.js';
import { toRawShards } from './queries.js';

// probeDb: the disk probes' database (LATENCY_DISK_PROBE_DB), whose probe tables the cluster read leaves out.
export function createDataStore({ source, managedTables = [], probeDb = null }) {
  // backfills: also read the backfills under way (rethinkdb.jobs, costly on a large cluster); `backfills` is null
  // in a snapshot read without them.
  async function readCluster({ backfills = false } = {}) {
    return timeQuery('read', async () => {
      const raw = await source.readSystemTables({ backfills });
      const cluster = filterManagedTables(normalizeSystemTables(withoutProbeTables(raw, { db: probeDb, prefix: PROBE_TABLE_PREFIX })), managedTables);
      return backfills ? cluster : { ...cluster, backfills: null };
    });
  }

  async function writeTableShards(tableId, shards) {
    const result = await timeQuery('write', () => source.updateTableShards(tableId, toRawShards(shards)));
    return checkWriteResult(result, tableId);
  }

  // The cluster's heartbeat timeout (rethinkdb.cluster_config); RethinkDB refuses less than 2 s.
  async function writeHeartbeatTimeout(seconds) {
    const result = await timeQuery('write', () => source.updateHeartbeatTimeout(seconds));
    if (!result || result.errors > 0) {
      throw appError('heartbeatRejected', { seconds, firstError: result?.first_error });
    }
    return { changed: result.replaced > 0 };
  }

  return {
    kind: source.kind,
    readCluster,
    writeTableShards,
    writeHeartbeatTimeout,
    // rethinkdb.stats' table_server rows (client docs/s per table and server); [] where the source has none (the
    // sandbox models no traffic).
    // Each shard's acting primaries (server ids) of one table, or null when it is gone: one row, cheap enough to poll
    // while a hold on the query gates lasts.
    readActingPrimaries: async (tableId) => {
      const row = await timeQuery('read', () => source.readTableStatus(tableId));
      // A row with shards null: none of the table's replicas is reachable, so none of them acts.
      return row ? (row.shards ?? []).map((s) => [...(s.primary_replicas ?? [])]) : null;
    },
    readTableServerStats: async () => (source.readTableServerStats ? timeQuery('read', () => source.readTableServerStats()) : []),
    // The disk probes' tables (src/policy/disk-probe.js): [{ id, name, replicas }] (replicas null when none is
    // reachable); none where the source has no such tables (the sandbox).
    readProbeTables: async (db) => (source.readProbeTables
      ? (await timeQuery('read', () => source.readProbeTables(db))).map((t) => ({ id: t.id, name: t.name, replicas: Array.isArray(t.shards) ? [...(t.shards[0]?.replicas ?? [])] : null }))
      : []),
    createProbeTable: (db, table) => timeQuery('write', () => source.createProbeTable(db, table)),
    placeProbeTable: async (tableId, server) => checkWriteResult(await timeQuery('write', () => source.placeProbeTable(tableId, server)), tableId),
    dropProbeTable: (tableId) => timeQuery('write', () => source.dropProbeTable(tableId)),
    ping: () => source.ping(),
    // Moves the manager's own connection off servers about to stop or be drained (a no-op for the sandbox).
    steerAwayFrom: async (serverIds) => (source.steerAwayFrom ? source.steerAwayFrom(serverIds) : { moved: false, reason: 'one connection to every server' }),
    close: () => source.close(),
  };
}

// A write result with errors is an error carrying first_error, never a silent success.
export function checkWriteResult(result, tableId) {
  if (!result || typeof result !== 'object') {
    throw appError('tableConfigNoResult', { tableId });
  }
  if (result.errors > 0) {
    throw appError('tableConfigRejected', { firstError: result.first_error }, {
      details: { firstError: result.first_error, tableId },
    });
  }
  if ((result.replaced ?? 0) + (result.unchanged ?? 0) === 0) {
    throw appError('tableGone', { tableId });
  }
  return { changed: result.replaced > 0 };
}
