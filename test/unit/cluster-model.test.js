import {
  filterManagedTables, findServer, findServerForPod, findTable, normalizeSystemTables, shardLoads,
} from '../../src/cluster/cluster-model.js';
import { readFileSync } from 'node:fs';
import { describeCluster } from '../../src/cluster/cluster-view.js';
import { planAddServer, planMigrateReplicasOff, planReplaceServer } from '../../src/planner/replica-planner.js';
import { decidePodReadiness } from '../../src/policy/rollout.js';
import { loadRethinkFixture, rawSnapshot, recordedIds, toUuidFormat } from '../helpers/fixtures.js';

const ids = recordedIds().servers;

describe('toUuidFormat (test helper)', () => {
  test('when applied to the recorded name-format docs, then it matches the recorded uuid-format docs', () => {
    const named = loadRethinkFixture('01-healthy.json');
    const uuid = loadRethinkFixture('01-healthy-uuid.json');
    expect(named.table_config.map((t) => toUuidFormat(t))).toEqual(uuid.table_config);
    expect(named.table_status.map((t) => toUuidFormat(t))).toEqual(uuid.table_status);
  });
});

describe('normalizeSystemTables', () => {
  test('when all servers are up, then servers, shards and readiness are read by uuid with names', () => {
    const cluster = normalizeSystemTables(rawSnapshot('01-healthy.json'));
    expect(cluster.servers.map((s) => [s.name, s.connected, s.hostname])).toEqual([
      ['rethinkdb_0', true, 'rethinkdb-0'], ['rethinkdb_1', true, 'rethinkdb-1'],
      ['rethinkdb_2', true, 'rethinkdb-2'], ['rethinkdb_3', true, 'rethinkdb-3'],
    ]);
    const usertable = findTable(cluster, 'ycsb.usertable');
    expect(usertable.id).toBe('32000534-2427-4a10-8470-c69cc11d3872');
    expect(usertable.shards[0]).toEqual({
      index: 0,
      primary: ids.rethinkdb_3,
      replicas: [ids.rethinkdb_3, ids.rethinkdb_0, ids.rethinkdb_2],
      nonvoting: [],
      acting: [ids.rethinkdb_3],
      states: { [ids.rethinkdb_3]: 'ready', [ids.rethinkdb_0]: 'ready', [ids.rethinkdb_2]: 'ready' },
    });
    expect(usertable.readyForWrites).toBe(true);
    expect(findServer(cluster, 'rethinkdb_2').tags).toEqual(['default', 'node_2']);
  });

  test('when a server was killed, then it stays known by name as disconnected and its replicas read disconnected', () => {
    const cluster = normalizeSystemTables(rawSnapshot('06-one-server-killed-after-1.5s.json'));
    const dead = findServer(cluster, 'rethinkdb_3');
    expect(dead).toMatchObject({ id: ids.rethinkdb_3, connected: false });
    const accounts = findTable(cluster, 'ycsb.accounts');
    expect(accounts.shards[0].states[ids.rethinkdb_3]).toBe('disconnected');
  });

  test('when two of four servers are down, then shards waiting for a primary have no acting primary', () => {
    const cluster = normalizeSystemTables(rawSnapshot('07-two-servers-killed.json'));
    const usertable = findTable(cluster, 'ycsb.usertable');
    expect(usertable.readyForWrites).toBe(false);
    expect(usertable.shards[2].acting).toEqual([]);
    expect(usertable.shards[2].states[ids.rethinkdb_0]).toBe('waiting_for_primary');
  });

  test('when a backfill runs, then jobs become progress keyed by table and destination uuid', () => {
    const raw = rawSnapshot('01-healthy.json');
    raw.jobs = loadRethinkFixture('05-backfill-in-progress.json').samples[0].jobs;
    const cluster = normalizeSystemTables(raw);
    expect(cluster.backfills).toEqual([{
      tableId: '32000534-2427-4a10-8470-c69cc11d3872', db: 'ycsb', table: 'usertable',
      sourceId: ids.rethinkdb_3, destinationId: ids.rethinkdb_1, sourceName: 'rethinkdb_3', destinationName: 'rethinkdb_1', progress: 0.13327057968529923,
    }]);
  });

  test('when MANAGED_TABLES names one table, then only that table is managed', () => {
    const cluster = filterManagedTables(normalizeSystemTables(rawSnapshot('01-healthy.json')), ['ycsb.accounts']);
    expect(cluster.tables.map((t) => t.name)).toEqual(['accounts']);
    expect(filterManagedTables(normalizeSystemTables(rawSnapshot('01-healthy.json')), ['ycsb.*']).tables).toHaveLength(2);
  });
});

describe('a table none of whose replicas is reachable (recorded on 2.4.4)', () => {
  // Only rethinkdb_0 up; lab.leader's replicas were all on the two servers that were down. RethinkDB gives its
  // table_config row an error and no shards, and its table_status row shards: null. A manager that read it threw,
  // and so never finished loading its state nor set any pod's readiness gate (the lab's kustomize test).
  const recorded = JSON.parse(readFileSync(new URL('../data/rethinkdb-2.4.4/table-with-no-accessible-replica.json', import.meta.url), 'utf8'));
  const cluster = normalizeSystemTables({
    tableConfig: recorded.tableConfig, tableConfigByName: recorded.tableConfigByName, tableStatus: recorded.tableStatus,
    serverStatus: recorded.serverStatus, dbConfig: recorded.dbConfig,
  });

  test('when it is read, then it is kept with no shards and RethinkDB\'s error, and the other tables are read as usual', () => {
    expect(findTable(cluster, 'lab.leader')).toMatchObject({
      shards: [], error: 'None of the replicas for this table are accessible.', readyForWrites: false, readyForReads: false, allReplicasReady: false,
    });
    expect(findTable(cluster, 'lab.kustomize').shards).toHaveLength(3);
    expect(cluster.servers.map((s) => [s.name, s.connected])).toEqual([['rethinkdb_0', true], ['rethinkdb_1', false], ['rethinkdb_2', false]]);
    expect(describeCluster(cluster, {}).tables.find((t) => t.table === 'lab.leader')).toMatchObject({ error: 'None of the replicas for this table are accessible.', shards: [] });
  });

  test('when the readiness gate is decided for the one server up, then it is Ready: that table holds nothing of it, and the others wait for servers that are down', () => {
    const id = cluster.servers.find((s) => s.name === 'rethinkdb_0').id;
    expect(decidePodReadiness(cluster, { serverId: id, pod: 'rethinkdb-0' })).toMatchObject({ ready: true, waitingFor: [] });
  });

  test('when data moves are planned, then that table is named as skipped, not passed over in silence', () => {
    const id = cluster.servers.find((s) => s.name === 'rethinkdb_0').id;
    const leader = findTable(cluster, 'lab.leader').id;
    const skippedLeader = { tableId: leader, shard: null, reason: 'its configuration cannot be read (None of the replicas for this table are accessible.); none of its replicas was planned' };
    expect(planMigrateReplicasOff(cluster, id).skipped).toContainEqual(skippedLeader);
    expect(planAddServer(cluster, id).skipped).toEqual([skippedLeader]);
    expect(planReplaceServer(cluster, cluster.servers.find((s) => s.name === 'rethinkdb_1').id, id).skipped).toContainEqual(skippedLeader);
  });
});

describe('findServerForPod', () => {
  const cluster = normalizeSystemTables(rawSnapshot('01-healthy.json'));

  test.each([
    ['the hostname equals the pod name', { podName: 'rethinkdb-2' }, 'rethinkdb_2'],
    ['only the pod IP matches a canonical address', { podName: 'other-name', podIp: '198.18.0.13' }, 'rethinkdb_3'],
    ['an override names the server', { podName: 'rethinkdb-0', overrides: { 'rethinkdb-0': 'rethinkdb_1' } }, 'rethinkdb_1'],
  ])('when %s, then the pod maps to that server', (_, args, expected) => {
    expect(findServerForPod(cluster, args).name).toBe(expected);
  });

  test('when nothing matches, then no server is returned (names are never compared: servers cannot contain "-")', () => {
    expect(findServerForPod(cluster, { podName: 'rethinkdb_1' })).toBeNull();
  });
});

describe('findServer with a replacement under the lost server\'s name', () => {
  test('when a connected and a disconnected server share a name, then the name means the connected one, and an id still finds either', () => {
    const cluster = { servers: [
      { id: 'a-old', name: 'rethinkdb_2', connected: false },
      { id: 'b-new', name: 'rethinkdb_2', connected: true },
    ] };
    expect(findServer(cluster, 'rethinkdb_2').id).toBe('b-new');
    expect(findServer(cluster, 'a-old').id).toBe('a-old');
  });
});

describe('shardLoads', () => {
  const cluster = normalizeSystemTables(rawSnapshot('01-healthy.json'));
  const usertable = findTable(cluster, 'ycsb.usertable');
  const row = (tableId, serverId, reads) => ({ id: ['table_server', tableId, serverId], query_engine: { read_docs_per_sec: reads, written_docs_per_sec: 0 } });

  test('when a server is the primary of one shard of a table, then that shard gets the server\'s reads for the table; of two, each gets half', () => {
    const primaries = usertable.shards.map((s) => s.primary);
    const twice = primaries.find((p, i) => primaries.indexOf(p) !== i);
    const rows = [...new Set(primaries)].map((p) => row(usertable.id, p, p === twice ? 100 : 40));
    rows.push({ id: ['server', primaries[0]], query_engine: { read_docs_per_sec: 999 } }, { id: ['table_server', usertable.id, 'x'], error: 'unreachable' });
    const loads = shardLoads(cluster, rows);
    usertable.shards.forEach((s) => expect(loads.get(`${usertable.id}:${s.index}`)).toBe(s.primary === twice ? 50 : 40));
    expect(loads.has(`${findTable(cluster, 'ycsb.accounts').id}:0`)).toBe(false);
  });

  test('when there are no stats, then no shard has a load', () => {
    expect(shardLoads(cluster, null).size).toBe(0);
  });
});

describe('describeCluster: where each server runs, and backfills by name', () => {
  const pods = [0, 1, 2, 3].map((i) => ({ pod: `rethinkdb-${i}`, node: `node-${i}`, hostname: `rethinkdb-${i}` }));

  test('when a server was killed, then the view still gives its pod and node, by the StatefulSet\'s naming', () => {
    const cluster = normalizeSystemTables(rawSnapshot('06-one-server-killed-after-1.5s.json'));
    const view = describeCluster(cluster, { backend: 'rethinkdb', pods });
    expect(view.servers.map((s) => [s.name, s.connected, s.pod, s.node, s.podBy])).toEqual([
      ['rethinkdb_0', true, 'rethinkdb-0', 'node-0', 'hostname'], ['rethinkdb_1', true, 'rethinkdb-1', 'node-1', 'hostname'],
      ['rethinkdb_2', true, 'rethinkdb-2', 'node-2', 'hostname'], ['rethinkdb_3', false, 'rethinkdb-3', 'node-3', 'name'],
    ]);
  });

  test('when a connected server already runs in the pod the naming points at, then a disconnected one is not placed there', () => {
    const cluster = normalizeSystemTables(rawSnapshot('06-one-server-killed-after-1.5s.json'));
    const moved = { ...cluster, servers: cluster.servers.map((s) => (s.name === 'rethinkdb_2' ? { ...s, hostname: 'rethinkdb-3' } : s)) };
    const view = describeCluster(moved, { backend: 'rethinkdb', pods });
    expect(view.servers.find((s) => s.name === 'rethinkdb_3')).toMatchObject({ pod: null, node: null });
    expect(view.servers.find((s) => s.name === 'rethinkdb_2')).toMatchObject({ pod: 'rethinkdb-3', node: 'node-3' });
  });

  test('when Kubernetes was not asked, then servers carry no placement', () => {
    const view = describeCluster(normalizeSystemTables(rawSnapshot('01-healthy.json')), { backend: 'rethinkdb' });
    expect(view.servers[0]).not.toHaveProperty('pod');
  });

  test('when a backfill job names a server that is not connected, then the view keeps that name instead of none', () => {
    const raw = rawSnapshot('06-one-server-killed-after-1.5s.json');
    raw.jobs = [{ type: 'backfill', info: { db: 'ycsb', table: 'usertable', source_server: 'rethinkdb_3', destination_server: 'rethinkdb_9', progress: 0.5 } }];
    const view = describeCluster(normalizeSystemTables(raw), { backend: 'rethinkdb' });
    expect(view.backfills).toEqual([{ table: 'ycsb.usertable', from: 'rethinkdb_3', to: 'rethinkdb_9', progress: 0.5 }]);
  });
});
