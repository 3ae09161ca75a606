// Holds on the query gates around a table_config write that moves primaries (docs/query-gate.md, "Holds"; the
// decisions in src/policy/query-holds.js). around() writes, takes the hold at every gate delayMs later (before the
// write with delayMs 0), and returns: the hold is ended in the background, once no old primary acts for its shard
// (one table_status row read every pollMs) or at its ttl, so that the next table's write does not wait for it. A gate
// unreachable or refusing costs nothing but the hold: the write goes ahead. A hold never takes time a deadline needs
// for the writes: with less than twice what a hold may take (its delay included) left, the write goes ahead without
// one.
// delayMs (GATE_HOLD_DELAY_MS): RethinkDB 2.4 ends the old primary's execution no sooner than two of its
// coordinator's 200 ms rounds after the config change commits (src/clustering/table_contract/coordinator/
// coordinator.cc, pump_contracts naps 200 ms before each round; calculate_contracts.cc hands over, then removes the
// primary, one round each), so the old primary serves the table's writes meanwhile and only what arrives after the
// delay waits.

import {
  decideHold, handoversOf, holdMayEnd, holdTables,
} from '../policy/query-holds.js';

// gates: src/gates/gate-client.js, or null (holds off: around() only writes).
export function createQueryHolds({
  gates, store, clock, logger, metrics = null, ttlMs, drainMs, delayMs = 0, pollMs = 20,
}) {
  const log = logger.child({ module: 'query-holds' });
  const ending = new Set();

  // before: the table as read; shards: as written; write(): the write; deadline: the action's. -> { result, hold }: hold
  // is null when the write moves no primary or holds are off, else { gates, unreachable: [{ endpoint, error }],
  // inFlight, tookMs } as taken, or { skipped } when the deadline left no time for it.
  async function around(before, shards, write, { deadline = null } = {}) {
    const handovers = gates ? handoversOf(before, shards) : [];
    const decision = decideHold({ handovers, remainingMs: deadline ? deadline.remainingMs() : null, holdLimitMs: gates ? gates.holdLimitMs(drainMs) + delayMs : 0 });
    if (!decision.hold && !decision.skipped) return { result: await write(), hold: null };
    if (!decision.hold) {
      metrics?.queryHoldEnded('skipped', 0);
      return { result: await write(), hold: { skipped: decision.skipped } };
    }
    if (delayMs > 0) return holdAfter(before, handovers, write);
    const startedAt = clock.now();
    const taken = await gates.hold(holdTables(before), { ttlMs, drainMs });
    if (taken.off) {
      log.debug({ reason: taken.off }, 'query gate holds are off');
      return { result: await write(), hold: null };
    }
    if (taken.failed.length > 0) log.warn({ table: holdTables(before)[0], failed: taken.failed }, 'some query gates were not held; writing anyway');
    const hold = {
      gates: taken.held.length, unreachable: taken.failed, inFlight: taken.held.reduce((n, h) => n + h.inFlight, 0), tookMs: clock.now() - startedAt,
    };
    let result;
    try {
      result = await write();
    } catch (err) {
      await end(taken.held, 'write_failed', startedAt);
      throw err;
    }
    if (taken.held.length > 0) {
      const ended = endWhenHandedOver(before.id, handovers, taken.held, startedAt);
      ending.add(ended);
      ended.then(() => ending.delete(ended));
    } else {
      metrics?.queryHoldEnded('not_taken', 0);
    }
    return { result, hold };
  }

  // The write first; the hold delayMs after it returned (a write that fails needs none). The report says how long after.
  async function holdAfter(before, handovers, write) {
    const result = await write();
    await clock.sleep(delayMs);
    const startedAt = clock.now();
    const taken = await gates.hold(holdTables(before), { ttlMs, drainMs });
    if (taken.off) {
      log.debug({ reason: taken.off }, 'query gate holds are off');
      return { result, hold: null };
    }
    if (taken.failed.length > 0) log.warn({ table: holdTables(before)[0], failed: taken.failed }, 'some query gates were not held');
    const hold = {
      gates: taken.held.length, unreachable: taken.failed, inFlight: taken.held.reduce((n, h) => n + h.inFlight, 0), tookMs: clock.now() - startedAt, afterWriteMs: delayMs,
    };
    if (taken.held.length > 0) {
      const ended = endWhenHandedOver(before.id, handovers, taken.held, startedAt);
      ending.add(ended);
      ended.then(() => ending.delete(ended));
    } else {
      metrics?.queryHoldEnded('not_taken', 0);
    }
    return { result, hold };
  }

  // Never rejects: what goes wrong is logged, and the gates end the hold at its ttl in any case.
  async function endWhenHandedOver(tableId, handovers, held, startedAt) {
    try {
      let how = 'ttl';
      let reason = 'the hold reached its ttl';
      while (clock.now() - startedAt < ttlMs) {
        try {
          const verdict = holdMayEnd(await store.readActingPrimaries(tableId), handovers);
          if (verdict.end) { how = 'handed_over'; reason = verdict.reason; break; }
        } catch (err) {
          reason = `table_status not read: ${err.message}`;
        }
        await clock.sleep(pollMs);
      }
      await end(held, how, startedAt, reason);
    } catch (err) {
      log.warn({ err: err.message }, 'query gate hold not ended here; the gates end it at its ttl');
    }
  }

  async function end(held, how, startedAt, reason = null) {
    const failed = await gates.release(held);
    const heldMs = clock.now() - startedAt;
    metrics?.queryHoldEnded(how, heldMs);
    log.info({ tableGates: held.length, how, reason, heldMs, notReleased: failed }, 'query gates released');
  }

  return {
    around,
    enabled: Boolean(gates),
    // Until every hold under way has ended (tests, shutdown).
    idle: () => Promise.all([...ending]),
  };
}
