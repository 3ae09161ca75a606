import { EventEmitter } from 'node:events';
import r from 'rethinkdb';
import { AppError } from '../../src/errors.js';
import { checkWriteResult, createDataStore } from '../../src/rethinkdb/data-store.js';
import {
  createConnectionManager, createQueryRunner, createRethinkDbSource, isLoopback, translateDriverError,
} from '../../src/rethinkdb/rethinkdb-source.js';
import { createLogger } from '../../src/logger.js';
import { loadRethinkFixture, rawSnapshot, recordedIds } from '../helpers/fixtures.js';
import { createLogSink, createVirtualClock, eventually } from '../helpers/harness.js';

// Until the connection manager answers get() with a connection that `which` accepts (it connects in the background).
const connected = (manager, which = () => true, what = 'a connection') => eventually(() => {
  try {
    const conn = manager.get();
    return which(conn) && conn;
  } catch {
    return false;
  }
}, { intervalMs: 1, timeoutMs: 2000, what });
// Until a condition holds, polled every millisecond.
const until = (condition, what) => eventually(condition, { intervalMs: 1, timeoutMs: 2000, what });

const ids = recordedIds().servers;
const USERTABLE = '32000534-2427-4a10-8470-c69cc11d3872';

// A fake query runner: records the wire JSON of each term and answers from a queue of recorded results.
function recordingRunner(answers) {
  const sent = [];
  const runQuery = async (term) => {
    sent.push(term.build());
    const next = answers.shift();
    if (next instanceof Error) throw next;
    return next;
  };
  return { sent, runQuery };
}

describe('RethinkDB adapter: queries', () => {
  test('when reading the cluster with its backfills, then one query reads every system table, uuid format where identities matter; without, the same less jobs', async () => {
    const { sent, runQuery } = recordingRunner([rawSnapshot('01-healthy.json'), rawSnapshot('01-healthy.json')]);
    const store = createDataStore({ source: createRethinkDbSource({ r, runQuery }) });
    const cluster = await store.readCluster({ backfills: true });
    expect(cluster.tables).toHaveLength(2);
    expect(cluster.backfills).toEqual([expect.objectContaining({ table: 'usertable', progress: expect.any(Number) })]);
    const lean = await store.readCluster();
    expect(lean.backfills).toBeNull();
    expect(lean.tables).toEqual(cluster.tables);
    const { jobs, ...rest } = sent[0];
    expect(sent[1]).toEqual(rest);
    const sys = [14, ['rethinkdb']];
    const uuid = { identifier_format: 'uuid' };
    expect(sent[0]).toEqual({
      tableConfig: [51, [[15, [sys, 'table_config'], uuid], 'array']],
      tableConfigByName: [51, [[33, [[15, [sys, 'table_config']], 'id', 'shards']], 'array']],
      tableStatus: [51, [[15, [sys, 'table_status'], uuid], 'array']],
      serverStatus: [51, [[15, [sys, 'server_status']], 'array']],
      serverConfig: [51, [[33, [[15, [sys, 'server_config']], 'id', 'name', 'tags']], 'array']],
      dbConfig: [51, [[15, [sys, 'db_config']], 'array']],
      jobs: [51, [[39, [[15, [sys, 'jobs']], { type: 'backfill' }]], 'array']],
      heartbeat: [16, [[15, [sys, 'cluster_config']], 'heartbeat']],
    });
  });

  test('when lowering the heartbeat timeout, then one update of cluster_config\'s heartbeat document, and a refusal is an error with RethinkDB\'s text', async () => {
    const refused = { errors: 1, first_error: 'The heartbeat timeout must be at least two seconds', replaced: 0, unchanged: 0 };
    const { sent, runQuery } = recordingRunner([{ errors: 0, replaced: 1, unchanged: 0 }, refused]);
    const store = createDataStore({ source: createRethinkDbSource({ r, runQuery }) });
    expect(await store.writeHeartbeatTimeout(2)).toEqual({ changed: true });
    expect(sent[0]).toEqual([53, [[16, [[15, [[14, ['rethinkdb']], 'cluster_config']], 'heartbeat']], { heartbeat_timeout_secs: 2 }]]);
    await expect(store.writeHeartbeatTimeout(1)).rejects.toMatchObject({ code: 'RECONFIGURATION_REJECTED', message: expect.stringContaining('at least two seconds') });
  });

  test('when writing, then ONE update per table carries the whole shards array by table uuid', async () => {
    const moved = loadRethinkFixture('03-move-primary.json').moveResult;
    const { sent, runQuery } = recordingRunner([moved]);
    const store = createDataStore({ source: createRethinkDbSource({ r, runQuery }) });
    const shards = [{ primary: ids.rethinkdb_0, replicas: [ids.rethinkdb_3, ids.rethinkdb_0, ids.rethinkdb_2], nonvoting: [] }];
    await expect(store.writeTableShards(USERTABLE, shards)).resolves.toEqual({ changed: true });
    expect(sent).toEqual([[53, [
      [16, [[15, [[14, ['rethinkdb']], 'table_config'], { identifier_format: 'uuid' }], USERTABLE]],
      { shards: [2, [{ primary_replica: ids.rethinkdb_0, replicas: [2, [ids.rethinkdb_3, ids.rethinkdb_0, ids.rethinkdb_2]], nonvoting_replicas: [2, []] }]] },
    ]]]);
  });
});

describe('RethinkDB adapter: write results', () => {
  const invalid = loadRethinkFixture('02-invalid-table-config-updates.json');

  test.each(Object.keys(invalid))('when RethinkDB answers the recorded %s result, then it becomes an error carrying first_error', (key) => {
    const { result } = invalid[key];
    expect(() => checkWriteResult(result, USERTABLE)).toThrow(expect.objectContaining({
      code: 'RECONFIGURATION_REJECTED', statusCode: 502, details: { firstError: result.first_error, tableId: USERTABLE },
    }));
  });

  test('when the same update is repeated (unchanged: 1), then it succeeds without a change', () => {
    expect(checkWriteResult(loadRethinkFixture('03-move-primary-repeated.json').result, USERTABLE)).toEqual({ changed: false });
  });

  test('when the table vanished (skipped), then it is TABLE_NOT_FOUND, not success', () => {
    expect(() => checkWriteResult({ deleted: 0, errors: 0, inserted: 0, replaced: 0, skipped: 1, unchanged: 0 }, USERTABLE))
      .toThrow(expect.objectContaining({ code: 'TABLE_NOT_FOUND' }));
  });

  test('when a config naming a dead server is accepted (06), then the adapter reports success: the planner must prevent it', () => {
    expect(checkWriteResult(loadRethinkFixture('06-config-change-naming-dead-server.json').primaryOntoDead.result, USERTABLE))
      .toEqual({ changed: true });
  });
});

describe('RethinkDB adapter: errors', () => {
  const fromRecorded = (rec) => Object.assign(new Error(rec.message), { name: rec.name, msg: rec.message });

  test.each([
    ['a refused connection', Object.assign(new Error('Could not connect to 198.18.0.1:28015.\nconnect ECONNREFUSED'), { name: 'ReqlDriverError' }), 'DATA_STORE_UNAVAILABLE', 503],
    ['the recorded wait timeout', fromRecorded(loadRethinkFixture('06-config-change-naming-dead-server.json').waitTimeout.error), 'RECONFIGURATION_REJECTED', 502],
    ['the recorded no-quorum write error', fromRecorded(loadRethinkFixture('07-two-servers-killed-ops.json').writes[0].error), 'RECONFIGURATION_REJECTED', 502],
    ['the recorded too-many-replicas error', fromRecorded(loadRethinkFixture('04-reconfigure.json').tooManyReplicas.error), 'RECONFIGURATION_REJECTED', 502],
  ])('when the driver reports %s, then it becomes %s', (_, err, code, status) => {
    const translated = translateDriverError(err, 'update table_config');
    expect(translated).toBeInstanceOf(AppError);
    expect(translated).toMatchObject({ code, statusCode: status });
    expect(translated.message).toContain(err.message.split('\n')[0]);
  });

  test('when there is no connection, then a query fails at once with 503 instead of waiting', async () => {
    const connections = { get: () => { throw new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB yet'); }, reportFailure: () => {} };
    const runQuery = createQueryRunner({ connections, queryTimeoutMs: 1000 });
    const store = createDataStore({ source: createRethinkDbSource({ r, runQuery }) });
    await expect(store.readCluster()).rejects.toMatchObject({ code: 'DATA_STORE_UNAVAILABLE', statusCode: 503 });
  });

  test('when a query hangs, then it fails with 503 after the query timeout', async () => {
    const hanging = { open: true, _start: () => {} };
    const connections = { get: () => hanging, reportFailure: () => {} };
    const term = { run: () => new Promise(() => {}) };
    const runQuery = createQueryRunner({ connections, queryTimeoutMs: 30 });
    await expect(runQuery(term, 'ping')).rejects.toMatchObject({ code: 'DATA_STORE_UNAVAILABLE', message: expect.stringContaining('within 30 ms') });
  });
});

describe('connection manager', () => {
  const SEEDS = [{ host: 'rethinkdb', port: 28015 }];

  function fakeConnection() {
    const conn = new EventEmitter();
    conn.open = true;
    conn.close = async () => { conn.open = false; };
    return conn;
  }

  test('when RethinkDB is down at start, then it keeps retrying with exponential backoff up to the cap', async () => {
    const clock = createVirtualClock();
    const sleeps = [];
    const sleepyClock = { ...clock, sleep: async (ms) => { sleeps.push(ms); await clock.sleep(ms); } };
    let calls = 0;
    const conn = fakeConnection();
    const connect = async () => {
      calls += 1;
      if (calls < 6) throw new Error('connect ECONNREFUSED');
      return conn;
    };
    const logger = createLogger({ level: 'silent', destination: createLogSink().stream });
    const manager = createConnectionManager({ connect, seeds: SEEDS, clock: sleepyClock, logger, reconnectMinMs: 100, reconnectMaxMs: 500 });
    expect(() => manager.get()).toThrow(expect.objectContaining({ code: 'DATA_STORE_UNAVAILABLE' }));
    manager.start();
    await connected(manager);
    expect(sleeps).toEqual([100, 200, 400, 500, 500]);
    expect(manager.get()).toBe(conn);
    expect(manager.status()).toMatchObject({ connected: true, attempts: 6 });
  });

  // A manager whose first connection is up, and whose next connect() returns `second`.
  async function connectedTwice() {
    const first = fakeConnection();
    const second = fakeConnection();
    const conns = [first, second];
    const logger = createLogger({ level: 'silent', destination: createLogSink().stream });
    const manager = createConnectionManager({ connect: async () => conns.shift(), seeds: SEEDS, clock: createVirtualClock(), logger, reconnectMinMs: 10, reconnectMaxMs: 10 });
    manager.start();
    await connected(manager);
    return { manager, first, second };
  }

  test('when a query times out on a half-open connection, then the connection is dropped and replaced', async () => {
    const { manager, first, second } = await connectedTwice();
    const runQuery = createQueryRunner({ connections: manager, queryTimeoutMs: 20 });
    await expect(runQuery({ run: () => new Promise(() => {}) }, 'ping')).rejects.toMatchObject({ code: 'DATA_STORE_UNAVAILABLE' });
    expect(first.open).toBe(false);
    await connected(manager, (c) => c === second, 'the second connection');
    expect(manager.get()).toBe(second);
  });

  test('when the connection closes, then get() answers 503 and it reconnects', async () => {
    const { manager, first, second } = await connectedTwice();
    expect(manager.get()).toBe(first);
    first.open = false;
    first.emit('close');
    await connected(manager, (c) => c === second, 'the second connection');
    expect(manager.get()).toBe(second);
  });

  // A recorded healthy cluster (server_status from fixture 01) behind a fake connect(): each server answers at its
  // hostname and canonical address on its reql_port while it is up; the seed "rethinkdb" (a client Service)
  // reaches rethinkdb_0. Connections know which server they reach, as the driver's conn.server() does.
  function fakeCluster() {
    const serverStatus = rawSnapshot('01-healthy.json').serverStatus;
    const down = new Set();
    const opened = [];
    const attempts = [];
    const byHost = new Map(serverStatus.flatMap((st) => [st.network.hostname, ...st.network.canonical_addresses.map((a) => a.host)].map((h) => [h, st])));
    byHost.set('rethinkdb', serverStatus.find((st) => st.name === 'rethinkdb_0'));
    const connect = async ({ host, port }) => {
      const st = byHost.get(host);
      attempts.push(st?.name ?? host);
      if (!st || down.has(st.name) || port !== st.network.reql_port) throw new Error(`connect ECONNREFUSED ${host}:${port}`);
      const conn = fakeConnection();
      conn.server = async () => ({ id: st.id, name: st.name, proxy: false });
      conn.serverName = st.name;
      opened.push(conn);
      return conn;
    };
    return { serverStatus, down, opened, attempts, connect, idOf: (name) => serverStatus.find((st) => st.name === name).id };
  }

  async function connectedManager(cluster, { seeds = SEEDS } = {}) {
    const clock = createVirtualClock();
    const sleeps = [];
    // Each backoff also yields to the event loop for a real millisecond, so that a retry loop cannot starve the test.
    const sleepyClock = { ...clock, sleep: async (ms) => { sleeps.push(ms); await new Promise((resolve) => { setTimeout(resolve, 1); }); await clock.sleep(ms); } };
    const logger = createLogger({ level: 'silent', destination: createLogSink().stream });
    const manager = createConnectionManager({ connect: cluster.connect, seeds, clock: sleepyClock, logger, reconnectMinMs: 100, reconnectMaxMs: 500 });
    manager.start();
    await connected(manager);
    return { manager, sleeps };
  }

  test('when a new connection breaks while it is asked which server it reaches, then no error escapes and it connects through the next', async () => {
    const cluster = fakeCluster();
    const connect = async (address) => {
      const conn = await cluster.connect(address);
      if (conn.serverName === 'rethinkdb_0') {
        conn.server = async () => { conn.open = false; conn.emit('error', new Error('read ECONNRESET')); throw new Error('read ECONNRESET'); };
      }
      return conn;
    };
    const { manager } = await connectedManager({ ...cluster, connect }, { seeds: [{ host: 'rethinkdb-0', port: 28015 }, { host: 'rethinkdb-2', port: 28015 }] });
    expect(manager.get().serverName).toBe('rethinkdb_2');
  });

  test('when it is closed while it tries one address after another, then it tries no further address', async () => {
    const tried = [];
    let manager = null;
    const connect = async (address) => {
      tried.push(address.host);
      if (tried.length === 1) await manager.close();
      throw new Error(`connect ECONNREFUSED ${address.host}`);
    };
    const logger = createLogger({ level: 'silent', destination: createLogSink().stream });
    manager = createConnectionManager({
      connect, seeds: [{ host: 'a', port: 28015 }, { host: 'b', port: 28015 }, { host: 'c', port: 28015 }], clock: createVirtualClock(), logger, reconnectMinMs: 10, reconnectMaxMs: 10,
    });
    manager.start();
    await new Promise((resolve) => { setTimeout(resolve, 20); });
    expect(tried).toEqual(['a']);
  });

  test('when RETHINKDB_HOST names several hosts and the first refuses, then it connects through the next at once', async () => {
    const cluster = fakeCluster();
    cluster.down.add('rethinkdb_0');
    const { manager, sleeps } = await connectedManager(cluster, { seeds: [{ host: 'rethinkdb-0', port: 28015 }, { host: 'rethinkdb-2', port: 28015 }] });
    expect(manager.get().serverName).toBe('rethinkdb_2');
    expect(manager.status().via).toEqual({ host: 'rethinkdb-2', port: 28015, server: 'rethinkdb_2' });
    expect(sleeps).toEqual([]);
  });

  test('when a server also advertises a loopback address, then only its other addresses are learned; a server with loopback alone keeps it', async () => {
    const cluster = fakeCluster();
    const { manager } = await connectedManager(cluster);
    const [first, second, ...rest] = cluster.serverStatus;
    const withLoopback = (st, hosts) => ({ ...st, network: { ...st.network, hostname: `${st.name}-host`, canonical_addresses: hosts.map((host) => ({ host, port: 29015 })) } });
    manager.learn([withLoopback(first, ['198.19.0.7', '127.0.0.1', '::1']), withLoopback(second, ['127.0.0.1']), ...rest]);
    const byName = Object.fromEntries(manager.servers().map((s) => [s.name, s.addresses.map((a) => a.host)]));
    expect(byName[first.name]).toEqual([`${first.name}-host`, '198.19.0.7']);
    // Every server on one host (the process lab): the hostname may not resolve, the loopback address does.
    expect(byName[second.name]).toEqual([`${second.name}-host`, '127.0.0.1']);
    expect(['localhost', '127.0.0.1', '127.9.8.7', '::1', '[::1]', '::ffff:127.0.0.1'].every(isLoopback)).toBe(true);
    expect(['198.19.0.7', 'rethinkdb-0', '::ffff:198.19.0.7', '128.0.0.1'].some(isLoopback)).toBe(false);
  });

  test('when the server it goes through is lost, then it reconnects at once through another server learned from server_status', async () => {
    const cluster = fakeCluster();
    const { manager, sleeps } = await connectedManager(cluster);
    // Learned in name order, so that the lost rethinkdb_0 comes first in the list.
    manager.learn([...cluster.serverStatus].sort((a, b) => a.name.localeCompare(b.name)));
    const first = manager.get();
    expect(first.serverName).toBe('rethinkdb_0');
    cluster.down.add('rethinkdb_0');
    cluster.attempts.length = 0;
    first.open = false;
    first.emit('close');
    await connected(manager, (c) => c !== first, 'a new connection');
    expect(manager.get().serverName).not.toBe('rethinkdb_0');
    // The lost server is not tried first: a cut-off one would cost a whole connect timeout.
    expect(cluster.attempts).toEqual([manager.get().serverName]);
    expect(sleeps).toEqual([]);
  });

  // A manager that dials with a 500 ms stagger on a clock whose sleeps the test ends itself (timers[i].resolve()).
  // started(manager, timers): when the test may go on (by default, once connected).
  async function staggeredManager(connect, seeds = SEEDS, started = (manager) => connected(manager)) {
    const timers = [];
    const clock = { ...createVirtualClock(), sleep: (ms) => new Promise((resolve) => { timers.push({ ms, resolve }); }) };
    const logger = createLogger({ level: 'silent', destination: createLogSink().stream });
    const manager = createConnectionManager({ connect, seeds, clock, logger, reconnectMinMs: 100, reconnectMaxMs: 500, connectStaggerMs: 500 });
    manager.start();
    await started(manager, timers);
    return { manager, timers };
  }

  // A connect() on the fake cluster that, once slowDown() is called, answers through every server but `fast` only when
  // release() is called.
  function slowAllBut(cluster, fast) {
    let release;
    const released = new Promise((resolve) => { release = resolve; });
    let slowing = false;
    const connect = async (address) => {
      const conn = await cluster.connect(address);
      if (slowing && conn.serverName !== fast) await released;
      return conn;
    };
    return { connect, slowDown: () => { slowing = true; }, release };
  }

  // Ends every pending stagger, round after round, until `until()` holds (or a bound is reached).
  async function passStaggers(timers, until) {
    for (let i = 0; i < 20 && !until(); i += 1) {
      for (const t of timers.splice(0)) t.resolve();
      await new Promise((resolve) => { setTimeout(resolve, 2); });
    }
  }

  test('when the servers not avoided answer slowly and a seed leads fast to the avoided one, then steering away still moves to a live server', async () => {
    const cluster = fakeCluster();
    // The seed "rethinkdb" reaches rethinkdb_0, which answers at once; once slowing, every other server only when released.
    const { connect, slowDown, release } = slowAllBut(cluster, 'rethinkdb_0');
    const { manager, timers } = await staggeredManager(connect);
    manager.learn(cluster.serverStatus);
    const first = manager.get();
    expect(first.serverName).toBe('rethinkdb_0');
    slowDown();
    cluster.attempts.length = 0;
    const steering = manager.steerAwayFrom([cluster.idOf('rethinkdb_0')]);
    // The stagger passes until the seed (the avoided server) has answered; only then do the live ones.
    await passStaggers(timers, () => cluster.attempts.includes('rethinkdb_0'));
    expect(cluster.attempts).toContain('rethinkdb_0');
    release();
    const moved = await steering;
    expect(moved).toMatchObject({ moved: true, from: 'rethinkdb_0' });
    expect(manager.get().serverName).not.toBe('rethinkdb_0');
    // The avoided server's connection, kept aside, was closed.
    expect(cluster.opened.filter((c) => c.serverName === 'rethinkdb_0' && c !== first).map((c) => c.open)).toEqual([false]);
    await manager.close();
  });

  test('when the server it goes through is lost and only an avoided one answers fast, then it reconnects through a live one that answers later', async () => {
    const cluster = fakeCluster();
    const { connect, slowDown, release } = slowAllBut(cluster, 'rethinkdb_3');
    const { manager, timers } = await staggeredManager(connect);
    manager.learn([...cluster.serverStatus].sort((a, b) => a.name.localeCompare(b.name)));
    // rethinkdb_3 is about to stop (avoided); the connection goes through rethinkdb_0, which is then lost.
    expect((await manager.steerAwayFrom([cluster.idOf('rethinkdb_3')])).reason).toMatch(/not connected through these servers/);
    const first = manager.get();
    slowDown();
    cluster.down.add('rethinkdb_0');
    first.emit('close');
    await passStaggers(timers, () => cluster.attempts.includes('rethinkdb_3'));
    expect(() => manager.get()).toThrow(expect.objectContaining({ code: 'DATA_STORE_UNAVAILABLE' }));
    release();
    await passStaggers(timers, () => { try { manager.get(); return true; } catch { return false; } });
    expect(['rethinkdb_1', 'rethinkdb_2']).toContain(manager.get().serverName);
    await manager.close();
  });

  test('when an address does not answer (a frozen server), then the next is dialled after the stagger, the first to answer wins, and a late answer is closed', async () => {
    const cluster = fakeCluster();
    // rethinkdb_0 frozen: its connect neither accepts nor refuses until the test lets it.
    let answerFrozen;
    const frozen = new Promise((resolve) => { answerFrozen = resolve; });
    const connect = async (address) => {
      if (address.host === 'rethinkdb-0') { cluster.attempts.push('rethinkdb_0'); await frozen; return cluster.connect({ host: 'rethinkdb-2', port: address.port }); }
      return cluster.connect(address);
    };
    // Started once the first address is dialled and the stagger is waiting.
    const { manager, timers } = await staggeredManager(connect, [{ host: 'rethinkdb-0', port: 28015 }, { host: 'rethinkdb-2', port: 28015 }], (m, pending) => until(() => pending.length > 0, 'the stagger'));
    // Only the first address is dialled until the stagger has passed.
    expect(cluster.attempts).toEqual(['rethinkdb_0']);
    expect(() => manager.get()).toThrow(expect.objectContaining({ code: 'DATA_STORE_UNAVAILABLE' }));
    expect(timers.map((t) => t.ms)).toEqual([500]);
    timers.shift().resolve();
    await connected(manager);
    expect(cluster.attempts).toEqual(['rethinkdb_0', 'rethinkdb_2']);
    expect(manager.get().serverName).toBe('rethinkdb_2');
    // The frozen server answers at last: that connection is closed, the adopted one stays.
    const adopted = manager.get();
    answerFrozen();
    await until(() => cluster.opened.some((c) => c !== adopted && !c.open), 'the late connection closed');
    expect(manager.get()).toBe(adopted);
    expect(cluster.opened.filter((c) => c !== adopted).map((c) => c.open)).toEqual([false]);
    await manager.close();
  });

  test('when only the seed is known and it is lost, then it backs off and retries (nothing else to try)', async () => {
    const cluster = fakeCluster();
    const { manager, sleeps } = await connectedManager(cluster);
    cluster.down.add('rethinkdb_0');
    manager.get().emit('close');
    await until(() => sleeps.length >= 2, 'two backoffs');
    expect(() => manager.get()).toThrow(expect.objectContaining({ code: 'DATA_STORE_UNAVAILABLE' }));
    expect(sleeps.slice(0, 2)).toEqual([100, 200]);
    cluster.down.delete('rethinkdb_0');
    await connected(manager);
    expect(manager.get().serverName).toBe('rethinkdb_0');
  });

  test('when the server it goes through is about to be drained, then the connection moves to another one first, and reconnects avoid it', async () => {
    const cluster = fakeCluster();
    const { manager } = await connectedManager(cluster);
    manager.learn(cluster.serverStatus);
    const first = manager.get();
    const moved = await manager.steerAwayFrom([cluster.idOf('rethinkdb_0')]);
    expect(moved).toMatchObject({ moved: true, from: 'rethinkdb_0' });
    const second = manager.get();
    expect(second.serverName).not.toBe('rethinkdb_0');
    await until(() => !first.open, 'the old connection closed');
    expect(first.open).toBe(false);
    // The new server goes too: the reconnection does not pick the drained one while another answers.
    cluster.down.add(second.serverName);
    second.emit('close');
    await connected(manager, (c) => c !== second, 'a new connection');
    expect(['rethinkdb_0', second.serverName]).not.toContain(manager.get().serverName);
  });

  test('when no other server answers, then the connection stays where it is and says so', async () => {
    const cluster = fakeCluster();
    const { manager } = await connectedManager(cluster);
    manager.learn(cluster.serverStatus);
    for (const name of ['rethinkdb_1', 'rethinkdb_2', 'rethinkdb_3']) cluster.down.add(name);
    const first = manager.get();
    const moved = await manager.steerAwayFrom([cluster.idOf('rethinkdb_0')]);
    expect(moved).toMatchObject({ moved: false, reason: expect.stringMatching(/no other server answered/) });
    expect(manager.get()).toBe(first);
    expect(first.open).toBe(true);
  });

  test('when it is connected through another server, then steering away changes nothing', async () => {
    const cluster = fakeCluster();
    const { manager } = await connectedManager(cluster);
    manager.learn(cluster.serverStatus);
    const first = manager.get();
    expect(await manager.steerAwayFrom([cluster.idOf('rethinkdb_3')])).toMatchObject({ moved: false });
    expect(manager.get()).toBe(first);
  });

  test('when system tables are read, then the source teaches the connection manager every server\'s driver addresses', async () => {
    const learned = [];
    const { runQuery } = recordingRunner([rawSnapshot('01-healthy.json')]);
    const source = createRethinkDbSource({ r, runQuery, connections: { learn: (statuses) => learned.push(...statuses) } });
    await source.readSystemTables();
    expect(learned.map((st) => [st.name, st.network.hostname, st.network.reql_port])).toEqual(expect.arrayContaining([['rethinkdb_1', 'rethinkdb-1', 28015]]));
  });
});
