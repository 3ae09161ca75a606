// The CLI's tables: the manager's answers (shapes as /v1/cluster, the action reports, /v1/operations and /v1/events
// answer them) as the lines a terminal shows.

import {
  formatEvents, formatOperation, formatOperations, formatReport, formatStatus, formatTable,
} from '../../src/cli/format.js';

const replica = (server, state = 'ready', voting = true) => ({ server, state, voting });
const server = (name, extra = {}) => ({
  name, connected: true, draining: false, primaries: 1, replicas: 3, pod: name.replace('_', '-'), node: `node-${name.at(-1)}`, ...extra,
});
const shard = (index, primary, acting, replicas) => ({ index, primary, acting, replicas });
const ready = { readyForWrites: true, readyForReads: true, allReplicasReady: true };

function cluster(overrides = {}) {
  return {
    backend: 'rethinkdb',
    servers: [server('rethinkdb_0'), server('rethinkdb_1')],
    tables: [{ table: 'app.users', ...ready, shards: [shard(0, 'rethinkdb_0', ['rethinkdb_0'], [replica('rethinkdb_0'), replica('rethinkdb_1')])] }],
    backfills: [], draining: [], runningOperations: [], perfWarnings: [], pods: [],
    ...overrides,
  };
}

describe('formatTable', () => {
  test.each([
    ['columns are padded to their widest cell', ['A', 'LONGER'], [['xyz', '1'], ['w', '22']], ['A    LONGER', 'xyz  1', 'w    22']],
    ['an empty, null or undefined cell is a dash', ['A', 'B', 'C'], [['', null, undefined]], ['A  B  C', '-  -  -']],
    ['the last column is not padded', ['NAME', 'NOTE'], [['a', 'long note'], ['b', '']], ['NAME  NOTE', 'a     long note', 'b     -']],
  ])('when %s, then the lines are aligned', (_, headers, rows, expected) => {
    expect(formatTable(headers, rows)).toEqual(expected);
  });
});

describe('formatStatus', () => {
  test('when the cluster is healthy, then each shard shows its configured and acting primary, replicas and readiness, then the servers', () => {
    expect(formatStatus(cluster())).toEqual([
      'app.users: ready for writes, ready for reads, all replicas ready',
      'SHARD  PRIMARY      ACTING       REPLICAS                  READY',
      '0      rethinkdb_0  rethinkdb_0  rethinkdb_0, rethinkdb_1  2/2',
      '',
      'SERVER       CONNECTED  ROLE     PRIMARIES  REPLICAS  POD          NODE    DRAINING',
      'rethinkdb_0  yes        primary  1          3         rethinkdb-0  node-0  no',
      'rethinkdb_1  yes        primary  1          3         rethinkdb-1  node-1  no',
    ]);
  });

  test.each([
    ['the sandbox', { backend: 'sandbox', notice: 'SANDBOX: not a real one' }, (lines) => expect(lines.slice(0, 2)).toEqual(['SANDBOX: not a real one', ''])],
    ['a drained server', { servers: [server('rethinkdb_0', { primaries: 2 }), server('rethinkdb_1', { primaries: 0, draining: true, drainingReason: 'kernel upgrade', drainingSince: '2026-01-02T03:04:05.678Z' })] },
      (lines) => expect(lines).toContain('rethinkdb_1  yes        replica  0          3         rethinkdb-1  node-1  yes: kernel upgrade (since 2026-01-02T03:04:05Z)')],
    ['a disconnected server with nothing on it', { servers: [server('rethinkdb_9', { connected: false, primaries: 0, replicas: 0, pod: null, node: null })] },
      (lines) => expect(lines).toContain('rethinkdb_9  NO         none  0          0         -    -     no')],
    ['no pods known (no Kubernetes API)', { pods: null, servers: [server('rethinkdb_0')] }, (lines) => {
      expect(lines).toContain('SERVER       CONNECTED  ROLE     PRIMARIES  REPLICAS  DRAINING');
      expect(lines).toContain('rethinkdb_0  yes        primary  1          3         no');
    }],
    ['pods that could not be listed', { pods: null, podsError: 'Kubernetes did not answer' }, (lines) => expect(lines.at(-1)).toBe('pods unknown: Kubernetes did not answer')],
    ['a shard during a hand-over, with a backfilling nonvoting replica',
      { tables: [{ table: 'app.users', readyForWrites: false, readyForReads: true, allReplicasReady: false, shards: [shard(0, 'rethinkdb_1', [], [replica('rethinkdb_0'), replica('rethinkdb_1'), replica('rethinkdb_2', 'backfilling', false)])] }] },
      (lines) => {
        expect(lines[0]).toBe('app.users: NOT ready for writes, ready for reads, NOT all replicas ready');
        expect(lines[2]).toBe('0      rethinkdb_1  none    rethinkdb_0, rethinkdb_1, rethinkdb_2 (backfilling, nonvoting)  2/3');
      }],
    ['no tables', { tables: [] }, (lines) => expect(lines[0]).toBe('no tables')],
    ['a mark on a server that is gone, a perf warning, a backfill and a running operation', {
      draining: [{ server: 'rethinkdb_0', present: true }, { server: 'rethinkdb_7', reason: 'removed', since: '2026-01-02T03:04:05Z', present: false }],
      perfWarnings: [{ serverName: 'rethinkdb_1', pod: 'rethinkdb-1', reason: 'noisy neighbour', decision: 'demote', expiresAt: '2026-01-02T04:00:00.000Z' }],
      backfills: [{ table: 'app.users', from: 'rethinkdb_0', to: 'rethinkdb_2', progress: 0.42 }],
      runningOperations: [{ id: 'op-1', kind: 'add-server' }],
    }, (lines) => expect(lines.slice(-4)).toEqual([
      'draining mark on rethinkdb_7, no longer in the cluster: yes: removed (since 2026-01-02T03:04:05Z)',
      'perf warning on rethinkdb_1 (pod rethinkdb-1): noisy neighbour; demote, until 2026-01-02T04:00:00Z',
      'backfill of app.users from rethinkdb_0 to rethinkdb_2: 42%',
      'running operation op-1 (add-server)',
    ])],
  ])('when the cluster has %s, then the status says so', (_, overrides, check) => {
    check(formatStatus(cluster(overrides)));
  });
});

const move = {
  table: 'ycsb.usertable', tableId: 't1', shard: 1, kind: 'primary', from: 'rethinkdb_1', to: 'rethinkdb_2',
};

describe('formatReport', () => {
  test.each([
    ['a completed drain', {
      action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: false, outcome: 'completed', changes: [move], skipped: [], notDone: [], pending: [], durationMs: 504,
    }, [
      'move-primaries-from-server server=rethinkdb_1: completed in 504 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_1  rethinkdb_2',
    ]],
    ['a plan with nothing to move', {
      action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: true, outcome: 'planned', changes: [], skipped: [], notDone: [], durationMs: 0,
    }, ['move-primaries-from-server server=rethinkdb_1: planned (dry run: nothing changed)', 'no changes planned']],
    ['a partial drain', {
      action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: false, outcome: 'partial', changes: [move],
      skipped: [{ table: 'ycsb.usertable', shard: 2, reason: 'no other eligible replica' }], notDone: [{ table: 'app.log', reason: 'write rejected' }], durationMs: 20010,
    }, [
      'move-primaries-from-server server=rethinkdb_1: partial in 20010 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_1  rethinkdb_2',
      'skipped: ycsb.usertable shard 2: no other eligible replica',
      'not done: app.log: write rejected',
    ]],
    ['a drain that timed out', {
      action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: false, outcome: 'timed_out', changes: [move], skipped: [], notDone: [],
      pending: [{ tableId: 't1', shard: 1, reason: 'acting primary is not the configured one yet' }], durationMs: 20000,
    }, [
      'move-primaries-from-server server=rethinkdb_1: timed_out in 20000 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_1  rethinkdb_2',
      'pending: t1 shard 1: acting primary is not the configured one yet',
    ]],
    ['a release with its rebalance', {
      action: 'release-server', target: { server: 'rethinkdb_1' }, dryRun: false, wasDraining: true, outcome: 'completed',
      rebalance: {
        action: 'rebalance-primaries', target: {}, dryRun: false, outcome: 'completed', changes: [{ ...move, from: 'rethinkdb_2', to: 'rethinkdb_1' }], skipped: [], notDone: [], durationMs: 503,
      },
    }, [
      'release-server server=rethinkdb_1: completed (was draining)',
      '',
      'rebalance-primaries: completed in 503 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_2  rethinkdb_1',
    ]],
    ['a release without rebalancing of a server that was not draining', {
      action: 'release-server', target: { server: 'rethinkdb_1' }, dryRun: false, wasDraining: false, rebalance: null, outcome: 'completed',
    }, ['release-server server=rethinkdb_1: completed (was not draining)']],
  ])('when the report is %s, then it shows the outcome and every change, skip and leftover', (_, report, expected) => {
    expect(formatReport(report)).toEqual(expected);
  });
});

describe('operations and events', () => {
  test('when there are no operations or events, then it says so rather than printing an empty table', () => {
    expect(formatOperations({ operations: [] })).toEqual(['no operations (they are kept in memory: a restart of the manager forgets them)']);
    expect(formatEvents({ events: [] })).toEqual(['no events']);
  });

  test('when operations are listed, then each is a row with its times to the second', () => {
    expect(formatOperations({
      operations: [{ id: 'op-1', kind: 'create-replica', status: 'running', createdAt: '2026-01-02T03:04:05.678Z', finishedAt: null }],
    })).toEqual([
      'ID    KIND            STATUS   CREATED               FINISHED',
      'op-1  create-replica  running  2026-01-02T03:04:05Z  -',
    ]);
  });

  test('when one operation is shown, then its steps with progress and its report follow its status', () => {
    const op = {
      id: 'op-1', kind: 'create-replica', status: 'succeeded', createdAt: '2026-01-02T03:04:05.000Z', finishedAt: '2026-01-02T03:04:08.000Z', error: null,
      steps: [{ table: 'ycsb.usertable', shard: 0, kind: 'replica', from: null, to: 'rethinkdb_3', status: 'done', progress: 1, error: null }],
      report: { action: 'create-replica', target: { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' }, dryRun: false, outcome: 'completed', changes: [], skipped: [], notDone: [], durationMs: 2508 },
    };
    expect(formatOperation(op)).toEqual([
      'operation op-1: create-replica, succeeded',
      'created 2026-01-02T03:04:05Z, finished 2026-01-02T03:04:08Z',
      '',
      'TABLE           SHARD  KIND     FROM  TO           STATUS  PROGRESS  ERROR',
      'ycsb.usertable  0      replica  -     rethinkdb_3  done    100%      -',
      '',
      'create-replica table=ycsb.usertable shard=0 server=rethinkdb_3: completed in 2508 ms',
      'no changes',
    ]);
  });

  test('when events are listed, then each shows when, who, what, on what, how it ended and why', () => {
    expect(formatEvents({
      events: [{
        time: '2026-01-02T03:04:05.678Z', actor: 'system:serviceaccount:rethinkdb:op', actorLabel: 'op', action: 'move-primaries-from-server',
        target: { server: 'rethinkdb_1' }, outcome: 'completed', reason: 'kernel upgrade',
      }],
    })).toEqual([
      'TIME                  ACTOR  ACTION                      TARGET              OUTCOME    REASON',
      '2026-01-02T03:04:05Z  op     move-primaries-from-server  server=rethinkdb_1  completed  kernel upgrade',
    ]);
  });
});
