// Leader election on a coordination.k8s.io/v1 Lease, decided as client-go's leaderelection package decides it:
// a replica takes the Lease only when it is free, released, or has looked unchanged here for a whole lease duration.
// A Lease is judged by how long it has looked unchanged on this replica's own clock (its resourceVersion changes
// with every renewal), never by comparing this clock with its holder's. Pure: the elector (src/events/leader-election.js)
// reads and writes the Lease and runs these decisions.

// Where the leader says how to reach it: the followers relay to these addresses.
export const LEADER_ANNOTATIONS = Object.freeze({
  http: 'rethinkdb-manager.io/leader-http',
  webhook: 'rethinkdb-manager.io/leader-webhook',
});

// What to do with the Lease as read (null: there is none). observed: { version, at } as this replica last saw it
// change. Returns { step, observed, holder, expiresInMs, retryInMs }:
//   create  no Lease yet; write one held by us;
//   renew   we hold it;
//   acquire it is released (no holder) or its holder has not renewed it for a lease duration: take it over;
//   follow  another replica holds it.
// retryInMs: when to try again, a retry period, or the Lease's expiry if that comes first, so that a crashed leader is
// replaced within a lease duration and one retry period of its last renewal.
export function decideLeaseStep({ lease, identity, now, observed = null, leaseDurationMs, retryPeriodMs = 2000 }) {
  const next = (decision) => ({ ...decision, retryInMs: decision.step === 'follow' ? Math.min(retryPeriodMs, decision.expiresInMs + 1) : retryPeriodMs });
  if (!lease) return next({ step: 'create', observed: null, holder: null, expiresInMs: 0 });
  const seen = observed?.version === lease.resourceVersion ? observed : { version: lease.resourceVersion, at: now };
  const holder = lease.holderIdentity || null;
  if (holder === identity) return next({ step: 'renew', observed: seen, holder, expiresInMs: null });
  if (!holder) return next({ step: 'acquire', observed: seen, holder: null, expiresInMs: 0 });
  // The holder's own duration, as it wrote it (a replica configured differently is judged by its own word).
  const durationMs = lease.leaseDurationSeconds ? lease.leaseDurationSeconds * 1000 : leaseDurationMs;
  const expiresInMs = seen.at + durationMs - now;
  if (expiresInMs > 0) return next({ step: 'follow', observed: seen, holder, expiresInMs });
  return next({ step: 'acquire', observed: seen, holder, expiresInMs: 0 });
}

// The Lease's spec after a create, renew or acquire by `identity`, and the annotations that say where it answers.
export function leaseWrite({ lease, step, identity, now, leaseDurationMs, addresses }) {
  const at = microTime(now);
  const taking = step !== 'renew';
  const transitions = lease?.leaseTransitions ?? 0;
  return {
    spec: {
      holderIdentity: identity,
      leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
      acquireTime: taking ? at : (lease.acquireTime ?? at),
      renewTime: at,
      // A transition is a change of holder, as client-go counts it (the first holder is not one).
      leaseTransitions: step === 'acquire' && lease?.holderIdentity && lease.holderIdentity !== identity ? transitions + 1 : transitions,
    },
    annotations: { [LEADER_ANNOTATIONS.http]: addresses.http ?? null, [LEADER_ANNOTATIONS.webhook]: addresses.webhook ?? null },
  };
}

// The Lease given up by its holder on shutdown: no holder, so that a follower takes it at its next try instead of
// waiting a lease duration. The addresses go with it.
export function leaseRelease({ lease, now }) {
  return {
    spec: { ...leaseSpecOf(lease), holderIdentity: null, renewTime: microTime(now), leaseDurationSeconds: 1 },
    annotations: { [LEADER_ANNOTATIONS.http]: null, [LEADER_ANNOTATIONS.webhook]: null },
  };
}

// Whether a leader may still act: its last renewal (the time it sent the renewal that succeeded) is less than a renew
// deadline old. A replica that takes the Lease over waits a whole lease duration after it last saw it change, so a
// former leader stops acting at least (lease duration - renew deadline) before another one starts.
export function leadershipValid({ renewedAt, now, renewDeadlineMs }) {
  return renewedAt !== null && now - renewedAt < renewDeadlineMs;
}

// Where to reach the leader, as its Lease says; null when nobody leads.
export function leaderOf(lease) {
  if (!lease?.holderIdentity) return null;
  return {
    identity: lease.holderIdentity,
    http: lease.annotations?.[LEADER_ANNOTATIONS.http] ?? null,
    webhook: lease.annotations?.[LEADER_ANNOTATIONS.webhook] ?? null,
    renewTime: lease.renewTime ?? null,
    transitions: lease.leaseTransitions ?? 0,
  };
}

// Where a request that only the leader may serve goes, given who leads as this replica last saw the Lease (leader(),
// src/events/leader-election.js) and whether this replica leads and has loaded its state (served):
//   here   this replica serves it;
//   relay  to the leader's `address` (http or webhook): another replica leads, or this one does but has already read
//          the request's body, which its own routes can no longer read (it relays to itself);
//   wait   nobody leads, or this replica has just become the leader and is loading its state.
export function relayRoute({ leader, served, address = 'http', bodyRead = false }) {
  if (served && !bodyRead) return { to: 'here' };
  if (!leader?.[address] || (leader.self && !served)) return { to: 'wait', loading: Boolean(leader?.self) };
  return { to: 'relay', target: leader[address] };
}

// How long a replica that gave its Lease up on shutdown keeps its port open, refusing work, before it closes it. A
// follower relays to the leader it last read from the Lease and reads it again within a retry period (one more second
// for the API server and scheduling), so for that long it may still send this replica a request. Refused (NOT_LEADER,
// SHUTTING_DOWN), the request is sent to the next leader; caught by a closing port it would be lost: Node's
// server.close() drops a connection accepted but not yet read, and the follower cannot tell that from a leader that
// took the request and died, so it answers 503 rather than send it twice. 0 with no election (one replica).
export function lingerAfterReleaseMs({ active, retryPeriodMs }) {
  return active ? retryPeriodMs + 1000 : 0;
}

// The timing rules client-go enforces: a leader must be able to miss renewals before its deadline, and the deadline
// must end before a follower may take over. Returns the problems (none: []).
export function timingProblems({ leaseDurationMs, renewDeadlineMs, retryPeriodMs }) {
  const problems = [];
  if (renewDeadlineMs >= leaseDurationMs) problems.push('LEADER_ELECTION_RENEW_DEADLINE_SECONDS must be below LEADER_ELECTION_LEASE_DURATION_SECONDS');
  if (retryPeriodMs * 1.2 >= renewDeadlineMs) problems.push('LEADER_ELECTION_RETRY_PERIOD_SECONDS x 1.2 must be below LEADER_ELECTION_RENEW_DEADLINE_SECONDS');
  return problems;
}

const leaseSpecOf = (lease) => ({
  holderIdentity: lease.holderIdentity ?? null,
  leaseDurationSeconds: lease.leaseDurationSeconds ?? null,
  acquireTime: lease.acquireTime ?? null,
  renewTime: lease.renewTime ?? null,
  leaseTransitions: lease.leaseTransitions ?? 0,
});

// A Lease's times are MicroTime: RFC 3339 with exactly six fractional digits.
function microTime(ms) {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}
