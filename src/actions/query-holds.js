// Holds on the query gates around a table_config write that moves primaries (docs/query-gate.md, "Holds"; the
// decisions in src/policy/query-holds.js). around() takes the hold at every gate (once the table's writes in flight
// there are answered), writes, and returns: the hold is ended in the background, once no old primary acts for its
// shard and every new one acts (until 'new-acts', GATE_HOLD_UNTIL's default; 'old-gone' ends it at the first; one
// table_status row read every pollMs) or at its ttl, so that the next table's write does not wait for it.
// A gate unreachable or refusing costs nothing but the hold: the write goes ahead. A hold never takes time a deadline
// needs for the writes: with less than twice what a hold may take (its delay included) left, the write goes ahead
// without one.
// delayMs (GATE_HOLD_DELAY_MS, 200 by default; 0: the hold before the write, as above): the hold is asked for that
// long after the write has returned instead, which shortens what a write arriving meanwhile waits. The old
// primary serves the table's writes until RethinkDB's hand-over round reaches it (its coordinator naps 200 ms before
// each round, coordinator.cc pump_contracts; calculate_contracts.cc hands over in one round and removes the primary in
// a later one). That is a timing margin, not the drain's guarantee: a write the old primary accepted just before the
// hand-over and slower than the next round can still meet its end. A hold that finds no old primary acting at its
// first read is counted 'late'.

import {
  decideHold, handoversOf, holdCameLate, holdEnding, holdTables,
} from '../policy/query-holds.js';

// gates: src/gates/gate-client.js, or null (holds off: around() only writes).
export function createQueryHolds({
  gates, store, clock, logger, metrics = null, ttlMs, drainMs, delayMs = 0, until = 'new-acts', pollMs = 20,
}) {
  const log = logger.child({ module: 'query-holds' });
  const ending = new Set();

  // before: the table as read; shards: as written; write(): the write; deadline: the action's; isConnected(id): as the
  // read saw the server (a disconnected configured primary is no old primary). -> { result, hold }: hold
  // is null when the write moves no primary or holds are off, else { gates, unreachable: [{ endpoint, error }],
  // inFlight, tookMs } as taken, or { skipped } when the deadline left no time for it.
  async function around(before, shards, write, { deadline = null, isConnected = () => true } = {}) {
    const handovers = gates ? handoversOf(before, shards, { isConnected }) : [];
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
    const hold = reportTaken(before, taken, startedAt);
    let result;
    try {
      result = await write();
    } catch (err) {
      await end(taken.held, 'write_failed', startedAt);
      throw err;
    }
    endInBackground(before.id, handovers, taken.held, startedAt);
    return { result, hold };
  }

  // What the report says of a hold as taken (a gate that was not held is logged).
  function reportTaken(before, taken, startedAt) {
    metrics?.queryGatesSeen(taken.held.length, taken.failed.length);
    if (taken.failed.length > 0) log.warn({ table: holdTables(before)[0], failed: taken.failed }, 'some query gates were not held; the write goes ahead all the same');
    return {
      gates: taken.held.length, unreachable: taken.failed, inFlight: taken.held.reduce((n, h) => n + h.inFlight, 0), tookMs: clock.now() - startedAt,
    };
  }

  // Ends the hold once the handover is over (endWhenHandedOver), without the caller waiting; idle() waits for it.
  function endInBackground(tableId, handovers, held, startedAt, options) {
    if (held.length === 0) {
      metrics?.queryHoldEnded('not_taken', 0);
      return;
    }
    const ended = endWhenHandedOver(tableId, handovers, held, startedAt, options);
    ending.add(ended);
    ended.then(() => ending.delete(ended));
  }

  // The write first; the hold delayMs after it returned (a write that fails needs none). The token and the gates are
  // read before the write, so that the hold is asked for on time. The report says how long after the write it was
  // asked for (afterWriteMs, measured).
  async function holdAfter(before, handovers, write) {
    const prepared = await gates.prepare();
    if (prepared.answer?.off) {
      log.debug({ reason: prepared.answer.off }, 'query gate holds are off');
      return { result: await write(), hold: null };
    }
    const result = await write();
    const wroteAt = clock.now();
    await clock.sleep(delayMs);
    const startedAt = clock.now();
    const taken = await gates.hold(holdTables(before), { ttlMs, drainMs }, prepared);
    const hold = { ...reportTaken(before, taken, startedAt), afterWriteMs: startedAt - wroteAt };
    endInBackground(before.id, handovers, taken.held, startedAt, { afterWrite: true });
    return { result, hold };
  }

  // Never rejects: what goes wrong is logged, and the gates end the hold at its ttl in any case. afterWrite: the hold
  // was taken after the write (holdEnding: a 'late' end is logged as a warning, GATE_HOLD_DELAY_MS is too long here).
  async function endWhenHandedOver(tableId, handovers, held, startedAt, { afterWrite = false } = {}) {
    try {
      let how = 'ttl';
      let reason = 'the hold reached its ttl';
      let cameLate = false;
      for (let read = 0; clock.now() - startedAt < ttlMs; read += 1) {
        try {
          const acting = await store.readActingPrimaries(tableId);
          cameLate ||= holdCameLate(acting, handovers, { afterWrite, read });
          const ending = holdEnding(acting, handovers, { until, late: cameLate });
          if (ending) {
            ({ how, reason } = ending);
            if (how === 'late') log.warn({ tableId }, 'a query gate hold taken after the write came too late');
            break;
          }
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

  // Each gate asked once, when this manager starts leading (gates.check()): what a first hold would meet is logged
  // then, a token the gates refuse or a gate out of reach as a warning. Never rejects.
  async function check() {
    if (!gates) return null;
    try {
      const checked = await gates.check();
      if (checked.off) log.info({ reason: checked.off }, 'query gate holds are off');
      else if (checked.failed.length > 0) log.warn({ reached: checked.reached, failed: checked.failed }, 'some query gates could not be asked for their holds; a hold will not be taken there');
      else log.info({ reached: checked.reached }, 'query gates reached for holds');
      metrics?.queryGatesSeen(checked.reached.length, checked.failed.length);
      return checked;
    } catch (err) {
      log.warn({ err: err.message }, 'the query gates were not checked');
      return null;
    }
  }

  return {
    around,
    check,
    enabled: Boolean(gates),
    // Until every hold under way has ended (tests, shutdown).
    idle: () => Promise.all([...ending]),
  };
}
