// What a SERVER or POD argument of the CLI names, looked up in GET /v1/cluster's answer (shapes as ClusterView in
// src/routes/response-schemas.js): a server or the pod that runs it, both ways, and a clear error for anything else.

import { LookupError, resolveSubject } from '../../src/cli/names.js';

const server = (name, extra = {}) => ({
  name, id: `id-${name}`, connected: true, hostname: name.replace('_', '-'), pod: name.replace('_', '-'), node: 'node-0', ...extra,
});
const podOf = (pod) => ({ pod, node: 'node-0', hostname: pod, phase: 'Running', ready: true });

// The manager listed the pods: each server has `pod` (null when none is known).
const listed = {
  servers: [server('rethinkdb_0'), server('rethinkdb_1'), server('db_gone', { connected: false, hostname: null, pod: null, node: null })],
  pods: [podOf('rethinkdb-0'), podOf('rethinkdb-1'), podOf('rethinkdb-5')],
  perfWarnings: [{ serverId: 'id-x', pod: 'rethinkdb-7' }],
};
// The manager did not list the pods (no Kubernetes API, or it failed): servers have no `pod`, only their hostname.
const unlisted = {
  servers: [{ name: 'rethinkdb_0', id: 'a', connected: true, hostname: 'rethinkdb-0' }, { name: 'rethinkdb_1', id: 'b', connected: false, hostname: null }],
  pods: null,
  podsError: 'Kubernetes did not answer',
  perfWarnings: [],
};
// Pods named unlike their servers (an override, or another naming): only the manager's answer can map them.
const renamed = { servers: [server('alpha', { hostname: 'store-a-0', pod: 'store-a-0' })], pods: [podOf('store-a-0')], perfWarnings: [] };

describe('resolveSubject', () => {
  test.each([
    ['a server, where a server is taken', { kind: 'server', name: 'rethinkdb_1' }, listed, { name: 'rethinkdb_1', line: null }],
    ['a pod, where a server is taken', { kind: 'server', name: 'rethinkdb-1' }, listed, { name: 'rethinkdb_1', line: 'pod rethinkdb-1 -> server rethinkdb_1' }],
    ['a pod named unlike its server', { kind: 'server', name: 'store-a-0' }, renamed, { name: 'alpha', line: 'pod store-a-0 -> server alpha' }],
    ['a pod, with no pods listed (its server\'s hostname)', { kind: 'server', name: 'rethinkdb-0' }, unlisted, { name: 'rethinkdb_0', line: 'pod rethinkdb-0 -> server rethinkdb_0' }],
    ['a disconnected server', { kind: 'server', name: 'db_gone' }, listed, { name: 'db_gone', line: null }],
    ['a pod, where a pod is taken', { kind: 'pod', name: 'rethinkdb-1' }, listed, { name: 'rethinkdb-1', line: null }],
    ['a pod that runs no server yet, where a pod is taken', { kind: 'pod', name: 'rethinkdb-5' }, listed, { name: 'rethinkdb-5', line: null }],
    ['the pod of a warning whose pod is gone', { kind: 'pod', name: 'rethinkdb-7' }, listed, { name: 'rethinkdb-7', line: null }],
    ['a server, where a pod is taken', { kind: 'pod', name: 'rethinkdb_1' }, listed, { name: 'rethinkdb-1', line: 'server rethinkdb_1 -> pod rethinkdb-1' }],
    ['a server named unlike its pod, where a pod is taken', { kind: 'pod', name: 'alpha' }, renamed, { name: 'store-a-0', line: 'server alpha -> pod store-a-0' }],
    ['a server, with no pods listed', { kind: 'pod', name: 'rethinkdb_0' }, unlisted, { name: 'rethinkdb-0', line: 'server rethinkdb_0 -> pod rethinkdb-0' }],
  ])('when the argument is %s, then it resolves to what the request takes', (_, subject, cluster, expected) => {
    expect(resolveSubject(subject, cluster)).toEqual(expected);
  });

  test.each([
    ['neither a server nor a pod', { kind: 'server', name: 'rethinkdb_9' }, listed, 'SERVER_NOT_FOUND',
      '"rethinkdb_9" is neither a server nor the pod of one; servers: rethinkdb_0, rethinkdb_1, db_gone; pods: rethinkdb-0, rethinkdb-1, rethinkdb-5'],
    ['a name only rewriting would map (rethinkdb-1 for rethinkdb_1 when the pods are named otherwise)', { kind: 'server', name: 'alpha-0' }, renamed, 'SERVER_NOT_FOUND',
      '"alpha-0" is neither a server nor the pod of one; servers: alpha; pods: store-a-0'],
    ['a pod that runs no server', { kind: 'server', name: 'rethinkdb-5' }, listed, 'SERVER_NOT_FOUND',
      'pod rethinkdb-5 runs no RethinkDB server the manager sees (not joined yet, or disconnected); servers: rethinkdb_0, rethinkdb_1, db_gone; pods: rethinkdb-0, rethinkdb-1, rethinkdb-5'],
    ['a pod, with no pods listed and no server of that hostname', { kind: 'server', name: 'rethinkdb-1' }, unlisted, 'SERVER_NOT_FOUND',
      '"rethinkdb-1" is neither a server nor the pod of one; servers: rethinkdb_0, rethinkdb_1; pods: rethinkdb-0'],
    ['neither a pod nor a server, where a pod is taken', { kind: 'pod', name: 'rethinkdb-9' }, listed, 'POD_NOT_FOUND',
      '"rethinkdb-9" is neither a pod nor a server; servers: rethinkdb_0, rethinkdb_1, db_gone; pods: rethinkdb-0, rethinkdb-1, rethinkdb-5'],
    ['a server with no known pod, where a pod is taken', { kind: 'pod', name: 'db_gone' }, listed, 'POD_NOT_FOUND',
      "server db_gone has no pod the manager knows: it is disconnected and no pod is known for it; give the pod's name"],
    ['a disconnected server, with no pods listed', { kind: 'pod', name: 'rethinkdb_1' }, unlisted, 'POD_NOT_FOUND',
      "server rethinkdb_1 has no pod the manager knows: the manager lists no pods (Kubernetes did not answer); give the pod's name"],
    ['a server name that is also another server\'s pod', { kind: 'server', name: 'db' }, { servers: [server('db', { pod: 'x' }), server('other', { pod: 'db' })], pods: [podOf('x'), podOf('db')] }, 'AMBIGUOUS_NAME',
      '"db" is server db and also the pod of server other; give the other server\'s name to mean it'],
  ])('when the argument is %s, then it is an error that says so', (_, subject, cluster, code, message) => {
    let error;
    try { resolveSubject(subject, cluster); } catch (e) { error = e; }
    expect(error).toBeInstanceOf(LookupError);
    expect({ code: error.code, message: error.message }).toEqual({ code, message });
  });

  test('when a restarted server is listed twice under one pod, then the connected one is meant', () => {
    const cluster = { servers: [server('old', { connected: false }), server('new')].map((s) => ({ ...s, pod: 'rethinkdb-3' })), pods: [podOf('rethinkdb-3')] };
    expect(resolveSubject({ kind: 'server', name: 'rethinkdb-3' }, cluster)).toEqual({ name: 'new', line: 'pod rethinkdb-3 -> server new' });
  });

  test('when the answer has no server list, then it is an error rather than a guess', () => {
    expect(() => resolveSubject({ kind: 'server', name: 'x' }, { error: 'x' })).toThrow(LookupError);
  });
});
