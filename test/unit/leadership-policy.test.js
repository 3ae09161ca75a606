import {
  LEADER_ANNOTATIONS, decideLeaseStep, leaderOf, leadershipValid, leaseRelease, leaseWrite, lingerAfterReleaseMs, relayRoute, timingProblems,
} from '../../src/policy/leadership.js';

const timings = { leaseDurationMs: 15000, renewDeadlineMs: 10000, retryPeriodMs: 2000 };
const lease = (over = {}) => ({
  resourceVersion: '10', holderIdentity: 'b', leaseDurationSeconds: 15, acquireTime: null, renewTime: null, leaseTransitions: 0, annotations: {}, ...over,
});
const decide = (l, now, observed = null, identity = 'a') => decideLeaseStep({ lease: l, identity, now, observed, leaseDurationMs: timings.leaseDurationMs });

describe('decideLeaseStep', () => {
  test('when there is no Lease, then create it', () => {
    expect(decide(null, 0).step).toBe('create');
  });

  test('when this replica holds the Lease, then renew it', () => {
    expect(decide(lease({ holderIdentity: 'a' }), 0).step).toBe('renew');
  });

  test('when the Lease was released (no holder), then take it at once', () => {
    expect(decide(lease({ holderIdentity: null }), 0)).toMatchObject({ step: 'acquire', holder: null });
  });

  test('when another replica holds it, then follow until it has looked unchanged here for a lease duration, judged on this clock from when this replica first saw that version', () => {
    const first = decide(lease(), 1000);
    expect(first).toMatchObject({ step: 'follow', holder: 'b', expiresInMs: 15000, observed: { version: '10', at: 1000 } });
    const later = decide(lease(), 15999, first.observed);
    expect(later).toMatchObject({ step: 'follow', expiresInMs: 1 });
    expect(decide(lease(), 16000, later.observed)).toMatchObject({ step: 'acquire', holder: 'b' });
  });

  test('when the holder renews (a new resourceVersion), then the wait starts again from that sighting, whatever the renewTime written by the holder\'s clock says', () => {
    const first = decide(lease({ renewTime: '2000-01-01T00:00:00.000000Z' }), 1000);
    const renewed = decide(lease({ resourceVersion: '11', renewTime: '2000-01-01T00:00:00.000000Z' }), 14000, first.observed);
    expect(renewed).toMatchObject({ step: 'follow', observed: { version: '11', at: 14000 }, expiresInMs: 15000 });
  });

  test('when the holder wrote its own lease duration, then that one is waited, not this replica\'s', () => {
    expect(decide(lease({ leaseDurationSeconds: 40 }), 0).expiresInMs).toBe(40000);
  });
});

describe('leaseWrite and leaseRelease', () => {
  const addresses = { http: 'http://198.18.0.5:8080', webhook: 'https://198.18.0.5:8443' };

  test('when a replica takes the Lease over from another holder, then the transition is counted, acquire and renew times are now (MicroTime), and its addresses are annotated', () => {
    const now = Date.parse('2026-11-23T10:00:00.123Z');
    const written = leaseWrite({ lease: lease({ leaseTransitions: 3 }), step: 'acquire', identity: 'a', now, leaseDurationMs: 15000, addresses });
    expect(written).toEqual({
      spec: {
        holderIdentity: 'a', leaseDurationSeconds: 15, acquireTime: '2026-11-23T10:00:00.123000Z', renewTime: '2026-11-23T10:00:00.123000Z', leaseTransitions: 4,
      },
      annotations: { [LEADER_ANNOTATIONS.http]: addresses.http, [LEADER_ANNOTATIONS.webhook]: addresses.webhook },
    });
  });

  test('when the holder renews, then the acquire time and the transitions stay', () => {
    const held = lease({ holderIdentity: 'a', acquireTime: '2026-11-23T09:00:00.000000Z', leaseTransitions: 2 });
    const { spec } = leaseWrite({ lease: held, step: 'renew', identity: 'a', now: 0, leaseDurationMs: 15000, addresses });
    expect(spec).toMatchObject({ acquireTime: '2026-11-23T09:00:00.000000Z', renewTime: '1970-01-01T00:00:00.000000Z', leaseTransitions: 2 });
  });

  test('when the first replica creates the Lease, or takes a released one, then no transition is counted', () => {
    expect(leaseWrite({ lease: null, step: 'create', identity: 'a', now: 0, leaseDurationMs: 15000, addresses }).spec.leaseTransitions).toBe(0);
    expect(leaseWrite({ lease: lease({ holderIdentity: null, leaseTransitions: 5 }), step: 'acquire', identity: 'a', now: 0, leaseDurationMs: 15000, addresses }).spec.leaseTransitions).toBe(5);
  });

  test('when the holder gives the Lease up, then it has no holder and no addresses, and the rest stays', () => {
    const held = lease({ holderIdentity: 'a', leaseTransitions: 2, acquireTime: 'x' });
    expect(leaseRelease({ lease: held, now: 0 })).toEqual({
      spec: { holderIdentity: null, leaseDurationSeconds: 1, acquireTime: 'x', renewTime: '1970-01-01T00:00:00.000000Z', leaseTransitions: 2 },
      annotations: { [LEADER_ANNOTATIONS.http]: null, [LEADER_ANNOTATIONS.webhook]: null },
    });
  });

  test('leaderOf reads who leads and where, or null for a released Lease', () => {
    expect(leaderOf(lease({ annotations: { [LEADER_ANNOTATIONS.http]: 'http://x:1' } }))).toMatchObject({ identity: 'b', http: 'http://x:1', webhook: null });
    expect(leaderOf(lease({ holderIdentity: null }))).toBeNull();
    expect(leaderOf(null)).toBeNull();
  });
});

describe('the fence: a leader stops acting before anyone may take over', () => {
  test('leadershipValid is true for less than a renew deadline after the last renewal sent, and never before one', () => {
    expect(leadershipValid({ renewedAt: 1000, now: 10999, renewDeadlineMs: 10000 })).toBe(true);
    expect(leadershipValid({ renewedAt: 1000, now: 11000, renewDeadlineMs: 10000 })).toBe(false);
    expect(leadershipValid({ renewedAt: null, now: 0, renewDeadlineMs: 10000 })).toBe(false);
  });

  test('when a leader renews at t and a follower first sees that renewal at t or later, then the follower takes over at least (lease - renew deadline) after the leader stopped acting', () => {
    for (const sawAfterMs of [0, 1, 1999]) {
      const renewedAt = 5000;
      const seen = decide(lease(), renewedAt + sawAfterMs);
      let takeover = renewedAt;
      while (decide(lease(), takeover, seen.observed).step !== 'acquire') takeover += 1;
      let lastAct = renewedAt;
      while (leadershipValid({ renewedAt, now: lastAct + 1, renewDeadlineMs: timings.renewDeadlineMs })) lastAct += 1;
      expect(takeover - lastAct).toBeGreaterThanOrEqual(timings.leaseDurationMs - timings.renewDeadlineMs);
    }
  });

  test('lingerAfterReleaseMs: a retry period and a second with an election, so that every follower has read the released Lease; nothing without one', () => {
    expect(lingerAfterReleaseMs({ active: true, retryPeriodMs: 2000 })).toBe(3000);
    expect(lingerAfterReleaseMs({ active: true, retryPeriodMs: 1000 })).toBe(2000);
    expect(lingerAfterReleaseMs({ active: false, retryPeriodMs: 2000 })).toBe(0);
  });

  test('timingProblems refuses a renew deadline that reaches the lease duration, and a retry period that leaves no second try', () => {
    expect(timingProblems(timings)).toEqual([]);
    expect(timingProblems({ ...timings, renewDeadlineMs: 15000 })).toEqual(['LEADER_ELECTION_RENEW_DEADLINE_SECONDS must be below LEADER_ELECTION_LEASE_DURATION_SECONDS']);
    expect(timingProblems({ ...timings, retryPeriodMs: 9000 })).toEqual(['LEADER_ELECTION_RETRY_PERIOD_SECONDS x 1.2 must be below LEADER_ELECTION_RENEW_DEADLINE_SECONDS']);
  });
});

describe('when to try again, and where a request goes', () => {
  test('a follower tries again at the Lease\'s expiry when it comes before a retry period, else after a retry period', () => {
    const d = (l, now, observed) => decideLeaseStep({ lease: l, identity: 'a', now, observed, leaseDurationMs: 15000, retryPeriodMs: 2000 });
    const first = d(lease(), 0);
    expect(first.retryInMs).toBe(2000);
    expect(d(lease(), 14000, first.observed).retryInMs).toBe(1001);
    expect(d(lease({ holderIdentity: 'a' }), 0).retryInMs).toBe(2000);
  });

  const other = { identity: 'b', http: 'http://b:8080', webhook: 'https://b:8443', self: false };
  const self = { identity: 'a', http: 'http://a:8080', webhook: 'https://a:8443', self: true };

  test.each([
    ['this replica serves it (body unread)', { leader: self, served: true }, { to: 'here' }],
    ['this replica serves it, body already read: to itself', { leader: self, served: true, bodyRead: true }, { to: 'relay', target: 'http://a:8080' }],
    ['another replica leads', { leader: other, served: false }, { to: 'relay', target: 'http://b:8080' }],
    ['another replica leads, a webhook review', { leader: other, served: false, address: 'webhook' }, { to: 'relay', target: 'https://b:8443' }],
    ['the leader serves no webhook', { leader: { ...other, webhook: null }, served: false, address: 'webhook' }, { to: 'wait', loading: false }],
    ['nobody leads', { leader: null, served: false }, { to: 'wait', loading: false }],
    ['this replica leads but is loading its state', { leader: self, served: false }, { to: 'wait', loading: true }],
  ])('relayRoute: %s', (_, input, expected) => {
    expect(relayRoute(input)).toEqual(expected);
  });
});
