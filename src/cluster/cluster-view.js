// Pure: what an operator looks at first. Servers with their roles, and every table's shard map and readiness.

import { countPrimaries, countReplicas } from '../planner/eligibility.js';
import { serverName, tableLabel } from './cluster-model.js';

export function describeCluster(cluster, { backend, draining = [], operations = [] }) {
  const primaries = countPrimaries(cluster.tables);
  const replicas = countReplicas(cluster.tables);
  const drainingById = new Map(draining.map((d) => [d.serverId, d]));
  const name = (id) => serverName(cluster, id);
  return {
    backend,
    ...(backend === 'sandbox' ? { notice: 'SANDBOX: an in-memory model of a RethinkDB cluster, not a real one' } : {}),
    servers: cluster.servers.map((s) => ({
      name: s.name,
      id: s.id,
      connected: s.connected,
      draining: drainingById.has(s.id),
      ...(drainingById.has(s.id) ? { drainingReason: drainingById.get(s.id).reason, drainingSince: drainingById.get(s.id).since } : {}),
      primaries: primaries.get(s.id) ?? 0,
      replicas: replicas.get(s.id) ?? 0,
      hostname: s.hostname,
      tags: s.tags,
    })),
    tables: cluster.tables.map((t) => ({
      table: tableLabel(t),
      id: t.id,
      readyForWrites: t.readyForWrites,
      readyForReads: t.readyForReads,
      allReplicasReady: t.allReplicasReady,
      shards: t.shards.map((sh) => ({
        index: sh.index,
        primary: name(sh.primary),
        acting: sh.acting.map(name),
        replicas: sh.replicas.map((id) => ({ server: name(id), state: sh.states[id] ?? 'unknown', voting: !sh.nonvoting.includes(id) })),
      })),
    })),
    backfills: cluster.backfills.map((b) => ({ table: `${b.db}.${b.table}`, from: b.sourceId ? name(b.sourceId) : null, to: b.destinationId ? name(b.destinationId) : null, progress: b.progress })),
    // Marks outlive the server's presence in the system tables (a removed dead server is no longer listed).
    draining: draining.map((d) => ({ server: d.serverName, id: d.serverId, reason: d.reason, since: d.since, present: cluster.servers.some((s) => s.id === d.serverId) })),
    runningOperations: operations.filter((o) => o.status === 'running').map((o) => ({ id: o.id, kind: o.kind, href: `/v1/operations/${o.id}` })),
  };
}
