// Pure: what an operator looks at first. Servers with their roles, and every table's shard map and readiness.

import { countPrimaries, countReplicas } from '../planner/eligibility.js';
import {
  conventionalPodName, podNameForServer, serverName, tableLabel,
} from './cluster-model.js';

export function describeCluster(cluster, {
  backend, draining = [], operations = [], pods = null, overrides = {},
}) {
  const primaries = countPrimaries(cluster.tables);
  const replicas = countReplicas(cluster.tables);
  const drainingById = new Map(draining.map((d) => [d.serverId, d]));
  const name = (id) => serverName(cluster, id);
  const claimed = new Set(cluster.servers.filter((s) => s.connected).map((s) => podNameForServer(s, overrides)).filter(Boolean));
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
      ...placeServer(s, { pods, overrides, claimed }),
      tags: s.tags,
    })),
    tables: cluster.tables.map((t) => ({
      table: tableLabel(t),
      id: t.id,
      readyForWrites: t.readyForWrites,
      readyForReads: t.readyForReads,
      allReplicasReady: t.allReplicasReady,
      ...(t.error ? { error: t.error } : {}),
      shards: t.shards.map((sh) => ({
        index: sh.index,
        primary: name(sh.primary),
        acting: sh.acting.map(name),
        replicas: sh.replicas.map((id) => ({ server: name(id), state: sh.states[id] ?? 'unknown', voting: !sh.nonvoting.includes(id) })),
      })),
    })),
    backfills: cluster.backfills.map((b) => ({
      table: `${b.db}.${b.table}`, from: b.sourceId ? name(b.sourceId) : b.sourceName ?? null, to: b.destinationId ? name(b.destinationId) : b.destinationName ?? null, progress: b.progress,
    })),
    // Marks outlive the server's presence in the system tables (a removed dead server is no longer listed).
    draining: draining.map((d) => ({ server: d.serverName, id: d.serverId, reason: d.reason, since: d.since, present: cluster.servers.some((s) => s.id === d.serverId) })),
    runningOperations: operations.filter((o) => o.status === 'running').map((o) => ({ id: o.id, kind: o.kind, href: `/v1/operations/${o.id}` })),
  };
}

// Which pod runs a server and on which node, from the pods Kubernetes listed (null when it was not asked or did
// not answer). A connected server is found by its hostname (or an override); a disconnected one has no hostname
// in server_status, so it is found by the StatefulSet's naming (pod rethinkdb-N runs server rethinkdb_N, see the
// start script) among the pods no connected server claims. `podBy` says which.
function placeServer(server, { pods, overrides, claimed }) {
  if (!pods) return {};
  const known = podNameForServer(server, overrides);
  const byName = conventionalPodName(server.name);
  const pod = known ? pods.find((p) => p.pod === known) : pods.find((p) => p.pod === byName && !claimed.has(byName));
  if (!pod) return { pod: known ?? null, node: null };
  return { pod: pod.pod, node: pod.node ?? null, podBy: known ? 'hostname' : 'name' };
}
