// Cluster snapshots for planner tests: from fixtures, hand-written, or random (fast-check).

import fc from 'fast-check';
import { normalizeSystemTables } from '../../src/cluster/cluster-model.js';
import { rawSnapshot } from './fixtures.js';

export function fixtureCluster(name) {
  return normalizeSystemTables(rawSnapshot(name));
}

// Applies a primary plan's table changes to a snapshot (configs only; observed states stay).
export function applyChanges(cluster, changes) {
  const byId = new Map(changes.map((c) => [c.tableId, c.shards]));
  return {
    ...cluster,
    tables: cluster.tables.map((t) => (byId.has(t.id)
      ? { ...t, shards: t.shards.map((s, i) => ({ ...s, ...byId.get(t.id)[i] })) }
      : t)),
  };
}

// Random but well-formed clusters: each shard's primary is one of its voting replicas.
export const clusterArbitrary = fc.integer({ min: 3, max: 7 }).chain((serverCount) => {
  const serverIds = Array.from({ length: serverCount }, (_, i) => `s${i}`);
  const shard = fc.record({
    replicas: fc.shuffledSubarray(serverIds, { minLength: 1, maxLength: Math.min(5, serverCount) }),
    primaryPick: fc.nat(),
    nonvotingMask: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
    stateSeeds: fc.array(fc.constantFrom('ready', 'ready', 'ready', 'backfilling', 'transitioning'), { minLength: 5, maxLength: 5 }),
  });
  return fc.record({
    connected: fc.array(fc.boolean(), { minLength: serverCount, maxLength: serverCount }).map((a) => a.map((c, i) => c || i % 3 === 0)),
    tables: fc.array(fc.array(shard, { minLength: 1, maxLength: 6 }), { minLength: 1, maxLength: 3 }),
    draining: fc.subarray(serverIds, { maxLength: 2 }),
  }).map(({ connected, tables, draining }) => buildCluster(serverIds, connected, tables, draining));
});

function buildCluster(serverIds, connected, tables, draining) {
  const servers = serverIds.map((id, i) => ({ id, name: `server_${i}`, connected: connected[i], tags: [], hostname: `server-${i}`, canonicalAddresses: [] }));
  const isConnected = (id) => servers.find((s) => s.id === id).connected;
  return {
    draining,
    servers,
    backfills: [],
    tables: tables.map((shards, ti) => ({
      id: `t${ti}`, db: 'db', name: `table${ti}`, readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: null,
      shards: shards.map((s, index) => {
        const nonvoting = s.replicas.filter((_, k) => k > 0 && s.nonvotingMask[k]);
        const voting = s.replicas.filter((id) => !nonvoting.includes(id));
        const primary = voting[s.primaryPick % voting.length];
        const states = Object.fromEntries(s.replicas.map((id, k) => [id, isConnected(id) ? s.stateSeeds[k] : 'disconnected']));
        return { index, primary, replicas: s.replicas, nonvoting, acting: isConnected(primary) ? [primary] : [], states };
      }),
    })),
  };
}
