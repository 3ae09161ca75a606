// The use-case of a server the manager's probes find silent (src/rethinkdb/prober.js) before RethinkDB's heartbeat
// drops it: reconciled as the work queue's `suspicion` key, added whenever the silent servers change and looked at
// again every SUSPICION_RECHECK_MS while a hold is in force. The policy (src/policy/suspicion.js) decides; this asks
// every query gate to hold new writes for the suspect's tables (src/gates/gate-client.js) and ends the hold once
// another server acts for them (RethinkDB failed over), once the server answers again or RethinkDB drops it, or at
// its ttl; a server is held once while it stays silent. A replica that stops leading leaves its holds to the gates,
// which end them at the ttl.

import { withinMs } from '../lib/clock.js';
import { decideSuspicion, failedOverFrom } from '../policy/suspicion.js';

export const SUSPICION_KEY = 'suspicion';
// How often, while a hold is in force, the held tables' acting primaries are read.
export const SUSPICION_RECHECK_MS = 100;
// How long one read of a held table's acting primaries may take (RethinkDB may stall it while the suspect is counted in).
const ACTING_READ_MS = 500;
// A cluster read this recent (the failover key's, every FAILOVER_CHECK_MS) names the suspect's tables; an older one
// is read again, within SUSPICION_READ_MS.
const RECENT_READ_MS = 10000;
const SUSPICION_READ_MS = 1000;

// prober: ./prober.js's; gates: the gate client, or null (holds off: suspicions are logged only); recentCluster():
// { at, cluster } of the last read, or null.
export function createSuspicionEvents({
  prober, store, marks, gates, recentCluster, config, clock, logger, metrics = null,
}) {
  const log = logger.child({ module: 'suspicion' });
  const held = new Map(); // serverId -> { tables: [{ id, name }], taken: [{ endpoint, id }], since }
  // Suspects RethinkDB has failed over from: not held again until they stop being suspects (answer, or are dropped).
  const settled = new Set();
  let steered = '';
  // Reads of a held table's acting primaries still under way (tableId -> promise): a read RethinkDB stalls is not
  // asked again until it returns, so that they do not pile up on the manager's connection.
  const reading = new Map();

  // The manager's own connection leaves a suspect (as it leaves a server about to be drained): a server cut off from
  // the others but not from the manager answers the manager fastest, and its view of the cluster is a minority's. A
  // move that found no other server is tried again at the next look.
  async function steer(suspects) {
    const key = suspects.join();
    if (key === steered) return;
    const moved = await store.steerAwayFrom(await marks.drainingIds(suspects)).catch((err) => ({ moved: false, reason: err.message }));
    if (moved.moved) log.info({ from: moved.from, to: moved.to }, 'connection moved off a silent server');
    if (moved.moved || !/no other server answered/.test(moved.reason ?? '')) steered = key;
  }

  async function clusterNow() {
    const recent = recentCluster();
    if (recent && clock.now() - recent.at < RECENT_READ_MS) return recent.cluster;
    return withinMs(store.readCluster(), SUSPICION_READ_MS, () => new Error(`the cluster was not read within ${SUSPICION_READ_MS} ms`));
  }

  async function end(serverId, how, reason) {
    const hold = held.get(serverId);
    held.delete(serverId);
    const notReleased = how === 'ttl' ? [] : await gates.release(hold.taken);
    const heldMs = clock.now() - hold.since;
    metrics?.suspicionHoldEnded(how, heldMs);
    log.info({
      server: prober.nameOf(serverId), how, reason, heldMs, tables: hold.tables.map((t) => t.name), notReleased, probes: prober.view?.() ?? null,
    }, 'suspicion hold ended');
  }

  async function readActing(tableId) {
    if (!reading.has(tableId)) {
      const read = store.readActingPrimaries(tableId).catch(() => null).finally(() => reading.delete(tableId));
      reading.set(tableId, read);
    }
    try {
      return await withinMs(reading.get(tableId), ACTING_READ_MS, () => new Error('not read in time'));
    } catch {
      return null;
    }
  }

  async function reconcileSuspicion() {
    const suspects = prober.suspects();
    metrics?.setSuspectedServers(suspects.length);
    for (const id of [...settled]) if (!suspects.includes(id)) settled.delete(id);
    // A hold whose tables others act for now ends as failed over, whether or not the server is still listed (RethinkDB
    // drops it from server_status when it fails over, and the prober with it).
    // A hold that reached its ttl is not taken again while its server stays silent: a server only the manager cannot
    // reach would otherwise have its writes held for good, and RethinkDB's default heartbeat outlasts any one hold.
    for (const [serverId, hold] of [...held]) {
      if (clock.now() - hold.since >= config.suspicion.holdTtlMs) {
        await end(serverId, 'ttl', 'the hold reached its ttl; the gates ended it');
        if (suspects.includes(serverId)) settled.add(serverId);
      } else if (failedOverFrom(serverId, await Promise.all(hold.tables.map((t) => readActing(t.id))))) {
        await end(serverId, 'failed_over', 'other servers act for its tables');
        if (suspects.includes(serverId)) settled.add(serverId);
      }
    }
    await steer(suspects.length * 2 < prober.probed() ? suspects : []);
    if (!gates) return { action: 'none', suspects, reason: 'no query gates to hold (GATE_HOLD_TOKEN_FILE)' };
    const newSuspects = suspects.filter((id) => !held.has(id) && !settled.has(id));
    const cluster = newSuspects.length > 0 ? await clusterNow() : null;
    const decision = decideSuspicion({
      suspects, probed: prober.probed(), held, cluster, settled, nameOf: prober.nameOf, listed: prober.listed,
    });
    for (const { serverId, how, reason } of decision.release) if (held.has(serverId)) await end(serverId, how, reason);
    let notTaken = false;
    for (const { serverId, tables, reason } of decision.hold) {
      const since = clock.now();
      const taken = await gates.hold(tables.map((t) => t.name), { ttlMs: config.suspicion.holdTtlMs, drainMs: 0 });
      if (taken.off || taken.held.length === 0) {
        metrics?.suspicionHoldEnded('not_taken', 0);
        log.warn({ server: prober.nameOf(serverId), off: taken.off ?? null, failed: taken.failed }, 'a suspect\'s tables were not held at any gate');
        notTaken ||= !taken.off;
        continue;
      }
      held.set(serverId, { tables, taken: taken.held, since });
      log.warn({ server: prober.nameOf(serverId), tables: tables.map((t) => t.name), gates: taken.held.length, failed: taken.failed, reason }, 'suspicion: new writes held');
    }
    // Looked at again while a hold is in force (its end), or when no gate could be reached for one (tried again).
    const again = held.size > 0 || notTaken;
    return { action: decision.hold.length > 0 ? 'hold' : 'none', suspects, reason: decision.reason, requeueAfterMs: again ? SUSPICION_RECHECK_MS : 0 };
  }

  return {
    reconcileSuspicion,
    view: () => [...held.entries()].map(([serverId, h]) => ({ server: prober.nameOf(serverId), tables: h.tables.map((t) => t.name), heldMs: clock.now() - h.since })),
  };
}
