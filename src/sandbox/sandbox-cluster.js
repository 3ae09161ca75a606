// An in-memory RethinkDB 2.4 cluster for the no-cluster default and the tests. It produces the system-table
// documents a real cluster does (shapes and error strings from ../shared/fixtures/rethinkdb-2.4.4), and derives
// replica states, acting primaries and backfills from connectivity and an injected clock.

const FORMAT_ERROR = "The change you're trying to make to `rethinkdb.table_config` has the wrong format. In `shards`: ";
const SHARD_KEYS = new Set(['primary_replica', 'replicas', 'nonvoting_replicas']);
const VERSION = 'rethinkdb 2.4.4 (sandbox)';
// Until every table was writable again on the recording rig (fixtures README): after SIGKILL and SIGTERM.
const KILL_DETECTION_MS = 850;
const TERM_DETECTION_MS = 1700;

function sandboxUuid(n) {
  return `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
}

// The paper's testbed (Section IV-A): 4 servers, one table of 4 shards x 3 replicas, 3 replicas per server.
export function paperTopology() {
  const servers = [0, 1, 2, 3].map((i) => ({ name: `rethinkdb_${i}`, hostname: `rethinkdb-${i}`, tags: ['default', `node_${i}`] }));
  const shards = [0, 1, 2, 3].map((i) => ({
    primary: `rethinkdb_${i}`,
    replicas: [i, (i + 1) % 4, (i + 2) % 4].map((j) => `rethinkdb_${j}`),
  }));
  return { servers, tables: [{ db: 'ycsb', name: 'usertable', docCount: 100000, shards }] };
}

// returnBackfillMs: how long a server that comes back (restoreServer) catches up on each shard it replicates before its
// replicas are ready again; on 2.4.4 a server restarted on its data shows `backfilling` for about half a second under
// 200 ops/s (the Kubernetes lab's rollout). 0: ready at once.
// handoverResyncMs: after a primary handover, how long each of the shard's other voters catches up with the new
// primary once it acts: on 2.4.4 both secondaries were seen `backfilling` at once after a handover, every server up
// (the lab's rollout watch, 0.27 s). oldPrimaryResyncMs: the old primary's own catch-up (default the same). Which one
// finishes first was not seen; a shorter one for the old primary is the case PRESTOP's wait after its demotion is
// for (the demotion's own wait counts the stopping server, ready again, in the majority). 0: no catch-up.
export function createSandboxCluster({
  clock, topology = paperTopology(), electionTimeoutMs = 10000, handoverMs = 300, backfillMsPer1000Docs = 100, returnBackfillMs = 0,
  handoverResyncMs = 0, oldPrimaryResyncMs = handoverResyncMs,
}) {
  let nextId = 1;
  const servers = new Map();
  const dbs = new Map();
  const tables = new Map();
  // rethinkdb.cluster_config's heartbeat: a network cut goes unnoticed for this long (RethinkDB's minimum is 2 s).
  let heartbeatTimeoutSecs = electionTimeoutMs / 1000;

  function addServer({ name, hostname = name.replace(/_/g, '-'), tags = ['default'], address = null }) {
    const id = sandboxUuid(nextId++);
    const now = clock.now();
    servers.set(id, { id, name, hostname, tags, address: address ?? hostname, connected: true, since: now, disconnectedAt: null, pid: 1000 + servers.size });
    return id;
  }

  function idOf(name) {
    const found = [...servers.values()].find((s) => s.name === name);
    if (!found) throw new Error(`sandbox: no server named ${name}`);
    return found.id;
  }

  function addTable({ db, name, docCount = 0, shards }) {
    let dbId = [...dbs.entries()].find(([, n]) => n === db)?.[0];
    if (!dbId) { dbId = sandboxUuid(nextId++); dbs.set(dbId, db); }
    const id = sandboxUuid(nextId++);
    tables.set(id, {
      id, dbId, name, docCount,
      shards: shards.map((s) => ({ primary: idOf(s.primary), replicas: s.replicas.map(idOf), nonvoting: (s.nonvoting ?? []).map(idOf) })),
      runtime: shards.map((s) => ({ acting: idOf(s.primary), changedAt: -Infinity, backfills: new Map() })),
    });
    return id;
  }

  for (const s of topology.servers) addServer(s);
  for (const t of topology.tables) addTable(t);

  const isConnected = (id) => servers.get(id)?.connected === true;
  const nameOf = (id) => servers.get(id)?.name ?? id;

  function replicaState(table, i, id, now) {
    if (!isConnected(id)) return 'disconnected';
    const backfill = table.runtime[i].backfills.get(id);
    if (backfill && now >= backfill.start) {
      if (now < backfill.start + backfill.durationMs) return now < backfill.start + 50 ? 'transitioning' : 'backfilling';
      table.runtime[i].backfills.delete(id);
    }
    return 'ready';
  }

  const voters = (shard) => shard.replicas.filter((id) => !shard.nonvoting.includes(id));

  function liveMajority(table, i, now) {
    const v = voters(table.shards[i]);
    return v.filter((id) => replicaState(table, i, id, now) === 'ready').length * 2 > v.length;
  }

  // Who RethinkDB would let act as primary right now, ignoring the handover delay.
  function desiredActing(table, i, now) {
    const shard = table.shards[i];
    const ready = (id) => replicaState(table, i, id, now) === 'ready';
    const current = table.runtime[i].acting;
    const currentLives = current && voters(shard).includes(current) && ready(current);
    // Without quorum a live acting primary stays listed (07) but nobody new is elected.
    if (!liveMajority(table, i, now)) return currentLives ? current : null;
    if (ready(shard.primary)) return shard.primary;
    if (currentLives) return current;
    const down = servers.get(shard.primary);
    if (down && !down.connected && now < down.disconnectedAt + down.detectionMs) return null;
    return voters(shard).filter(ready).sort((a, b) => nameOf(a).localeCompare(nameOf(b)))[0] ?? null;
  }

  function actingPrimary(table, i, now) {
    const rt = table.runtime[i];
    const target = desiredActing(table, i, now);
    if (target === rt.acting) return rt.acting;
    const oldStillActs = rt.acting && isConnected(rt.acting) && target && now < rt.changedAt + handoverMs;
    if (!oldStillActs) rt.acting = target;
    return rt.acting;
  }

  // A leader stays while it is connected, even made nonvoting (as measured on 2.4.4: it steps down only at the
  // next config write, see updateTableShards), and adding voters back does not move it; otherwise the first
  // connected voter by name takes over. Kept on the table between reads.
  function raftLeader(table, tableVoters) {
    const current = table.raftLeader;
    if (!(current && isConnected(current))) {
      // eslint-disable-next-line no-param-reassign
      table.raftLeader = electedAmong(tableVoters);
    }
    return table.raftLeader;
  }

  // The sandbox's election: the first connected server by name.
  function electedAmong(ids) {
    return ids.filter(isConnected).sort((a, b) => nameOf(a).localeCompare(nameOf(b)))[0] ?? null;
  }

  function tableStatus(table, now, format) {
    const ref = (id) => (format === 'uuid' ? id : nameOf(id));
    const shards = table.shards.map((shard, i) => {
      const acting = actingPrimary(table, i, now);
      const order = [...shard.replicas.filter(isConnected), ...shard.replicas.filter((id) => !isConnected(id))];
      const states = order.map((id) => {
        const state = replicaState(table, i, id, now);
        const waiting = state === 'ready' && acting === null && voters(shard).includes(id);
        return { server: ref(id), state: waiting ? 'waiting_for_primary' : state };
      });
      return { primary_replicas: acting ? [ref(acting)] : [], replicas: states };
    });
    const everyShard = (pred) => table.shards.every((_, i) => pred(i));
    const hasPrimary = (i) => shards[i].primary_replicas.length > 0;
    const writable = everyShard((i) => hasPrimary(i) && liveMajority(table, i, now));
    const tableVoters = [...new Set(table.shards.flatMap(voters))];
    const raftQuorum = tableVoters.filter(isConnected).length * 2 > tableVoters.length;
    const allReady = everyShard((i) => shards[i].replicas.every((r) => r.state === 'ready')
      && table.runtime[i].acting === table.shards[i].primary);
    const leader = raftQuorum ? raftLeader(table, tableVoters) : null;
    return {
      db: format === 'uuid' ? table.dbId : dbs.get(table.dbId),
      id: table.id,
      name: table.name,
      raft_leader: leader ? ref(leader) : null,
      shards,
      status: {
        all_replicas_ready: allReady,
        ready_for_outdated_reads: everyShard((i) => shards[i].replicas.some((r) => r.state === 'ready' || r.state === 'waiting_for_primary')),
        ready_for_reads: writable,
        ready_for_writes: writable,
      },
    };
  }

  function tableConfig(table, format) {
    const ref = (id) => (format === 'uuid' ? id : nameOf(id));
    return {
      db: format === 'uuid' ? table.dbId : dbs.get(table.dbId),
      durability: 'hard',
      id: table.id,
      indexes: [],
      name: table.name,
      primary_key: 'id',
      shards: table.shards.map((s) => ({ nonvoting_replicas: s.nonvoting.map(ref), primary_replica: ref(s.primary), replicas: s.replicas.map(ref) })),
      write_acks: 'majority',
      write_hook: null,
    };
  }

  function serverStatus(server) {
    const peers = [...servers.values()].filter((s) => s.connected && s.id !== server.id);
    return {
      id: server.id,
      name: server.name,
      network: {
        canonical_addresses: [{ host: server.address, port: 29015 }],
        cluster_port: 29015,
        connected_to: Object.fromEntries(peers.map((p) => [p.name, true])),
        hostname: server.hostname,
        http_admin_port: 8080,
        reql_port: 28015,
        time_connected: new Date(server.since).toISOString(),
      },
      process: {
        argv: ['rethinkdb', 'serve', '-d', '/data/rethinkdb_data', '--bind', 'all', '--canonical-address', server.address],
        cache_size_mb: 256,
        pid: server.pid,
        time_started: new Date(server.since).toISOString(),
        version: VERSION,
      },
    };
  }

  function backfillJobs(now) {
    const jobs = [];
    for (const table of tables.values()) {
      table.runtime.forEach((rt, i) => {
        for (const [id, b] of rt.backfills) {
          if (replicaState(table, i, id, now) !== 'backfilling' && replicaState(table, i, id, now) !== 'transitioning') continue;
          jobs.push({
            duration_sec: (now - b.start) / 1000,
            id: ['backfill', sandboxUuid(9e11 + jobs.length)],
            info: {
              db: dbs.get(table.dbId), destination_server: nameOf(id),
              progress: Math.min(1, (now - b.start) / Math.max(1, b.durationMs)), source_server: nameOf(b.source), table: table.name,
            },
            servers: [nameOf(b.source), nameOf(id)],
            type: 'backfill',
          });
        }
      });
    }
    return jobs;
  }

  // The same documents the real adapter's one query returns.
  function readSystemTables() {
    const now = clock.now();
    const list = [...tables.values()];
    const connected = [...servers.values()].filter((s) => s.connected);
    return {
      tableConfig: list.map((t) => tableConfig(t, 'uuid')),
      tableConfigByName: list.map((t) => ({ id: t.id, shards: tableConfig(t, 'name').shards })),
      tableStatus: list.map((t) => tableStatus(t, now, 'uuid')),
      serverStatus: connected.map(serverStatus),
      serverConfig: connected.map((s) => ({ id: s.id, name: s.name, tags: s.tags })),
      dbConfig: [...dbs.entries()].map(([id, name]) => ({ id, name })),
      jobs: backfillJobs(now),
      heartbeat: { id: 'heartbeat', heartbeat_timeout_secs: heartbeatTimeoutSecs },
    };
  }

  // r.db('rethinkdb').table('cluster_config').get('heartbeat').update({ heartbeat_timeout_secs })
  function updateHeartbeatTimeout(seconds) {
    if (typeof seconds !== 'number' || seconds < 2) return writeResult({ errors: 1, first_error: 'The heartbeat timeout must be at least two seconds' });
    if (seconds === heartbeatTimeoutSecs) return writeResult({ unchanged: 1 });
    heartbeatTimeoutSecs = seconds;
    return writeResult({ replaced: 1 });
  }

  // r.db('rethinkdb').table('table_config', {identifierFormat: 'uuid'}).get(id).update({ shards })
  function updateTableShards(tableId, rawShards) {
    const table = tables.get(tableId);
    if (!table) return writeResult({ skipped: 1 });
    const error = validateShards(table, rawShards);
    if (error) return writeResult({ errors: 1, first_error: error });
    // Observed on 2.4.4 (test/data/rethinkdb-2.4.4/table-config-write-without-quorum.json): a table one of whose
    // shards has lost its voting majority takes no config write at all.
    const writtenAt = clock.now();
    if (table.shards.some((_, i) => !liveMajority(table, i, writtenAt))) return writeResult({ errors: 1, first_error: unreachableError(table) });
    const next = rawShards.map((s) => ({ primary: s.primary_replica, replicas: [...s.replicas], nonvoting: [...(s.nonvoting_replicas ?? [])] }));
    if (JSON.stringify(next) === JSON.stringify(table.shards)) return writeResult({ unchanged: 1 });
    const now = clock.now();
    next.forEach((shard, i) => {
      const rt = table.runtime[i];
      const old = table.shards[i];
      for (const id of shard.replicas) {
        if (!old.replicas.includes(id)) {
          const durationMs = Math.round((table.docCount / table.shards.length / 1000) * backfillMsPer1000Docs);
          // As RethinkDB does, a live replica sends the data: the acting primary, else any connected old replica.
          const source = [rt.acting, ...old.replicas].find((r) => r && isConnected(r)) ?? old.primary;
          rt.backfills.set(id, { start: now, durationMs, source });
        }
      }
      for (const id of rt.backfills.keys()) if (!shard.replicas.includes(id)) rt.backfills.delete(id);
      if (shard.primary !== old.primary) {
        rt.changedAt = now;
        // Once the new primary acts, its secondaries catch up with it.
        for (const id of voters(shard)) {
          const durationMs = id === old.primary ? oldPrimaryResyncMs : handoverResyncMs;
          if (id !== shard.primary && durationMs > 0 && !rt.backfills.has(id)) rt.backfills.set(id, { start: now + handoverMs, durationMs, source: shard.primary });
        }
      }
    });
    // Measured on 2.4.4: a leader that votes in no shard steps down during the next config write; another voter of
    // the new config leads.
    const oldVoters = new Set(table.shards.flatMap(voters));
    if (table.raftLeader && !oldVoters.has(table.raftLeader)) {
      table.raftLeader = electedAmong([...new Set(next.flatMap(voters))].filter((id) => id !== table.raftLeader));
    }
    table.shards = next;
    return writeResult({ replaced: 1 });
  }

  function unreachableError(table) {
    return `The server(s) hosting table \`${dbs.get(table.dbId)}.${table.name}\` are currently unreachable. The table's configuration was not changed. `
      + 'If you do not expect the server(s) to recover, you can use `emergency_repair` to restore availability of the table. '
      + '<http://rethinkdb.com/api/javascript/reconfigure/#emergency-repair-mode>';
  }

  function validateShards(table, rawShards) {
    if (!Array.isArray(rawShards) || rawShards.length === 0) return `${FORMAT_ERROR}You must specify at least one shard.`;
    if (rawShards.length !== table.shards.length) return `${FORMAT_ERROR}the sandbox does not model resharding (${table.shards.length} shards expected).`;
    const known = new Set(table.shards.flatMap((s) => s.replicas));
    for (const shard of rawShards) {
      const extra = Object.keys(shard).filter((k) => !SHARD_KEYS.has(k));
      if (extra.length) return `${FORMAT_ERROR}Unexpected key(s): ${extra.join(', ')}`;
      if (!shard.replicas?.length) return `${FORMAT_ERROR}You must specify at least one replica for each shard.`;
      const seen = new Set();
      for (const id of shard.replicas) {
        if (!isConnected(id) && !known.has(id)) return `${FORMAT_ERROR}In \`replicas\`: Server \`${id}\` does not exist or is not connected.`;
        if (seen.has(id)) return `${FORMAT_ERROR}In \`replicas\`: Server \`${nameOf(id)}\` is listed more than once.`;
        seen.add(id);
      }
      const primary = shard.primary_replica;
      if (!shard.replicas.includes(primary)) {
        return `${FORMAT_ERROR}The server listed in the \`primary_replica\` field (\`${nameOf(primary)}\`) must also appear in \`replicas\`.`;
      }
      if ((shard.nonvoting_replicas ?? []).includes(primary)) {
        return `${FORMAT_ERROR}The primary replica (\`${nameOf(primary)}\`) must not be a nonvoting replica.`;
      }
    }
    return null;
  }

  // Infrastructure events, driven by the sandbox's Kubernetes side, the admin endpoints or tests.
  // How fast survivors notice depends on how the server went (fixtures 09): a killed or terminated process
  // closes its connections; a network cut is only noticed when heartbeats time out.
  function crashServer(name, { mode = 'cut' } = {}) {
    const detectionMs = { kill: KILL_DETECTION_MS, term: TERM_DETECTION_MS, cut: heartbeatTimeoutSecs * 1000 }[mode];
    if (detectionMs === undefined) throw new Error(`sandbox: unknown crash mode ${mode} (kill, term or cut)`);
    const s = servers.get(idOf(name));
    s.connected = false;
    s.disconnectedAt = clock.now();
    s.detectionMs = detectionMs;
  }

  function restoreServer(name) {
    const s = servers.get(idOf(name));
    if (s.connected) return;
    s.connected = true;
    s.since = clock.now();
    for (const table of tables.values()) {
      table.shards.forEach((shard, i) => {
        if (shard.primary === s.id) table.runtime[i].changedAt = clock.now();
        if (returnBackfillMs > 0 && shard.replicas.includes(s.id)) {
          const rt = table.runtime[i];
          rt.backfills.set(s.id, { start: clock.now(), durationMs: returnBackfillMs, source: [rt.acting, ...shard.replicas].find((r) => r && r !== s.id && isConnected(r)) ?? null });
        }
      });
    }
  }

  return {
    kind: 'sandbox',
    readSystemTables,
    updateTableShards,
    updateHeartbeatTimeout,
    addServer,
    addTable,
    crashServer,
    restoreServer,
    serverId: idOf,
    serverNames: () => [...servers.values()].map((s) => s.name),
  };
}

function writeResult(fields) {
  return { deleted: 0, errors: 0, inserted: 0, replaced: 0, skipped: 0, unchanged: 0, ...fields };
}

// The sandbox as a system-table source for createDataStore, like the real driver source.
export function createSandboxSource(model) {
  return {
    kind: 'sandbox',
    readSystemTables: async () => structuredClone(model.readSystemTables()),
    readTableStatus: async (tableId) => structuredClone(model.readSystemTables().tableStatus.find((t) => t.id === tableId) ?? null),
    updateTableShards: async (tableId, rawShards) => model.updateTableShards(tableId, structuredClone(rawShards)),
    updateHeartbeatTimeout: async (seconds) => model.updateHeartbeatTimeout(seconds),
    ping: async () => true,
    close: async () => {},
  };
}
