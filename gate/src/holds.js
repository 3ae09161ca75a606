// Holds: the manager, about to move a table's primaries, asks every gate to keep that table's new queries back
// until the old primary has stopped acting (docs/query-gate.md). A query met by the handover is then not in
// flight when the old primary's execution ends, which RethinkDB answers OP_INDETERMINATE ("lost contact with primary
// replica") even for a read or a write it never applied; the gate may not send those again. A held query goes up
// when its hold is released, or at the latest when the hold expires (its ttl, at most GATE_HOLD_MAX_MS): a manager
// that dies mid-hold costs a query at most that much time, never its answer.
//
// A query is covered by a hold when it writes (or reads with read_mode majority, which RethinkDB runs as a write) and
// names one of the hold's tables, or a table it computes (its name is not a literal: it may be any). Reads pass: the old
// primary serves them until its execution ends, and the hold is not worth their latency (measured: holding a table's
// reads too raised the p99 of a planned stop from 40 to 250-340 ms). Pure bookkeeping with an injected clock and timer.

import { randomUUID } from 'node:crypto';

const TABLE_NAME = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// More holds at once than a manager ever takes (one per table written at once): past it, a caller is refused.
const MAX_HOLDS = 1000;

export function createHolds({ maxMs, timers = { setTimeout, clearTimeout }, clock, onChange = () => {} }) {
  const holds = new Map(); // id -> { id, tables: Set, since, until, timer }

  // Checks a hold request's fields; returns { error } or { tables, ttlMs, drainMs }.
  function validate(body) {
    if (!body || typeof body !== 'object' || Array.isArray(body)) return { error: 'the body must be a JSON object' };
    const { tables, ttlMs, drainMs = 0 } = body;
    if (!Array.isArray(tables) || tables.length === 0 || tables.length > 1000) return { error: 'tables must be a list of 1 to 1000 "db.table" names' };
    const bad = tables.find((t) => typeof t !== 'string' || !TABLE_NAME.test(t));
    if (bad !== undefined) return { error: `not a "db.table" name: ${JSON.stringify(bad)}` };
    if (!Number.isInteger(ttlMs) || ttlMs < 1 || ttlMs > maxMs) return { error: `ttlMs must be an integer from 1 to ${maxMs} (GATE_HOLD_MAX_MS)` };
    if (!Number.isInteger(drainMs) || drainMs < 0 || drainMs >= ttlMs) return { error: 'drainMs must be an integer from 0 to less than ttlMs' };
    if (holds.size >= MAX_HOLDS) return { error: `${MAX_HOLDS} holds are in force already` };
    return { tables: [...new Set(tables)], ttlMs, drainMs };
  }

  function add({ tables, ttlMs }) {
    const id = randomUUID();
    const since = clock.now();
    const hold = { id, tables: new Set(tables), since, until: since + ttlMs, timer: null };
    hold.timer = timers.setTimeout(() => end(id, 'expired'), ttlMs);
    hold.timer.unref?.();
    holds.set(id, hold);
    return view(hold);
  }

  // Ends a hold (released by the manager, or expired): what it held may go up unless another hold covers it.
  function end(id, how) {
    const hold = holds.get(id);
    if (!hold) return null;
    timers.clearTimeout(hold.timer);
    holds.delete(id);
    const ended = { ...view(hold), how, heldMs: clock.now() - hold.since };
    onChange(ended);
    return ended;
  }

  // facts: { tables: ['db.table'], unknownTables, writes } (protocol.js classifyQuery).
  function covers(facts) {
    for (const hold of holds.values()) if (touches(facts, hold.tables)) return true;
    return false;
  }

  // Whether a query of these facts touches any of `tables` (a Set): what a hold covers, and what the drain before a
  // hold answers waits for.
  function touches(facts, tables) {
    return Boolean(facts?.writes) && (facts.unknownTables || facts.tables.some((t) => tables.has(t)));
  }

  const view = (hold) => ({ id: hold.id, tables: [...hold.tables], ttlMs: hold.until - hold.since, remainingMs: Math.max(0, hold.until - clock.now()) });

  return {
    validate,
    add,
    release: (id) => end(id, 'released'),
    has: (id) => holds.has(id),
    covers,
    touches,
    list: () => [...holds.values()].map(view),
    active: () => holds.size,
    // Every hold ends (the gate is stopping): what they held goes up.
    clear: (how = 'stopping') => { for (const id of [...holds.keys()]) end(id, how); },
  };
}
