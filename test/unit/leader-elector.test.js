// The elector's view of who leads (src/events/leader-election.js), round by round, on a Lease in memory: a replica
// that finds the Lease released and loses the race to take it must not go on naming the old leader, or its relay
// sends requests to a replica that has given the Lease up and is about to close its port.

import { createLeaderElector } from '../../src/events/leader-election.js';
import { createLogger } from '../../src/logger.js';

const logger = createLogger({ level: 'silent' });

// A clock whose sleeps end only when the test says so: one elector round per next() (a next() before the elector
// sleeps ends its sleep at once).
function steppedClock() {
  let now = Date.parse('2026-11-25T08:00:00Z');
  const pending = [];
  let credit = 0;
  return {
    now: () => now,
    sleep: (ms) => new Promise((resolve) => {
      const wake = () => { now += ms; resolve(); };
      if (credit > 0) { credit -= 1; wake(); } else pending.push(wake);
    }),
    next: () => { const wake = pending.shift(); if (wake) wake(); else credit += 1; },
  };
}

describe('the elector\'s view of the leader', () => {
  test('when the Lease is released and another replica writes it first, then this replica names no leader until it reads who holds it', async () => {
    let lease = {
      holderIdentity: 'old', resourceVersion: '1', leaseDurationSeconds: 15, renewTime: null, leaseTransitions: 0,
      annotations: { 'rethinkdb-manager.io/leader-http': 'http://198.18.0.1:8080' },
    };
    const kube = { getLease: async () => lease, writeLease: async () => null }; // every write loses the race
    const clock = steppedClock();
    const elector = createLeaderElector({
      kube, leaseName: 'rethinkdb-manager', identity: 'b', addresses: { http: 'http://198.18.0.2:8080' },
      timings: { leaseDurationMs: 15000, renewDeadlineMs: 10000, retryPeriodMs: 2000 }, clock, logger,
    });
    elector.start();
    await elector.changed(1000);
    expect(elector.leader()).toMatchObject({ identity: 'old', http: 'http://198.18.0.1:8080', self: false });
    lease = { ...lease, holderIdentity: null, resourceVersion: '2', annotations: {} };
    clock.next();
    await elector.changed(1000);
    expect(elector.leader()).toBeNull();
    lease = { ...lease, holderIdentity: 'c', resourceVersion: '3', annotations: { 'rethinkdb-manager.io/leader-http': 'http://198.18.0.3:8080' } };
    clock.next();
    await elector.changed(1000);
    expect(elector.leader()).toMatchObject({ identity: 'c', http: 'http://198.18.0.3:8080' });
    await elector.stop({ release: false });
  });
});
