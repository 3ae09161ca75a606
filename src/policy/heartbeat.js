// Pure: the cluster's heartbeat timeout, lowered while a server departs (so that RethinkDB drops a server that
// stops answering sooner) and given back once no departure needs it.

import { spareBeforeDemotionMs } from './rollout.js';

// A server that drops off the network after PRESTOP (a node powered off rather than a clean SIGTERM) stalls
// writes on every shard it replicates, primary or not, until the others' heartbeat timeout declares it gone
// (10 s by default; measured on 2.4.4, see docs/evaluation/README.md). So from PRESTOP until the server has left,
// the cluster's heartbeat timeout is lowered to `seconds`. The value it goes back to is the one before the
// first lowering (a second pod stopping meanwhile keeps that value, not the lowered one).
// current: the cluster's heartbeat_timeout_secs now (null when unknown); departures: the servers it is lowered
// for already ([{ originalSecs, loweredSecs, until }]). Returns the departure mark to set (null: nothing to do)
// and the value to write (null: none).
// How long a PRESTOP may wait for its heartbeat write, which runs just before the demotion: never into the last
// PRESTOP_DEMOTE_RESERVE_MS of what the decision's deadline leaves (leftMs; undefined: no deadline, and no limit but the
// query's own timeout), which the demotion needs. While a frozen server is still counted in, 2.4.4 stalls such a write
// for up to the query timeout. 0: no time to wait, so the write is sent and not waited for. A write waited for no
// longer may still land; the departure mark makes the tick give the old value back either way.
export function heartbeatWriteBudgetMs({ leftMs }) {
  return spareBeforeDemotionMs(leftMs);
}

export function decideHeartbeatLowering({ current, departures = [], seconds, windowSeconds, now }) {
  if (!Number.isFinite(current)) return { departure: null, write: null, reason: 'the cluster\'s heartbeat timeout is unknown, so it is left alone' };
  const originalSecs = departures[0]?.originalSecs ?? current;
  if (originalSecs <= seconds) {
    return { departure: null, write: null, reason: `the heartbeat timeout is already ${current} s (not above ${seconds} s)` };
  }
  const departure = { originalSecs, loweredSecs: seconds, until: new Date(now + windowSeconds * 1000).toISOString() };
  return {
    departure, write: current === seconds ? null : seconds,
    reason: `heartbeat timeout ${current} s → ${seconds} s until the server has left (at most ${windowSeconds} s), `
      + 'so that a silent loss stalls its shards for about that long instead',
  };
}

// Called every tick while departures exist: a departure ends when its server has disconnected (the purpose is
// served: a clean stop or a detected loss) or its window has passed. Once none is left, the heartbeat goes back
// to its original value, unless someone else changed it meanwhile (it is no longer the value the manager set).
export function decideHeartbeatRestore(cluster, { departures, now }) {
  const connected = new Set(cluster.servers.filter((s) => s.connected).map((s) => s.id));
  const active = departures.filter((d) => connected.has(d.serverId) && Date.parse(d.until) > now);
  const ended = departures.filter((d) => !active.includes(d));
  if (ended.length === 0) return { intents: [], reason: `${active.length} departing servers still connected` };
  const why = ended.map((d) => `${d.serverName} ${connected.has(d.serverId) ? 'stayed past its window' : 'has left'}`).join(', ');
  const intents = [];
  let reason = `${why}; heartbeat stays at ${cluster.heartbeatTimeoutSecs} s for ${active.length} other departing servers`;
  if (active.length === 0) {
    const back = givenBack(cluster.heartbeatTimeoutSecs, departures);
    reason = `${why}: ${back.what}`;
    if (back.seconds !== null) intents.push({ type: 'set-heartbeat', seconds: back.seconds, reason });
  }
  intents.push({ type: 'end-departure', servers: ended.map((d) => d.serverId) });
  return { intents, reason };
}

// A manager that stops while departures are owed: the next leader gives the heartbeat timeout back only if it can read
// a departure, that is one saved on its pod (Kubernetes annotations). When none is saved (no Kubernetes API, or every
// save failed), nobody would, and the cluster would keep the lowered value for good: it goes back now, to the
// original (as decideHeartbeatRestore would), unless someone else changed it meanwhile. The departing servers then
// lose the quicker detection, which a manager that stops cannot watch over anyway.
// departures: as the marks list them ({ originalSecs, loweredSecs, persisted, serverId }).
export function decideHeartbeatAtShutdown({ current, departures }) {
  if (departures.length === 0) return { intents: [], reason: 'no departure owed' };
  if (departures.some((d) => d.persisted === 'saved')) {
    return { intents: [], reason: 'a departure is saved on its pod: the next leader gives the heartbeat timeout back' };
  }
  const back = givenBack(current, departures);
  const reason = `the manager stops and no departure is saved for the next leader: ${back.what}`;
  const ending = { type: 'end-departure', servers: departures.map((d) => d.serverId) };
  return { intents: back.seconds === null ? [ending] : [{ type: 'set-heartbeat', seconds: back.seconds, reason }, ending], reason };
}

// Once no departure needs the lowered heartbeat timeout: the value it goes back to (the largest original; null when
// it is left: already the original, or no longer the value the manager set, so someone else changed it) and what
// that is, said.
function givenBack(current, departures) {
  const original = Math.max(...departures.map((d) => d.originalSecs));
  const ours = departures.some((d) => d.loweredSecs === current);
  if (ours && current !== original) return { seconds: original, what: `heartbeat timeout back to ${original} s` };
  return { seconds: null, what: `heartbeat timeout left at ${current} s (${current === original ? 'already the original' : 'changed by someone else meanwhile'})` };
}

// HEARTBEAT_TIMEOUT_SECONDS: the value the cluster's heartbeat timeout is kept at while this manager leads, set
// beforehand so that a server lost without notice (a node powered off, its network gone) is dropped 1.4-1.6 times
// that after its last byte, and its shards fail over, instead of 14-16 s at RethinkDB's default of 10. Lowering it
// only when a loss is suspected would not help: RethinkDB applies a grace period to a change (docs/unplanned-events.md).
// current: heartbeat_timeout_secs now (null: unknown); departures: a PRESTOP's lowering owns the value until none is
// left (it gives back the value it found, this one); seconds: the configured value, 0 or null when off.
export function decideSteadyHeartbeat({ current, departures = [], seconds }) {
  if (!seconds) return { intents: [], reason: 'HEARTBEAT_TIMEOUT_SECONDS is off: the cluster\'s heartbeat timeout is left alone' };
  if (!Number.isFinite(current)) return { intents: [], reason: 'the cluster\'s heartbeat timeout is unknown, so it is left alone' };
  if (departures.length > 0) return { intents: [], reason: `${departures.length} departing servers have it lowered; it is set once none is left` };
  if (current === seconds) return { intents: [], reason: `the heartbeat timeout is ${seconds} s, as configured` };
  const reason = `heartbeat timeout ${current} s → ${seconds} s (HEARTBEAT_TIMEOUT_SECONDS), so that a server lost without notice is dropped within about ${Math.ceil(seconds * 1.6)} s`;
  return { intents: [{ type: 'set-heartbeat', seconds, reason }], reason };
}

