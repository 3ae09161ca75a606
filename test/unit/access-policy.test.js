// The access rules, table by table: which requests need what, and who gets through.

import { actorLabel, callerActor, describeActor } from '../../src/audit/actor.js';
import {
  authorize, classifyRequest, identityFromReview, rolesOf,
} from '../../src/auth/access-policy.js';

const hookPod = (pod) => ({ username: 'system:serviceaccount:rethinkdb:rethinkdb', pod, roles: { hook: true, operator: false } });
const operator = { username: 'alice', pod: null, roles: { hook: false, operator: true } };
const stranger = { username: 'system:serviceaccount:default:default', pod: null, roles: { hook: false, operator: false } };

describe('classifyRequest', () => {
  test.each([
    ['GET', '/livez', 'open'],
    ['GET', '/readyz', 'open'],
    ['POST', '/v1/hooks/prestop', 'hook'],
    ['DELETE', '/v1/hooks/perfwarning', 'hook'],
    ['POST', '/v1/actions/rebalance-primaries', 'operator'],
    ['GET', '/v1/actions/rebalance-primaries', 'operator'],
    ['GET', '/v1/cluster', 'read'],
    ['GET', '/metrics', 'read'],
    ['GET', '/', 'open'],
    ['HEAD', '/v1/events', 'read'],
    ['POST', '/v1/sandbox/scale', 'operator'],
    ['GET', '/v1/sandbox/events', 'read'],
    ['PUT', '/anything', 'operator'],
  ])('when %s %s, then it needs %s access', (method, path, kind) => {
    expect(classifyRequest(method, path)).toBe(kind);
  });
});

describe('authorize', () => {
  test.each([
    ['a probe, anonymous', { kind: 'open', identity: null, protectReads: true }, true, null],
    ['a read, anonymous, reads open', { kind: 'read', identity: null }, true, null],
    ['a read, anonymous, reads protected', { kind: 'read', identity: null, protectReads: true }, false, 'UNAUTHENTICATED'],
    ['a read by a hook caller, reads protected', { kind: 'read', identity: hookPod('rethinkdb-1'), protectReads: true }, true, null],
    ['a read by a stranger, reads protected', { kind: 'read', identity: stranger, protectReads: true }, false, 'FORBIDDEN'],
    ['an action, anonymous', { kind: 'operator', identity: null }, false, 'UNAUTHENTICATED'],
    ['an action by an operator', { kind: 'operator', identity: operator }, true, null],
    ['an action by a pod', { kind: 'operator', identity: hookPod('rethinkdb-1') }, false, 'FORBIDDEN'],
    ['a hook, anonymous', { kind: 'hook', identity: null, target: { pod: 'rethinkdb-1' } }, false, 'UNAUTHENTICATED'],
    ['a pod\'s hook for itself', { kind: 'hook', identity: hookPod('rethinkdb-1'), target: { pod: 'rethinkdb-1' } }, true, null],
    ['a pod\'s hook for another pod', { kind: 'hook', identity: hookPod('rethinkdb-1'), target: { pod: 'rethinkdb-2' } }, false, 'FORBIDDEN'],
    ['a pod\'s hook naming two pods', { kind: 'hook', identity: hookPod('rethinkdb-1'), target: { pod: ['rethinkdb-1', 'rethinkdb-2'] } }, false, 'FORBIDDEN'],
    ['a pod\'s hook naming no pod', { kind: 'hook', identity: hookPod('rethinkdb-1'), target: {} }, false, 'FORBIDDEN'],
    ['a pod\'s hook for a node', { kind: 'hook', identity: hookPod('rethinkdb-1'), target: { node: 'node-1' } }, false, 'FORBIDDEN'],
    ['a hook with a token bound to no pod', { kind: 'hook', identity: hookPod(null), target: { pod: 'rethinkdb-1' } }, false, 'FORBIDDEN'],
    ['a hook by a stranger', { kind: 'hook', identity: stranger, target: { pod: 'rethinkdb-1' } }, false, 'FORBIDDEN'],
    ['a hook by an operator for any pod', { kind: 'hook', identity: operator, target: { pod: 'rethinkdb-2' } }, true, null],
    ['a node warning by an operator', { kind: 'hook', identity: operator, target: { node: 'node-1' } }, true, null],
  ])('when %s, then allow is %s (%s)', (name, input, allow, code) => {
    const verdict = authorize(input);
    expect(verdict.allow).toBe(allow);
    if (!allow) {
      expect(verdict.code).toBe(code);
      expect(verdict.message.length).toBeGreaterThan(20);
    }
  });

  test('when a pod acts on another pod, then the message names both', () => {
    expect(authorize({ kind: 'hook', identity: hookPod('rethinkdb-1'), target: { pod: 'rethinkdb-2' } }).message)
      .toBe('pod rethinkdb-1 may only act on itself, not on "rethinkdb-2"');
  });
});

describe('rolesOf', () => {
  const auth = { hookSubjects: ['system:serviceaccount:rethinkdb:rethinkdb'], operatorSubjects: ['alice', 'group:dba'] };
  test.each([
    [{ username: 'system:serviceaccount:rethinkdb:rethinkdb', groups: [] }, { hook: true, operator: false }],
    [{ username: 'alice', groups: [] }, { hook: false, operator: true }],
    [{ username: 'bob', groups: ['dba'] }, { hook: false, operator: true }],
    [{ username: 'bob', groups: ['group:dba', 'dbas'] }, { hook: false, operator: false }],
    [{ username: 'system:serviceaccount:other:rethinkdb', groups: [] }, { hook: false, operator: false }],
  ])('when the user is %j, then the roles are %j', (user, roles) => {
    expect(rolesOf(user, auth)).toEqual(roles);
  });
});

describe('identityFromReview', () => {
  const auth = { audience: 'rethinkdb-manager', namespace: 'rethinkdb' };
  test('when the review is authenticated for our audience, then the pod comes from user.extra', () => {
    const identity = identityFromReview({
      authenticated: true, username: 'system:serviceaccount:rethinkdb:rethinkdb', groups: ['g'], audiences: ['rethinkdb-manager'], extra: { 'authentication.kubernetes.io/pod-name': ['rethinkdb-2'] },
    }, auth);
    expect(identity).toEqual({ username: 'system:serviceaccount:rethinkdb:rethinkdb', groups: ['g'], pod: 'rethinkdb-2' });
  });

  test('when the token is bound to a pod of the same name in another namespace, then it binds no pod of ours', () => {
    const identity = identityFromReview({
      authenticated: true, username: 'system:serviceaccount:other:rethinkdb', audiences: ['rethinkdb-manager'], extra: { 'authentication.kubernetes.io/pod-name': ['rethinkdb-2'] },
    }, auth);
    expect(identity.pod).toBeNull();
  });

  test.each([
    [{ authenticated: false, error: 'invalid bearer token' }, /not accepted: invalid bearer token/],
    [{ authenticated: true, username: 'u', audiences: ['other'] }, /not for audience rethinkdb-manager \(it is for other\)/],
    [{ authenticated: true, username: 'u' }, /not for audience rethinkdb-manager \(it is for no stated audience\)/],
  ])('when the review is %j, then there is no identity and the error says why', (review, message) => {
    expect(identityFromReview(review, auth).error).toMatch(message);
  });

  test('when a token carries no pod, then the identity has pod null', () => {
    expect(identityFromReview({ authenticated: true, username: 'u', audiences: ['rethinkdb-manager'] }, auth).pod).toBeNull();
  });
});

describe('callerActor', () => {
  test.each([
    [null, 'anonymous', 'anonymous'],
    [operator, 'alice', 'alice'],
    [hookPod('rethinkdb-1'), 'system:serviceaccount:rethinkdb:rethinkdb (pod rethinkdb-1)', 'system:serviceaccount:rethinkdb:rethinkdb'],
  ])('when the identity is %j, then the actor reads %s and is labelled %s', (identity, text, label) => {
    expect(describeActor(callerActor(identity))).toBe(text);
    expect(actorLabel(callerActor(identity))).toBe(label);
  });
});
