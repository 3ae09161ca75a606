// Lab helpers around a table's Raft leadership (table_status.raft_leader): read it, and put it on a chosen server,
// for scenarios and tests that need the leader on the server an event will hit.

import r from 'rethinkdb';

export async function raftLeaderOn(conn, db, table) {
  return r.db('rethinkdb').table('table_status').filter({ db, name: table }).nth(0)('raft_leader').run(conn);
}

// Puts db.table's Raft leadership on `server` (a name, a replica of every shard), then leaves the table configured
// as `shards` (raw table_config shards: primary_replica, replicas, nonvoting_replicas). For a moment every shard's
// primary is that server and every other replica is nonvoting, so it is the table's only Raft voter and must lead;
// Raft keeps its leader when voters are added back. The table is left as `shards` whether or not the leadership had
// to move (an already-leading server once left a caller's new layout unwritten). Waits until every replica is ready.
// Returns the leader before and after.
export async function pinRaftLeader(cluster, { db, table, server, shards }) {
  return cluster.withConnection(async (c) => {
    const t = r.db(db).table(table);
    const before = await raftLeaderOn(c, db, table);
    if (before !== server) {
      const solo = shards.map((sh) => ({
        primary_replica: server, replicas: [...new Set([server, ...sh.replicas])], nonvoting_replicas: sh.replicas.filter((n) => n !== server),
      }));
      await t.config().update({ shards: solo }).run(c);
      const until = performance.now() + 30000;
      while (await raftLeaderOn(c, db, table).catch(() => null) !== server && performance.now() < until) {
        await new Promise((res) => { setTimeout(res, 200); });
      }
    }
    await t.config().update({ shards }).run(c);
    await t.wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(c);
    return { raftLeaderBefore: before, raftLeader: await raftLeaderOn(c, db, table) };
  });
}
