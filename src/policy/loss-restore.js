// Pure: when a server that vanished without notice is taken for lost for good, and its replicas are recreated on the
// other servers (the paper's IV-B5 migration, one replica at a time), so that each shard has its replica count again.
// RethinkDB never does this by itself: a lost server stays in table_config, and every shard it held runs one replica
// short (one more loss from no majority) until someone reconfigures the table.
//
// "For good" is a wait, as in TiDB (`max-store-down-time`, 30 min) and CockroachDB (`time_until_store_dead`): a
// server disconnected for LOSS_RESTORE_AFTER_SECONDS is restored around. A StatefulSet pod usually comes back with its
// volume well before that (a crash, a restart, a node's reboot), and a data move then would be wasted. A server that
// comes back later finds its replicas elsewhere and joins as new capacity (POSTSTART's expansion).

// lostSince: Map serverId -> ms when it was first seen disconnected. -> a new Map: the servers the table configs
// still name and that are disconnected now, with the time each was first seen so (now for a new one).
export function trackLost(cluster, lostSince, now) {
  const referenced = new Set(cluster.tables.flatMap((t) => t.shards.flatMap((s) => s.replicas)));
  const next = new Map();
  for (const s of cluster.servers) {
    if (!s.connected && referenced.has(s.id)) next.set(s.id, lostSince.get(s.id) ?? now);
  }
  return next;
}

// cluster: one read; lostSince: trackLost's map; now: ms; afterMs: LOSS_RESTORE_AFTER_SECONDS in ms (0: off);
// migrating: the server ids with a migration on record (running, or waiting to be retried).
// -> { reason, intents, waiting }: waiting is one entry per lost server not restored around now:
//    [{ serverId, server, since, restoreAt, reason }] (since and restoreAt in ms; restoreAt null when it never will be).
export function decideLossRestore(cluster, {
  lostSince, now, afterMs, migrating = [],
}) {
  const lost = [...lostSince.entries()]
    .map(([id, since]) => ({ server: cluster.servers.find((s) => s.id === id), since }))
    .filter((l) => l.server)
    .sort((a, b) => a.since - b.since || a.server.name.localeCompare(b.server.name));
  if (lost.length === 0) return { reason: 'no server the table configs name is disconnected', intents: [], waiting: [] };
  const wait = (l, restoreAt, why) => ({ serverId: l.server.id, server: l.server.name, since: l.since, restoreAt, reason: why });
  if (!afterMs) {
    const why = 'LOSS_RESTORE_AFTER_SECONDS is 0: a lost server\'s replicas are recreated only by an operator';
    return { reason: why, intents: [], waiting: lost.map((l) => wait(l, null, why)) };
  }
  // A manager that reads the cluster through a minority sees most servers disconnected; a table_config write would
  // fail there anyway, and the loss may well be its own.
  const connected = cluster.servers.filter((s) => s.connected).length;
  if (connected * 2 <= cluster.servers.length) {
    const why = `only ${connected} of ${cluster.servers.length} servers are connected: not a majority, so no data is moved`;
    return { reason: why, intents: [], waiting: lost.map((l) => wait(l, null, why)) };
  }
  const busy = new Set(migrating);
  const ongoing = lost.find((l) => busy.has(l.server.id));
  // One data move at a time in the cluster: a migration on record (this restore's, or any other) goes first.
  const blocker = ongoing ? `${ongoing.server.name}'s replicas are being recreated` : busy.size > 0 ? 'another migration is on record' : null;
  const pick = blocker ? null : lost.find((l) => now - l.since >= afterMs) ?? null;
  const waiting = lost.filter((l) => l !== pick).map((l) => {
    if (busy.has(l.server.id)) return wait(l, null, 'its replicas are being recreated on the other servers (a migration on record)');
    const at = l.since + afterMs;
    if (at > now) return wait(l, at, `disconnected for ${seconds(now - l.since)}; taken for lost at ${seconds(afterMs)} (LOSS_RESTORE_AFTER_SECONDS)`);
    return wait(l, at, `taken for lost; waits: ${blocker ?? `${pick.server.name} is restored first`}`);
  });
  if (!pick) {
    return { reason: waiting.length === 1 ? `${waiting[0].server}: ${waiting[0].reason}` : `${waiting.length} lost servers wait`, intents: [], waiting };
  }
  const replicas = cluster.tables.reduce((n, t) => n + t.shards.filter((s) => s.replicas.includes(pick.server.id)).length, 0);
  const reason = `${pick.server.name} has been disconnected for ${seconds(now - pick.since)} (LOSS_RESTORE_AFTER_SECONDS=${afterMs / 1000}): `
    + `it is taken for lost, and its ${replicas} replica${replicas === 1 ? ' is' : 's are'} recreated on the other servers, one at a time`;
  return {
    reason,
    intents: [{ type: 'migrate-replicas-off', server: { id: pick.server.id, name: pick.server.name }, reason }],
    waiting,
  };
}

function seconds(ms) {
  const s = Math.round(ms / 1000);
  if (s < 120) return `${s} s`;
  return `${Math.round(s / 60)} min`;
}
