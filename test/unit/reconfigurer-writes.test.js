// The reconfigurer's writes: several tables at once up to TABLE_WRITE_CONCURRENCY, never two to one table, and once
// RethinkDB is unavailable no further write starts and every table left says why.
import { createReconfigurer } from '../../src/actions/reconfigurer.js';
import { AppError } from '../../src/errors.js';
import { createDeadline, createVirtualClock } from '../../src/lib/clock.js';
import { createKeyedMutex } from '../../src/lib/keyed-mutex.js';
import { createLogger } from '../../src/logger.js';
import { createStateStore } from '../../src/state/state-store.js';
import { createLogSink } from '../helpers/harness.js';

const TABLES = 10;
// Ten tables, one shard each on a, b, c, primary a, all ready.
function cluster() {
  const ids = ['a', 'b', 'c'];
  return {
    servers: ids.map((id) => ({ id, name: `server_${id}`, connected: true, tags: [], hostname: null, canonicalAddresses: [] })),
    backfills: [],
    tables: Array.from({ length: TABLES }, (_, t) => ({
      id: `t${t}`, db: 'db', name: `t${t}`, readyForWrites: true, readyForReads: true, allReplicasReady: true, raftLeader: null,
      shards: [{ index: 0, primary: 'a', replicas: ids, nonvoting: [], acting: ['a'], states: { a: 'ready', b: 'ready', c: 'ready' } }],
    })),
  };
}
// Each table's primary to b.
const demoteAll = (c) => ({ changes: c.tables.map((t) => ({ tableId: t.id, shards: [{ ...t.shards[0], primary: 'b' }], moves: [{ shard: 0, from: 'a', to: 'b' }] })), skipped: [] });

function setup({ writeConcurrency, failOn = null, writeMs = 0, deadlineMs = 10_000 }) {
  const clock = createVirtualClock();
  const logger = createLogger({ level: 'info', destination: createLogSink().stream });
  const log = { started: [], inFlight: 0, most: 0, perTable: new Map() };
  const store = {
    readCluster: async () => cluster(),
    async writeTableShards(tableId) {
      log.started.push(tableId);
      log.inFlight += 1;
      log.most = Math.max(log.most, log.inFlight);
      log.perTable.set(tableId, (log.perTable.get(tableId) ?? 0) + 1);
      await new Promise((res) => { setImmediate(res); });
      if (writeMs > 0) await clock.advance(writeMs);
      log.inFlight -= 1;
      if (tableId === failOn) throw new AppError('DATA_STORE_UNAVAILABLE', 'connection closed');
    },
  };
  const reconfigurer = createReconfigurer({
    store, locks: createKeyedMutex(), marks: createStateStore({ clock, logger }), clock, logger, waitPollIntervalMs: 100, writeConcurrency,
  });
  const commit = () => reconfigurer.commit(demoteAll, { tableIds: cluster().tables.map((t) => t.id), deadline: createDeadline(clock, deadlineMs) });
  return { log, commit };
}

describe('the reconfigurer writes tables concurrently', () => {
  test.each([1, 3, 8])('when writeConcurrency is %i, then at most that many writes run at once, each table is written once, and written keeps the plan order', async (writeConcurrency) => {
    const { log, commit } = setup({ writeConcurrency });
    const result = await commit();
    expect(log.most).toBe(Math.min(writeConcurrency, TABLES));
    expect([...log.perTable.values()]).toEqual(Array(TABLES).fill(1));
    expect(result.written.map((w) => w.change.tableId)).toEqual(cluster().tables.map((t) => t.id));
    expect(result.notDone).toEqual([]);
  });

  test('when RethinkDB becomes unavailable during one write, then no further write starts, that table says its outcome is unknown, and each table not written says why', async () => {
    const { log, commit } = setup({ writeConcurrency: 3, failOn: 't1' });
    const result = await commit();
    // t0..t2 were in flight together; t3 started when t0 finished, before t1 failed. Nothing after.
    expect(log.started).toEqual(['t0', 't1', 't2', 't3']);
    expect(result.written.map((w) => w.change.tableId)).toEqual(['t0', 't2', 't3']);
    expect(result.notDone[0]).toEqual({ tableId: 't1', reason: expect.stringMatching(/^write outcome unknown, RethinkDB became unavailable/), unavailable: true });
    expect(result.notDone.slice(1).map((n) => n.tableId)).toEqual(['t4', 't5', 't6', 't7', 't8', 't9']);
    // Each says RethinkDB was unavailable, which may pass: a drain with time left plans them again.
    for (const n of result.notDone.slice(1)) expect(n).toEqual({ tableId: n.tableId, reason: expect.stringMatching(/^not written: RethinkDB became unavailable during another table's write/), unavailable: true });
  });

  test('when each write takes 1 s and the deadline is 3.5 s, then no write starts once the deadline is nearer than the slowest write took, and the rest say the deadline passed', async () => {
    const { log, commit } = setup({ writeConcurrency: 1, writeMs: 1000, deadlineMs: 3500 });
    const result = await commit();
    // Writes start at 0, 1 and 2 s; at 3 s only 0.5 s is left, less than a write took.
    expect(log.started).toEqual(['t0', 't1', 't2']);
    expect(result.notDone).toHaveLength(TABLES - 3);
    for (const n of result.notDone) expect(n.reason).toBe('deadline passed before this table was written');
  });
});
