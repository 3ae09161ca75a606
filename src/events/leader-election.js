// The elector: tries to take or renew the Lease every retry period and says when this replica starts and stops
// leading. The decisions are pure (src/policy/leadership.js); this only reads and writes the Lease and runs them.
// isLeading() is the fence every write to RethinkDB and Kubernetes goes through: it turns false on this replica's own
// clock a renew deadline after the last renewal that succeeded, whether or not the API server can be reached.

import { appError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import {
  decideLeaseStep, leaderOf, leadershipValid, leaseRelease, leaseWrite,
} from '../policy/leadership.js';

// timings: { leaseDurationMs, renewDeadlineMs, retryPeriodMs }. addresses: { http, webhook } (where followers relay).
// onStartedLeading() and onStoppedLeading(reason) are called in turn, never overlapping in the same direction.
export function createLeaderElector({
  kube, leaseName, identity, addresses, timings, clock, logger, onStartedLeading = () => {}, onStoppedLeading = () => {},
}) {
  const log = logger.child({ module: 'leader-election', identity });
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timings;
  let leading = false;
  let renewedAt = null;
  let observed = null;
  let leader = null;
  let lastError = null;
  let stopped = false;
  let loop = null;
  let lossTimer = null;
  let transitions = 0;
  const waiters = new Set();

  const isLeading = () => leading && leadershipValid({ renewedAt, now: clock.now(), renewDeadlineMs });

  // The fence: throws NOT_LEADER unless this replica leads now. `what` names the write refused.
  function assertLeading(what) {
    if (isLeading()) return;
    throw appError('notLeader', { identity, what });
  }

  function notify() {
    for (const wake of waiters) wake();
  }

  function startLeading() {
    leading = true;
    transitions += 1;
    log.info({ lease: leaseName }, 'became the leader');
    notify();
    Promise.resolve().then(onStartedLeading).catch((err) => log.error({ err: err.message }, 'start of leadership failed'));
  }

  function stopLeading(reason) {
    if (!leading) return;
    leading = false;
    clearTimeout(lossTimer);
    log.warn({ reason }, 'stopped leading: no more writes from this replica');
    notify();
    Promise.resolve().then(() => onStoppedLeading(reason)).catch((err) => log.error({ err: err.message }, 'end of leadership failed'));
  }

  // One round: read the Lease, decide, write if the decision says so. Resolves with whether this replica holds the
  // Lease and when to try again.
  async function attempt() {
    const sentAt = clock.now();
    const lease = await kube.getLease(leaseName);
    const decision = decideLeaseStep({ lease, identity, now: clock.now(), observed, leaseDurationMs, retryPeriodMs });
    observed = decision.observed;
    const result = (held) => ({ held, retryInMs: decision.retryInMs });
    if (decision.step === 'follow') {
      leader = leaderOf(lease);
      return result(false);
    }
    // Released (or never held): nobody leads until a write says who does, so that nothing is relayed meanwhile to a
    // leader that gave the Lease up. Expired: its holder, until then.
    if (decision.step !== 'renew') leader = leaderOf(lease);
    const written = await kube.writeLease(leaseName, {
      resourceVersion: lease?.resourceVersion ?? null,
      ...leaseWrite({ lease, step: decision.step, identity, now: clock.now(), leaseDurationMs, addresses }),
    });
    if (!written) return result(false); // another replica wrote it first; read again next round
    observed = { version: written.resourceVersion, at: clock.now() };
    leader = leaderOf(written);
    renewedAt = sentAt;
    if (decision.step !== 'renew') log.info({ step: decision.step, previous: decision.holder }, 'lease taken');
    return result(true);
  }

  // One round and what follows from it; resolves with when to try again.
  async function round() {
    let outcome = { held: false, retryInMs: retryPeriodMs };
    try {
      // A round that hangs must not outlive the leadership it is renewing.
      outcome = await withinMs(attempt(), renewDeadlineMs, () => appError('leaseRoundSlow', { ms: renewDeadlineMs }));
      lastError = null;
    } catch (err) {
      lastError = err.message;
      log.warn({ err: err.message, leading }, 'lease round failed');
    }
    if (stopped) return outcome.retryInMs;
    if (outcome.held) {
      clearTimeout(lossTimer);
      lossTimer = setTimeout(() => { if (!isLeading()) stopLeading(`the Lease was not renewed within ${renewDeadlineMs} ms`); }, Math.max(0, renewedAt + renewDeadlineMs - clock.now()));
      lossTimer.unref?.();
      if (!leading) startLeading();
    } else if (leading && !isLeading()) {
      stopLeading(lastError ? `the Lease could not be renewed (${lastError})` : 'another replica holds the Lease');
    } else if (leading && leader?.identity && leader.identity !== identity) {
      stopLeading(`the Lease is held by ${leader.identity}`);
    }
    notify();
    return outcome.retryInMs;
  }

  let current = null;
  async function run() {
    while (!stopped) {
      current = round();
      const retryInMs = await current;
      if (stopped) break;
      // No jitter (client-go's followers have some): two replicas that try at once are ordered by the Lease's
      // resourceVersion, and the loser follows.
      await clock.sleep(retryInMs);
    }
  }

  // Resolves when something changed (a round ended, leadership started or stopped), or after timeoutMs.
  function changed(timeoutMs) {
    return new Promise((resolve) => {
      const wake = () => { waiters.delete(wake); clearTimeout(timer); resolve(); };
      const timer = setTimeout(wake, Math.max(0, timeoutMs));
      waiters.add(wake);
    });
  }

  return {
    identity,
    start() { if (!loop) loop = run(); return loop; },
    isLeading,
    assertLeading,
    // Who leads as this replica last saw the Lease (this replica itself included).
    leader: () => (isLeading() ? { identity, ...addresses, self: true } : leader && { ...leader, self: leader.identity === identity }),
    changed,
    view: () => ({
      enabled: true, identity, leading: isLeading(), leader: isLeading() ? identity : (leader?.identity ?? null), lease: leaseName,
      leaderAddress: isLeading() ? addresses.http : (leader?.http ?? null), timings, transitions, lastError,
    }),
    // Shutdown: stop renewing and give the Lease up if this replica holds it, so a follower takes it at its next try
    // instead of waiting a lease duration. The round in flight is waited for first (it lasts at most a renew
    // deadline): a renewal landing after the release was read would make the release lose.
    async stop({ release = true } = {}) {
      stopped = true;
      clearTimeout(lossTimer);
      stopLeading('shutting down');
      await current?.catch(() => {});
      if (!release) return { released: false };
      try {
        const lease = await kube.getLease(leaseName);
        if (lease?.holderIdentity !== identity) return { released: false };
        const done = await kube.writeLease(leaseName, { resourceVersion: lease.resourceVersion, ...leaseRelease({ lease, now: clock.now() }) });
        log.info({ released: Boolean(done) }, 'lease given up');
        return { released: Boolean(done) };
      } catch (err) {
        log.warn({ err: err.message }, 'lease not given up; a follower takes it when it expires');
        return { released: false, error: err.message };
      }
    },
  };
}

// No election (the sandbox, no Kubernetes API, or LEADER_ELECTION_ENABLED=false): this replica always leads.
export function soleLeader() {
  return {
    identity: null,
    start: async () => {},
    isLeading: () => true,
    assertLeading: () => {},
    leader: () => ({ self: true }),
    changed: (timeoutMs) => new Promise((resolve) => { setTimeout(resolve, timeoutMs); }),
    view: () => ({ enabled: false, leading: true }),
    stop: async () => ({ released: false }),
  };
}

// The data store and the Kubernetes port with every write behind the fence: a replica that does not lead sends no
// table config, heartbeat setting, annotation, Event or scale change, whatever code path asks for it. Reads pass.
export function fenceWrites({ store, kube, fence }) {
  // A proxy, not a copy: the port stays the same object underneath (what a test changes on it, the manager sees).
  const guarded = (target, writes) => (target ? new Proxy(target, {
    get(object, name, receiver) {
      const value = Reflect.get(object, name, receiver);
      if (typeof value !== 'function' || !Object.hasOwn(writes, name)) return value;
      return (...args) => {
        try {
          fence(writes[name]);
        } catch (err) {
          return Promise.reject(err);
        }
        return value.apply(object, args);
      };
    },
  }) : target);
  return {
    store: guarded(store, {
      writeTableShards: 'write a table config', writeHeartbeatTimeout: 'change the heartbeat timeout',
      createProbeTable: 'create a disk probe table', placeProbeTable: 'place a disk probe table', dropProbeTable: 'drop a disk probe table',
    }),
    kube: guarded(kube, {
      annotatePod: 'write pod annotations', createPodEvent: 'create Events', patchStatefulSetScale: 'scale the StatefulSet', setPodCondition: 'set a pod condition',
    }),
  };
}
