// Pure: PERFWARNING (a pod starved of resources, from an operator, a predictor or the monitor), its escalation to the
// long path, and its end.

import { unreadyReplicasOf } from '../planner/eligibility.js';
import { MONITOR, warningSourceOf } from './requesters.js';

// PERFWARNING: a short or unknown interference demotes the primaries (IV-B3/4); a long one also moves the
// replicas off, one at a time, so that a second failure cannot leave shards without a live, up-to-date
// majority (IV-B5).
// servers: the servers the warning names (one pod's, or all of a node's), demoted together in one plan;
// reason: why it was raised (prefixed to the decision's own reason); now, source, signal: for the mark the
// servers get (the decision's `warning`), which says when it expires; baselines (the latency trigger's): kept on the
// mark, so that a new leader judges the server against them (src/policy/latency.js).
// moveRaftLeader: after the demotion, also move the Raft leadership of the tables a warned server leads
// (PERFWARNING_MOVE_RAFT_LEADER): every write asks that leader for the table's config, so a starved leader keeps
// the writes slow wherever the primaries went.
export function decidePerfWarning({
  durationSeconds = null, longSeconds, servers = [], node = null, reason: given = null, now = 0, source = 'operator', signal = null,
  moveRaftLeader = false, baselines = null,
}) {
  const known = Number.isFinite(durationSeconds);
  const long = known && durationSeconds >= longSeconds;
  let reason = `interference of unknown duration: demote the primaries only (cheap, undone when the warning ends)`;
  if (long) reason = `interference expected for ${durationSeconds} s (at least ${longSeconds} s): demote the primaries and migrate the replicas off`;
  else if (known) reason = `interference expected for ${durationSeconds} s (under ${longSeconds} s): demote the primaries only`;
  const why = `${given ? `${given}: ` : ''}${reason}`;
  const warning = {
    source, signal, reason: given ?? null, durationSeconds, long, decision: reason,
    since: new Date(now).toISOString(), expiresAt: known ? new Date(now + durationSeconds * 1000).toISOString() : null,
    ...(baselines ? { baselines } : {}),
  };
  const intents = servers.length === 0 ? [] : [
    { type: 'mark-perf-warning', servers, warning },
    { type: 'move-connection', servers },
    { type: 'demote', servers, node, mark: 'perfwarning', reason: why },
    ...(moveRaftLeader ? [{ type: 'move-raft-leadership', servers, reason: `${why}; then move the Raft leadership of the tables it leads` }] : []),
    ...(long ? servers.map((server) => ({ type: 'migrate-replicas-off', server, reason: why })) : []),
  ];
  return { long, reason, warning, intents };
}

// A hot-spot the monitor raised that is still hot PERFWARNING_LONG_SECONDS after its warning: the monitor cannot
// know a hot-spot's duration in advance, so one that has lasted this long is taken for a long one, and handled as an
// announced long warning is: the replicas move off too (IV-B5), one at a time. The demotion runs again first: it
// changes nothing unless primaries came back to the server meanwhile. Only once the migration has started is the
// warning marked long (keeping what was demoted), so that a failure before that leaves it to the next poll, and so
// that its end moves a fair share of replicas back, then primaries.
// Only the monitor's own warning, and once: an operator's or the pod's warning says how long it lasts itself, and a
// long one has its migration already. warning: the server's current mark (null: none); pod: for the refusals.
// Returns { escalate, reason, intents }.
export function decidePerfWarningEscalation({
  servers, warning, pod, longSeconds, reason: given = null, now = 0,
}) {
  const refuse = (reason) => ({ escalate: false, reason, intents: [] });
  if (!warning || warning.source !== warningSourceOf(MONITOR)) return refuse(`no perf warning from the monitor for pod ${pod}`);
  if (warning.long) return refuse(`the warning for pod ${pod} is long already`);
  const heldSeconds = Math.round((now - Date.parse(warning.since)) / 1000);
  const reason = `hot-spot still there ${heldSeconds} s after the warning (at least ${longSeconds} s): a long one, so migrate the replicas off too`;
  const why = `${given ? `${given}: ` : ''}${reason}`;
  return {
    escalate: true,
    reason,
    intents: servers.length === 0 ? [] : [
      { type: 'demote', servers, node: null, mark: 'perfwarning', reason: why },
      ...servers.map((server) => ({ type: 'migrate-replicas-off', server, reason: why, whileWarned: true })),
      { type: 'mark-perf-warning-long', servers, decision: reason, at: new Date(now).toISOString() },
    ],
  };
}

// The end of a perf warning (expiry, DELETE, or the monitor seeing the hot-spot clear): the primaries (and
// after a long warning, the replicas) go back once the server is healthy; until then, a restore waits.
// migrating: the action of a migration of the server's replicas under way (or due for a retry), or null: the
// replicas come back once it has ended, rather than while it still moves them off. A migrate-replicas-off moves them
// off because of the warning (an escalation that had not marked it long yet): its end then brings them back, as a
// long warning's does.
export function decidePerfWarningEnd(cluster, {
  serverId, warning, reason: given = 'perf warning ended', migrating = null,
}) {
  const server = cluster.servers.find((s) => s.id === serverId);
  const ref = { id: serverId, name: server?.name ?? warning.serverName ?? serverId };
  const decide = (action, reason, intents) => ({ action, reason, intents });
  const why = (reason) => `${given}: ${reason}`;
  if (migrating) {
    const reason = `a migration of ${ref.name}'s replicas is still under way; the restore waits until it has ended`;
    const restored = migrating === 'migrate-replicas-off' ? { ...warning, long: true } : warning;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning: restored, reason: given }]);
  }
  if (!server?.connected) {
    const reason = `${warning.serverName ?? serverId} is not connected; primaries return once it is healthy`;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning, reason: given }]);
  }
  const notReady = unreadyReplicasOf(cluster, serverId);
  if (notReady.length > 0) {
    const reason = `${server.name} has ${notReady.length} replicas that are not ready yet; primaries return once they are`;
    return decide('wait', reason, [{ type: 'await-health', server: ref, warning, reason: given }]);
  }
  if (warning.long) {
    const reason = `the long hot-spot on ${server.name} ended: move a fair share of replicas back, then primaries`;
    return decide('add-server', reason, [{ type: 'add-server', server: ref, reason: why(reason), clearsRestore: true, wait: false }]);
  }
  // Levelled with the least busy shards (what it had where traffic does not tell them apart): the shard that was
  // hot stays where it is now, rather than cost a second handover.
  const reason = `the hot-spot on ${server.name} ended: give it back its share of primaries, the least busy shards first`;
  return decide('rebalance-primaries', reason, [{
    type: 'rebalance-primaries', server: ref, prefer: warning.demoted ?? [], byLoad: true, reason: why(reason), clearsRestore: true,
  }]);
}
