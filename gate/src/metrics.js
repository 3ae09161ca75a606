// The gate's Prometheus metrics (prom-client, a registry of its own): connections, queries by whether they may be sent
// again, retries and give-ups by the error's class, the time a retried query was held, protocol errors, holds.

import client from 'prom-client';

export function createGateMetrics() {
  const registry = new client.Registry();
  client.collectDefaultMetrics({ register: registry, prefix: 'rethinkdb_gate_process_' });
  const m = (Kind, name, help, labelNames = [], extra = {}) => new Kind({ name: `rethinkdb_gate_${name}`, help, labelNames, registers: [registry], ...extra });
  const open = m(client.Gauge, 'connections', 'client connections open now');
  const opened = m(client.Counter, 'connections_total', 'client connections accepted');
  const queries = m(client.Counter, 'queries_total', 'START queries relayed, by whether an OP_FAILED answer may be retried', ['kind']);
  const retries = m(client.Counter, 'retries_total', 'queries sent again after an OP_FAILED answer, by the error text\'s class', ['class']);
  const gaveUp = m(client.Counter, 'gave_up_total', 'OP_FAILED answers passed to the client because the retry budget ran out', ['class']);
  const held = m(client.Histogram, 'retried_query_seconds', 'time from a retried query\'s first send to its last answer', ['outcome'], {
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10],
  });
  const protocolErrors = m(client.Counter, 'protocol_errors_total', 'connections closed for bad input (wrong version, oversized frame, garbage)', ['kind']);
  const holdsStarted = m(client.Counter, 'holds_total', 'holds the manager took on tables before moving their primaries');
  const holdsEnded = m(client.Counter, 'holds_ended_total', 'holds ended, by how: released by the manager, expired at their ttl, or stopping (the gate stopped)', ['how']);
  const holdsActive = m(client.Gauge, 'holds_active', 'holds in force now');
  const holdSeconds = m(client.Histogram, 'hold_seconds', 'how long a hold lasted', [], { buckets: [0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5] });
  const heldQueries = m(client.Counter, 'held_queries_total', 'queries (and retries) kept back by a hold until it ended');
  const stoppingAnswers = m(client.Counter, 'stopping_answers_total', 'queries answered OP_FAILED, not run, because they came on a connection of a stopping gate (the client sends them again through another gate)');
  const handshakes = m(client.Counter, 'handshake_failures_total', 'handshakes the server refused (wrong password, unknown user)');
  const limits = m(client.Counter, 'limit_hits_total', 'times a bound bit: retained_bytes (a query relayed with no copy for a retry or a hold), partial_frame_bytes, frame_timeout and handshake_timeout (a connection closed), connections (one refused)', ['limit']);
  for (const kind of ['retained_bytes', 'partial_frame_bytes', 'frame_timeout', 'handshake_timeout', 'connections']) limits.labels(kind);
  let budgets = null;
  m(client.Gauge, 'retained_bytes', 'bytes of queries kept for a retry or a hold now (GATE_MAX_RETAINED_BYTES bounds them)', [], { collect() { this.set(budgets?.retained.used() ?? 0); } });
  m(client.Gauge, 'partial_frame_bytes', 'bytes of half-received frames held now, both ways (GATE_MAX_PARTIAL_FRAME_BYTES bounds them)', [], { collect() { this.set(budgets?.partial.used() ?? 0); } });
  // The per-query counter's children bound once: a labelled inc() on every query costs a label lookup each time.
  const queryKinds = { retryable: queries.labels('retryable'), not_retryable: queries.labels('not_retryable') };
  return {
    registry,
    connectionOpened: () => { open.inc(); opened.inc(); },
    connectionClosed: () => open.dec(),
    query: (kind) => queryKinds[kind].inc(),
    retry: (cls) => retries.inc({ class: cls }),
    gaveUp: (cls) => gaveUp.inc({ class: cls }),
    held: (ms, outcome) => held.observe({ outcome }, ms / 1000),
    protocolError: (kind) => protocolErrors.inc({ kind }),
    handshakeFailed: () => handshakes.inc(),
    stoppingAnswer: () => stoppingAnswers.inc(),
    holdStarted: () => { holdsStarted.inc(); holdsActive.inc(); },
    holdEnded: (how, ms) => { holdsEnded.inc({ how }); holdsActive.dec(); holdSeconds.observe(ms / 1000); },
    heldQuery: () => heldQueries.inc(),
    limitHit: (kind) => limits.inc({ limit: kind }),
    watchBudgets: (b) => { budgets = b; },
  };
}
