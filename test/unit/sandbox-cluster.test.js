// The sandbox must answer like RethinkDB 2.4.4 did on the recording rig.

import { readFileSync } from 'node:fs';
import { createSandboxCluster } from '../../src/sandbox/sandbox-cluster.js';
import { loadRethinkFixture } from '../helpers/fixtures.js';
import { createVirtualClock } from '../helpers/harness.js';

function fixtureTopology() {
  const healthy = loadRethinkFixture('01-healthy.json');
  return {
    servers: healthy.server_status.map((s) => ({ name: s.name, hostname: s.network.hostname, tags: ['default'] })),
    tables: healthy.table_config.map((t) => ({
      db: t.db, name: t.name, docCount: 100000, shards: t.shards.map((s) => ({ primary: s.primary_replica, replicas: s.replicas })),
    })),
  };
}

function setup(options = {}) {
  const clock = createVirtualClock();
  const model = createSandboxCluster({ clock, topology: fixtureTopology(), ...options });
  const usertable = model.readSystemTables().tableConfig.find((t) => t.name === 'usertable');
  const id = (name) => model.serverId(name);
  return { clock, model, usertable, id };
}

describe('sandbox table_config validation', () => {
  const recorded = loadRethinkFixture('02-invalid-table-config-updates.json');

  test.each(['primary_not_in_replicas', 'duplicate_server', 'empty_replicas', 'nonvoting_primary', 'extra_key'])(
    'when the update is %s, then the error string and result are the recorded ones',
    (key) => {
      const { model, usertable, id } = setup();
      const bad = recorded[key].shard;
      const shard = {
        ...bad, primary_replica: id(bad.primary_replica), replicas: bad.replicas.map(id), nonvoting_replicas: bad.nonvoting_replicas.map(id),
      };
      const shards = usertable.shards.map((s, i) => (i === 0 ? shard : s));
      expect(model.updateTableShards(usertable.id, shards)).toEqual(recorded[key].result);
    },
  );

  test('when the shards array is empty, then the recorded error is returned', () => {
    const { model, usertable } = setup();
    expect(model.updateTableShards(usertable.id, [])).toEqual(recorded.empty_shards.result);
  });

  test('when a server is unknown, then the recorded wording is used (naming the id given)', () => {
    const { model, usertable, id } = setup();
    const shards = structuredClone(usertable.shards);
    shards[0].replicas = [id('rethinkdb_0'), id('rethinkdb_2'), 'no_such_server'];
    shards[0].primary_replica = id('rethinkdb_0');
    expect(model.updateTableShards(usertable.id, shards).first_error).toBe(recorded.unknown_server.result.first_error);
  });

  test('when the same config is written again, then unchanged: 1 as recorded', () => {
    const { model, usertable } = setup();
    expect(model.updateTableShards(usertable.id, usertable.shards)).toEqual(loadRethinkFixture('03-move-primary-repeated.json').result);
  });

  test('when a disconnected server that the table already uses is named primary, then it is accepted (as recorded in 06)', () => {
    const { model, usertable, id } = setup();
    model.crashServer('rethinkdb_2');
    const shards = structuredClone(usertable.shards);
    shards[0].primary_replica = id('rethinkdb_2');
    expect(model.updateTableShards(usertable.id, shards)).toEqual(loadRethinkFixture('06-config-change-naming-dead-server.json').primaryOntoDead.result);
  });
});

describe('sandbox dynamics', () => {
  const status = (model, name = 'usertable') => model.readSystemTables().tableStatus.find((t) => t.name === name);

  test('when a primary moves, then the old primary still acts briefly while ready_for_writes is already true (03)', () => {
    const { model, usertable, clock, id } = setup({ handoverMs: 300 });
    const shards = structuredClone(usertable.shards);
    shards[0].primary_replica = id('rethinkdb_0');
    model.updateTableShards(usertable.id, shards);
    const right = status(model);
    expect(right.shards[0].primary_replicas).toEqual([id('rethinkdb_3')]);
    expect(right.status).toMatchObject({ ready_for_writes: true, all_replicas_ready: false });
    clock.advance(300);
    expect(status(model).shards[0].primary_replicas).toEqual([id('rethinkdb_0')]);
    expect(status(model).status.all_replicas_ready).toBe(true);
  });

  test('when a server holding a primary dies, then its shard has no primary until the election timeout, then a survivor acts; config is untouched', () => {
    const { model, clock, id } = setup({ electionTimeoutMs: 10000 });
    model.crashServer('rethinkdb_1');
    const shard3 = () => status(model).shards[3];
    expect(shard3().primary_replicas).toEqual([]);
    expect(shard3().replicas).toEqual([
      { server: id('rethinkdb_3'), state: 'waiting_for_primary' }, { server: id('rethinkdb_2'), state: 'waiting_for_primary' },
      { server: id('rethinkdb_1'), state: 'disconnected' },
    ]);
    expect(status(model).status.ready_for_writes).toBe(false);
    clock.advance(10000);
    expect(shard3().primary_replicas).toEqual([id('rethinkdb_2')]);
    expect(status(model).status.ready_for_writes).toBe(true);
    expect(model.readSystemTables().tableConfig.find((t) => t.name === 'usertable').shards[3].primary_replica).toBe(id('rethinkdb_1'));
    expect(model.readSystemTables().serverStatus.map((s) => s.name)).not.toContain('rethinkdb_1');
  });

  test('when the recorded 06-then-07 sequence is replayed, then every table_status shard and flag matches the recording', () => {
    // Start from the configuration the rig had before 06 (a primary had been moved in 03), as recorded in 06.
    const before = loadRethinkFixture('06-one-server-killed-after-1.5s.json').table_config;
    const clock = createVirtualClock();
    const model = createSandboxCluster({
      clock,
      topology: {
        servers: [0, 1, 2, 3].map((i) => ({ name: `rethinkdb_${i}`, hostname: `rethinkdb-${i}` })),
        tables: before.map((t) => ({ db: t.db, name: t.name, docCount: 1000, shards: t.shards.map((sh) => ({ primary: sh.primary_replica, replicas: sh.replicas })) })),
      },
    });
    model.crashServer('rethinkdb_3', { mode: 'kill' });
    clock.advance(13500);
    model.crashServer('rethinkdb_2', { mode: 'kill' });
    clock.advance(13500);
    const names = (doc) => ({
      name: doc.name,
      status: doc.status,
      shards: doc.shards.map((sh) => ({
        primary_replicas: sh.primary_replicas.map((id) => model.serverNames().find((n) => model.serverId(n) === id)),
        replicas: sh.replicas.map((r) => ({ server: model.serverNames().find((n) => model.serverId(n) === r.server), state: r.state })),
      })),
    });
    const recorded = loadRethinkFixture('07-two-servers-killed.json').table_status;
    const modelled = model.readSystemTables().tableStatus.map(names);
    expect(modelled).toEqual(recorded.map(({ name, status, shards }) => ({ name, status, shards })));
  });

  test.each([['kill', 850], ['term', 1700], ['cut', 10000]])('when a primary\'s server goes down by %s, then a survivor acts after %i ms', (mode, ms) => {
    const { model, clock } = setup({ electionTimeoutMs: 10000 });
    model.crashServer('rethinkdb_1', { mode });
    clock.advance(ms - 1);
    expect(status(model).shards[3].primary_replicas).toEqual([]);
    clock.advance(1);
    expect(status(model).shards[3].primary_replicas).toHaveLength(1);
  });

  test('when a replica is added, then it backfills for a time proportional to the table size, with progress in jobs', () => {
    const { model, usertable, clock, id } = setup({ backfillMsPer1000Docs: 100 });
    const shards = structuredClone(usertable.shards);
    shards[1].replicas.push(id('rethinkdb_2'));
    shards[1].nonvoting_replicas.push(id('rethinkdb_2'));
    model.updateTableShards(usertable.id, shards);
    clock.advance(1250);
    const { jobs } = model.readSystemTables();
    expect(jobs).toEqual([expect.objectContaining({
      type: 'backfill', info: expect.objectContaining({ db: 'ycsb', table: 'usertable', destination_server: 'rethinkdb_2', progress: 0.5 }),
    })]);
    expect(status(model).shards[1].replicas.find((r) => r.server === id('rethinkdb_2')).state).toBe('backfilling');
    clock.advance(1250);
    expect(status(model).shards[1].replicas.find((r) => r.server === id('rethinkdb_2')).state).toBe('ready');
    expect(model.readSystemTables().jobs).toEqual([]);
  });
});

describe('sandbox backfill sources', () => {
  test('when a shard\'s primary has just crashed and a replica is added before any election, then a connected replica sends the data', () => {
    const { model, usertable, clock, id } = setup({ backfillMsPer1000Docs: 100 });
    const shard = usertable.shards[1];
    const dead = shard.primary_replica;
    const deadName = model.serverNames().find((n) => id(n) === dead);
    const newcomer = model.serverNames().find((n) => !shard.replicas.includes(id(n)));
    model.crashServer(deadName, { mode: 'cut' });
    const shards = structuredClone(usertable.shards);
    shards[1].replicas.push(id(newcomer));
    shards[1].nonvoting_replicas.push(id(newcomer));
    model.updateTableShards(usertable.id, shards);
    clock.advance(10);
    const [job] = model.readSystemTables().jobs;
    expect(job.info.destination_server).toBe(newcomer);
    expect(job.info.source_server).not.toBe(deadName);
    expect(shard.replicas.map((r) => model.serverNames().find((n) => id(n) === r))).toContain(job.info.source_server);
  });
});

describe('sandbox against what the real server answered (test/data/rethinkdb-2.4.4)', () => {
  test('when two of a shard\'s three voters are down, then a table_config write is refused with the text RethinkDB 2.4.4 gave', () => {
    const recorded = JSON.parse(readFileSync(new URL('../data/rethinkdb-2.4.4/table-config-write-without-quorum.json', import.meta.url), 'utf8')).error.result;
    const { model } = setup({ electionTimeoutMs: 10000 });
    const config = model.readSystemTables().tableConfig.find((t) => t.name === 'usertable');
    const voters = config.shards[0].replicas.filter((id) => id !== config.shards[0].primary_replica);
    for (const id of voters) model.crashServer(model.serverNames().find((n) => model.serverId(n) === id), { mode: 'kill' });
    const result = model.updateTableShards(config.id, config.shards);
    expect(result).toEqual({ ...recorded, first_error: recorded.first_error.replace('ycsb.accounts', 'ycsb.usertable') });
  });
});
