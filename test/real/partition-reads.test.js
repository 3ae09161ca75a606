// A partitioned primary and stale reads, on real 2.4.4 servers in network namespaces (heartbeat 2 s). rethinkdb_1 is
// the primary of a one-shard table and is cut off from the other two servers but not from this client; a writer
// updates the row through the others without pause, and a reader reads it through rethinkdb_1 (read_mode single, the
// default). RethinkDB refuses the reader ("isn't connected to a quorum") once rethinkdb_1's links die, and the others
// elect a new primary only after their own links die and a few Raft rounds: no read through the cut-off primary
// returns a value older than an acknowledged write. With read_mode outdated, which asks for it, stale values do come.

import { jest } from '@jest/globals';
import r from 'rethinkdb';
import { createRethinkDbCluster } from '../lab/rethinkdb-cluster.js';

jest.setTimeout(120000);

let cluster = null;
const conns = [];
afterEach(async () => {
  await Promise.all(conns.splice(0).map((c) => c.close({ noreplyWait: false }).catch(() => {})));
  await cluster?.destroy();
  cluster = null;
});

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

describe('reads through a primary cut off from the other servers', () => {
  test('when rethinkdb_1 is partitioned while writes go on through the others, then no read through it returns a value older than an acknowledged write, and it refuses reads before the others acknowledge a new one', async () => {
    cluster = createRethinkDbCluster({ size: 3, network: 'netns', labIndex: 12 });
    await cluster.start();
    const connect = async (i) => { const c = await r.connect({ host: cluster.servers[i].host, port: cluster.servers[i].driverPort }); conns.push(c); return c; };
    const [c0, c1, c2] = [await connect(0), await connect(1), await connect(2)];
    const table = r.db('x').table('t');
    await r.dbCreate('x').run(c0);
    await r.db('x').tableCreate('t', { shards: 1, replicas: 3 }).run(c0);
    await table.config().update({ shards: [{ primary_replica: 'rethinkdb_1', replicas: ['rethinkdb_0', 'rethinkdb_1', 'rethinkdb_2'], nonvoting_replicas: [] }] }).run(c0);
    await table.wait({ waitFor: 'all_replicas_ready' }).run(c0);
    await r.db('rethinkdb').table('cluster_config').get('heartbeat').update({ heartbeat_timeout_secs: 2 }).run(c0);
    await table.insert({ id: 1, v: 0 }).run(c0);
    await sleep(3000);

    // The writer: v = 1, 2, ... through rethinkdb_0 and rethinkdb_2 in turn; acked is the highest acknowledged.
    const w = { acked: 0, next: 0, firstAckAfterCut: null, stop: false };
    let cutAt = null;
    let sentBeforeCut = Infinity;
    const writer = (async () => {
      while (!w.stop) {
        w.next += 1;
        const v = w.next;
        await table.get(1).update({ v }).run(v % 2 ? c0 : c2, { durability: 'hard' }).then(() => {
          w.acked = Math.max(w.acked, v);
          if (cutAt !== null && v > sentBeforeCut && w.firstAckAfterCut === null) w.firstAckAfterCut = Date.now();
        }).catch(() => {});
        await sleep(20);
      }
    })();
    await sleep(500);
    expect(w.acked).toBeGreaterThan(0);
    // A write already sent at the cut is not counted as after it: the first one sent after it is.
    sentBeforeCut = w.next;
    cluster.partitionServer(1);
    cutAt = Date.now();
    // A write sent straight to the cut-off primary: it must not be acknowledged unless it survives the partition.
    const direct = Promise.race([
      r.db('x').table('t').insert({ id: 2 }).run(c1, { durability: 'hard' }).then(() => 'acked').catch((err) => err.message),
      sleep(8000).then(() => 'pending'),
    ]);
    const reads = { ok: 0, stale: [], refused: 0, lastOkAt: null };
    const until = Date.now() + 9000;
    while (Date.now() < until) {
      const floor = w.acked;
      const got = await Promise.race([table.get(1).run(c1).then((d) => ({ v: d.v })).catch((err) => ({ err: err.message })), sleep(300).then(() => ({ pending: true }))]);
      if (got.v !== undefined) {
        reads.ok += 1;
        reads.lastOkAt = Date.now();
        if (got.v < floor) reads.stale.push({ v: got.v, acked: floor });
      } else if (got.err) {
        reads.refused += 1;
        expect(got.err).toMatch(/isn't connected to a quorum|not available/);
      }
      await sleep(30);
    }
    const outdated = await r.db('x').table('t', { readMode: 'outdated' }).get(1).run(c1);
    w.stop = true;
    await writer;
    cluster.healPartition(1);
    const directAnswer = await direct;
    await table.wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c0);
    const row2 = await table.get(2).run(c0);
    if (directAnswer === 'acked') expect(row2).not.toBeNull();
    else expect(directAnswer).toMatch(/lost contact|isn't connected to a quorum|not available|did not take place|pending/);

    expect(reads.ok).toBeGreaterThan(0);
    expect(reads.refused).toBeGreaterThan(0);
    expect(reads.stale).toEqual([]);
    expect(w.next).toBeGreaterThan(sentBeforeCut + 1);
    expect(w.firstAckAfterCut).not.toBeNull();
    // The order that makes it safe: the cut-off primary's last answered read came before the others' first new write.
    expect(reads.lastOkAt).toBeLessThan(w.firstAckAfterCut);
    // read_mode outdated asks for what rethinkdb_1 has: older than what the others acknowledged since.
    expect(outdated.v).toBeLessThan(w.acked);
  });
});
