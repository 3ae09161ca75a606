// The metrics module without HTTP: registries per manager, label values, and gauges that forget what is gone.

import { register as globalRegistry } from 'prom-client';
import {
  MONITOR_ACTOR, actorLabel, callerActor, hookActor, managerActor,
} from '../../src/audit/actor.js';
import { createMetrics, hookOutcome } from '../../src/metrics/metrics.js';
import { parseExposition } from '../helpers/exposition.js';

const render = async (metrics) => parseExposition(await metrics.render());

// Two servers a and b; one table whose two shards have their primaries on a and on b.
const cluster = (servers) => ({
  servers: servers.map((id) => ({ id, name: `server_${id}` })),
  tables: [{ shards: [{ primary: 'a', replicas: ['a', 'b'] }, { primary: servers.includes('b') ? 'b' : 'a', replicas: servers }] }],
});

describe('createMetrics', () => {
  test('when two managers are built, then each has its own registry and nothing lands on prom-client\'s global one', async () => {
    const one = createMetrics();
    const two = createMetrics();
    one.recordHook({ hook: 'prestop', outcome: 'completed' });
    expect((await render(one)).value('rethinkdb_manager_hook_requests_total', { hook: 'prestop', outcome: 'completed' })).toBe(1);
    expect((await render(two)).series('rethinkdb_manager_hook_requests_total')).toEqual([]);
    expect(globalRegistry.getMetricsAsArray().filter((x) => x.name.startsWith('rethinkdb_manager_'))).toEqual([]);
  });

  test('when a prefix is given, then every metric carries it; process metrics come only when asked for, with the same prefix', async () => {
    const plain = await render(createMetrics({ prefix: 'test_' }));
    expect(Object.keys(plain.types).every((name) => name.startsWith('test_'))).toBe(true);
    expect(Object.keys(plain.types).some((name) => name.includes('process_'))).toBe(false);
    const withProcess = await render(createMetrics({ processMetrics: true }));
    expect(withProcess.types).toMatchObject({
      rethinkdb_manager_process_cpu_user_seconds_total: 'counter',
      rethinkdb_manager_process_resident_memory_bytes: 'gauge',
      rethinkdb_manager_nodejs_eventloop_lag_seconds: 'gauge',
    });
  });

  test('when an action is recorded, then it is counted by action, kind of actor and outcome, and its duration is observed in seconds; one without a duration is counted only', async () => {
    const metrics = createMetrics();
    metrics.recordAction({ action: 'migrate-replicas-off', actorLabel: 'hook:prestop', outcome: 'completed', durationMs: 125000 });
    metrics.recordAction({ action: 'release-server', actorLabel: 'operator', outcome: 'completed', durationMs: null });
    const s = await render(metrics);
    expect(s.value('rethinkdb_manager_actions_total', { action: 'migrate-replicas-off', actor: 'hook:prestop', outcome: 'completed' })).toBe(1);
    expect(s.value('rethinkdb_manager_actions_total', { action: 'release-server', actor: 'operator', outcome: 'completed' })).toBe(1);
    expect(s.value('rethinkdb_manager_action_duration_seconds_sum', { action: 'migrate-replicas-off' })).toBe(125);
    expect(s.value('rethinkdb_manager_action_duration_seconds_bucket', { action: 'migrate-replicas-off', le: '120' })).toBe(0);
    expect(s.value('rethinkdb_manager_action_duration_seconds_bucket', { action: 'migrate-replicas-off', le: '300' })).toBe(1);
    expect(s.value('rethinkdb_manager_action_duration_seconds_count', { action: 'release-server' })).toBeUndefined();
  });

  test('when the cluster changes between scrapes, then a server that left and a released mark leave no series behind', async () => {
    const metrics = createMetrics();
    metrics.setClusterState({ cluster: cluster(['a', 'b']), draining: [{ serverId: 'b', serverName: 'server_b' }], perfWarnings: [] });
    const first = await render(metrics);
    expect(first.series('rethinkdb_manager_server_primaries')).toEqual([
      { labels: { server: 'server_a' }, value: 1 }, { labels: { server: 'server_b' }, value: 1 },
    ]);
    expect(first.series('rethinkdb_manager_server_draining')).toEqual([
      { labels: { server: 'server_b' }, value: 1 }, { labels: { server: 'server_a' }, value: 0 },
    ]);
    metrics.setClusterState({ cluster: cluster(['a']), draining: [], perfWarnings: [] });
    const second = await render(metrics);
    expect(second.series('rethinkdb_manager_server_primaries')).toEqual([{ labels: { server: 'server_a' }, value: 2 }]);
    expect(second.series('rethinkdb_manager_server_replicas')).toEqual([{ labels: { server: 'server_a' }, value: 2 }]);
    expect(second.series('rethinkdb_manager_server_draining')).toEqual([{ labels: { server: 'server_a' }, value: 0 }]);
    expect(second.value('rethinkdb_manager_draining_servers')).toBe(0);
  });

  test('when a poll has a pod with no CPU limit or no node metrics, then only the signals it has are exported', async () => {
    const metrics = createMetrics();
    metrics.recordPoll({
      evaluation: { samples: [{ pod: 'p-0', own: null, interference: 0.25 }, { pod: 'p-1', own: 0.5, interference: null }], hot: [] },
      decisions: [{ type: 'scale-out', to: 5 }, { type: 'raise', pod: 'p-1', error: 'data store down' }],
    });
    const s = await render(metrics);
    expect(s.series('rethinkdb_manager_pod_utilization_ratio')).toEqual([
      { labels: { pod: 'p-0', signal: 'interference' }, value: 0.25 }, { labels: { pod: 'p-1', signal: 'own' }, value: 0.5 },
    ]);
    expect(s.value('rethinkdb_manager_monitor_decisions_total', { decision: 'scale-out', outcome: 'ok' })).toBe(1);
    expect(s.value('rethinkdb_manager_monitor_decisions_total', { decision: 'raise', outcome: 'error' })).toBe(1);
  });
});

describe('label values', () => {
  test.each([
    [hookActor('prestop', 'rethinkdb-1'), 'hook:prestop'],
    [hookActor('poststart', 'rethinkdb-12'), 'hook:poststart'],
    [MONITOR_ACTOR, 'monitor'],
    [managerActor('expiry'), 'manager:expiry'],
    [managerActor('reconcile'), 'manager:reconcile'],
    ['operator', 'operator'],
    [hookActor('prestop', 'rethinkdb-2', callerActor({ username: 'system:serviceaccount:rethinkdb:rethinkdb', pod: 'rethinkdb-2' })), 'hook:prestop'],
    [callerActor({ username: 'system:serviceaccount:rethinkdb:rethinkdb', pod: 'rethinkdb-2' }), 'system:serviceaccount:rethinkdb:rethinkdb'],
    [callerActor({ username: 'system:serviceaccount:rethinkdb:rethinkdb-manager-operator' }), 'system:serviceaccount:rethinkdb:rethinkdb-manager-operator'],
    [undefined, 'unknown'],
    ['', 'unknown'],
  ])('when the actor is %j, then its label is %j (the pod a hook names is left out)', (actor, label) => {
    expect(actorLabel(actor)).toBe(label);
  });

  test.each([
    ['prestop', 200, { outcome: 'completed' }, 'completed'],
    ['prestop', 200, { outcome: 'partial' }, 'partial'],
    ['prestop', 504, { error: 'DEADLINE_EXCEEDED' }, 'deadline_exceeded'],
    ['prestop', 503, { error: 'DATA_STORE_UNAVAILABLE' }, 'data_store_unavailable'],
    ['prestop', 502, undefined, 'http_502'],
    ['prestop', null, undefined, 'aborted'],
    ['poststart', 202, { repeated: false }, 'accepted'],
    ['poststart', 202, { repeated: true }, 'repeated'],
    ['perfwarning', 200, { pods: [{ server: 'rethinkdb_1', outcome: 'completed' }] }, 'raised'],
    ['perfwarning', 200, { pods: [{ server: null, outcome: 'nothing_to_do' }] }, 'nothing_to_do'],
    ['perfwarning_end', 200, { ended: true }, 'ended'],
    ['perfwarning_end', 404, { error: 'NOT_FOUND' }, 'not_found'],
  ])('when %s is answered %j with %j, then its outcome is %j', (hook, status, body, outcome) => {
    expect(hookOutcome(hook, status, body)).toBe(outcome);
  });
});
