// The CLI's tables: the manager's answers (shapes as /v1/cluster, the action reports, /v1/operations and /v1/events
// answer them) as the lines a terminal shows.

import {
  formatEvents, formatOperation, formatOperations, formatPerfWarning, formatPerfWarningEnd, formatReport, formatStatus, formatTable,
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
    ['a data move that started (202), with the demotion that came first', {
      action: 'migrate-replicas-off', target: { server: 'rethinkdb_3' }, dryRun: false, operation: { id: 'op-7', status: 'running', href: '/v1/operations/op-7' },
      demotion: {
        action: 'move-primaries-from-server', target: { server: 'rethinkdb_3' }, dryRun: false, outcome: 'nothing_to_do', changes: [], skipped: [], notDone: [], durationMs: 12,
      },
    }, [
      'migrate-replicas-off server=rethinkdb_3: started',
      'operation op-7: running (follow it with: rethinkdb-manager operations op-7 --wait)',
      '',
      'move-primaries-from-server server=rethinkdb_3: nothing_to_do in 12 ms',
      'no changes',
    ]],
    ['an add-server plan with the primaries it would give afterwards', {
      action: 'add-server', target: { server: 'rethinkdb_3', tables: null, grow: false }, dryRun: true, outcome: 'planned',
      changes: [{ ...move, kind: 'replica', from: 'rethinkdb_0', to: 'rethinkdb_3' }], skipped: [], notDone: [],
      primaries: {
        action: 'rebalance-primaries', target: {}, dryRun: true, outcome: 'planned', changes: [{ ...move, from: 'rethinkdb_0', to: 'rethinkdb_3' }], skipped: [], notDone: [],
      },
    }, [
      'add-server server=rethinkdb_3 grow=false: planned (dry run: nothing changed)',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      replica  rethinkdb_0  rethinkdb_3',
      '',
      'rebalance-primaries: planned (dry run: nothing changed)',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_0  rethinkdb_3',
    ]],
    ['a drain of a server that held no primary (it stays marked draining)', {
      action: 'move-primaries-from-server', target: { server: 'rethinkdb_3' }, dryRun: false, outcome: 'nothing_to_do', changes: [], skipped: [], notDone: [], durationMs: 4, draining: ['rethinkdb_3'],
    }, [
      'move-primaries-from-server server=rethinkdb_3: nothing_to_do in 4 ms',
      'no changes',
      'marked draining: rethinkdb_3 (no primary goes to it until: rethinkdb-manager release-server SERVER)',
    ]],
    ['a POSTSTART expansion whose work ran as another operation', {
      action: 'poststart', target: { pod: 'rethinkdb-4', server: 'rethinkdb_4' }, outcome: 'completed', operationId: 'op-5', changes: [], skipped: [], notDone: [], durationMs: 5116,
      decision: { reason: 'no server is missing', actions: ['add-server'] },
    }, [
      'poststart pod=rethinkdb-4 server=rethinkdb_4: completed in 5116 ms',
      'decision: no server is missing',
      'the work ran as operation op-5 (show it with: rethinkdb-manager operations op-5)',
      'no changes',
    ]],
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

  test('when operations are listed, then the newest comes first (the manager lists them as they were started)', () => {
    const op = (id, createdAt) => ({ id, kind: 'add-server', status: 'succeeded', createdAt, finishedAt: null });
    const lines = formatOperations({
      operations: [op('old', '2026-01-02T03:04:05.000Z'), op('newest', '2026-01-02T05:00:00.000Z'), op('middle-a', '2026-01-02T04:00:00.000Z'), op('middle-b', '2026-01-02T04:00:00.000Z')],
    });
    expect(lines.slice(1).map((l) => l.split(' ')[0])).toEqual(['newest', 'middle-b', 'middle-a', 'old']);
  });

  test('when one operation is shown, then its steps with progress and its report follow its status', () => {
    const op = {
      id: 'op-1', kind: 'create-replica', params: { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' }, status: 'succeeded', createdAt: '2026-01-02T03:04:05.000Z', finishedAt: '2026-01-02T03:04:08.000Z', error: null,
      steps: [{ table: 'ycsb.usertable', shard: 0, kind: 'replica', from: null, to: 'rethinkdb_3', status: 'done', progress: 1, error: null }],
      report: { action: 'create-replica', target: { table: 'ycsb.usertable', shard: 0, server: 'rethinkdb_3' }, dryRun: false, outcome: 'completed', changes: [], skipped: [], notDone: [], durationMs: 2508 },
    };
    expect(formatOperation(op)).toEqual([
      'operation op-1: create-replica table=ycsb.usertable shard=0 server=rethinkdb_3, succeeded',
      'created 2026-01-02T03:04:05Z, finished 2026-01-02T03:04:08Z',
      '',
      'TABLE           SHARD  KIND     FROM  TO           STATUS  PROGRESS  ERROR',
      'ycsb.usertable  0      replica  -     rethinkdb_3  done    100%      -',
      '',
      'create-replica table=ycsb.usertable shard=0 server=rethinkdb_3: completed in 2508 ms',
      'no changes',
    ]);
  });

  test('when a POSTSTART operation is shown, then its heading names the kind and the pod, never "undefined", and its rebalance is shown once', () => {
    const rebalance = {
      action: 'rebalance-primaries', target: {}, dryRun: false, outcome: 'completed', changes: [{ ...move, from: 'rethinkdb_2', to: 'rethinkdb_1' }], skipped: [], notDone: [], durationMs: 503,
    };
    const op = {
      id: 'op-2', kind: 'poststart', params: { pod: 'rethinkdb-1' }, status: 'succeeded', createdAt: '2026-01-02T03:04:05.000Z', finishedAt: '2026-01-02T03:04:09.000Z', error: null,
      steps: [{ step: 'wait-for-join', status: 'done', detail: 'rethinkdb_1 joined' }, { step: 'decide', status: 'done', detail: 'returning', kind: 'returning' }],
      report: {
        event: 'POSTSTART', pod: 'rethinkdb-1', server: 'rethinkdb_1', decision: { reason: 'returning server: give back its primaries', actions: ['rebalance-primaries'] },
        outcome: 'completed', replicasReady: true, rebalance, changes: rebalance.changes, skipped: [], notDone: [], durationMs: 4000,
      },
    };
    const lines = formatOperation(op);
    expect(lines.join('\n')).not.toMatch(/undefined/);
    expect(lines).toEqual([
      'operation op-2: poststart pod=rethinkdb-1, succeeded',
      'created 2026-01-02T03:04:05Z, finished 2026-01-02T03:04:09Z',
      '',
      'STEP           STATUS  DETAIL',
      'wait-for-join  done    rethinkdb_1 joined',
      'decide         done    returning',
      '',
      'poststart pod=rethinkdb-1 server=rethinkdb_1: completed in 4000 ms',
      'decision: returning server: give back its primaries',
      '',
      'rebalance-primaries: completed in 503 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_2  rethinkdb_1',
    ]);
  });

  test('when an operation failed without a report, then its heading names its kind and target and the error follows', () => {
    expect(formatOperation({
      id: 'op-3', kind: 'migrate-replicas-off', params: { server: 'rethinkdb_3' }, status: 'failed', createdAt: '2026-01-02T03:04:05Z', finishedAt: '2026-01-02T03:04:06Z',
      steps: [], report: null, error: { error: 'DATA_STORE_UNAVAILABLE', message: 'RethinkDB is down' },
    })).toEqual([
      'operation op-3: migrate-replicas-off server=rethinkdb_3, failed',
      'created 2026-01-02T03:04:05Z, finished 2026-01-02T03:04:06Z',
      'error: RethinkDB is down',
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

describe('perf warnings', () => {
  const demotion = {
    action: 'move-primaries-from-server', target: { server: 'rethinkdb_1' }, dryRun: false, outcome: 'completed', changes: [move], skipped: [], notDone: [], durationMs: 510,
  };

  test('when a long warning is raised on a pod, then the decision, the pod, its demotion and the migration it started are shown', () => {
    expect(formatPerfWarning({
      event: 'PERFWARNING', target: { pod: 'rethinkdb-1' }, source: 'operator',
      decision: { reason: 'long perf warning: demote, then migrate replicas off', actions: ['move-primaries-from-server', 'migrate-replicas-off'] },
      pods: [{
        pod: 'rethinkdb-1', server: 'rethinkdb_1', outcome: 'completed', demotion, raftLeadership: null,
        migration: { id: 'op-9', status: 'running', href: '/v1/operations/op-9' }, expiresAt: '2026-01-02T04:00:00.000Z',
      }],
    })).toEqual([
      'perf warning raised on pod=rethinkdb-1 by operator: long perf warning: demote, then migrate replicas off',
      'actions: move-primaries-from-server, migrate-replicas-off',
      'POD          SERVER       OUTCOME    UNTIL                 MIGRATION',
      'rethinkdb-1  rethinkdb_1  completed  2026-01-02T04:00:00Z  op-9',
      '',
      'move-primaries-from-server server=rethinkdb_1: completed in 510 ms',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_1  rethinkdb_2',
      '',
      'operation op-9: running (follow it with: rethinkdb-manager operations op-9 --wait)',
    ]);
  });

  test('when a warning is raised on a node, then each of its pods is a row and the one demotion (one plan) is shown once', () => {
    const lines = formatPerfWarning({
      event: 'PERFWARNING', target: { node: 'node-1' }, source: 'operator', decision: { reason: 'short perf warning', actions: ['move-primaries-from-node'] },
      pods: [
        { pod: 'rethinkdb-1', server: 'rethinkdb_1', outcome: 'completed', demotion, raftLeadership: null, migration: null, expiresAt: null },
        { pod: 'rethinkdb-4', server: 'rethinkdb_4', outcome: 'completed', demotion, raftLeadership: null, migration: null, expiresAt: null },
        { pod: 'rethinkdb-5', server: null, outcome: 'nothing_to_do', reason: 'no connected RethinkDB server matches this pod' },
      ],
    });
    expect(lines.filter((l) => l.startsWith('move-primaries-from-server'))).toHaveLength(1);
    expect(lines.slice(2, 6)).toEqual([
      'POD          SERVER       OUTCOME        UNTIL  MIGRATION',
      'rethinkdb-1  rethinkdb_1  completed      -      -',
      'rethinkdb-4  rethinkdb_4  completed      -      -',
      'rethinkdb-5  -            nothing_to_do  -      -',
    ]);
    expect(lines.at(-1)).toBe('rethinkdb-5: no connected RethinkDB server matches this pod');
  });

  test.each([
    ['primaries given back at once', {
      event: 'PERFWARNING_END', pod: 'rethinkdb-1', ended: true, reason: 'perf warning withdrawn (DELETE)',
      restore: { action: 'rebalance-primaries', reason: 'healthy again', outcome: 'completed', changes: [{ ...move, from: 'rethinkdb_2', to: 'rethinkdb_1' }] },
    }, [
      'perf warning ended on pod rethinkdb-1: perf warning withdrawn (DELETE)',
      'restore: rebalance-primaries, completed (healthy again)',
      'TABLE           SHARD  KIND     FROM         TO',
      'ycsb.usertable  1      primary  rethinkdb_2  rethinkdb_1',
    ]],
    ['replicas moved back by an operation', {
      event: 'PERFWARNING_END', pod: 'rethinkdb-1', ended: true, reason: 'perf warning withdrawn (DELETE)',
      restore: { action: 'add-server', reason: 'after a long warning', operation: { id: 'op-4', status: 'running', href: '/v1/operations/op-4' } },
    }, [
      'perf warning ended on pod rethinkdb-1: perf warning withdrawn (DELETE)',
      'restore: add-server (after a long warning)',
      'operation op-4: running (follow it with: rethinkdb-manager operations op-4 --wait)',
    ]],
    ['the warnings of a node', {
      event: 'PERFWARNING_END', node: 'node-1', ended: true, reason: 'perf warning withdrawn (DELETE)',
      pods: [{ event: 'PERFWARNING_END', pod: 'rethinkdb-1', ended: true, reason: 'perf warning withdrawn (DELETE)', restore: { action: 'wait', reason: 'not healthy yet' } }],
    }, [
      'perf warnings ended on node node-1: perf warning withdrawn (DELETE)',
      '',
      'perf warning ended on pod rethinkdb-1: perf warning withdrawn (DELETE)',
      'restore: wait (not healthy yet)',
    ]],
  ])('when a warning ends with %s, then the restore is shown', (_, result, expected) => {
    expect(formatPerfWarningEnd(result)).toEqual(expected);
  });
});
