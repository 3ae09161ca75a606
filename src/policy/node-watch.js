// Pure: what the manager knows of each node it watches, and when it acts on the node's drain signal
// (src/events/maintenance.js runs it). A watched node is in one of two states:
//   { phase: 'unhandled' }                   its drain signal is to be acted on: first seen, after a failed handling,
//                                            or at a recheck;
//   { phase: 'handled', signal, checkedAt }  its drain signal (null: schedulable, no drain taint) was acted on at checkedAt.
// A failed handling leaves the node unhandled, with its backoff in the manager's retry book.

export const UNHANDLED = Object.freeze({ phase: 'unhandled' });

const same = (a, b) => JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

// Handled: the signal acted on (nodeDrainSignal's answer, null for none) and when.
export function handledNode(signal, now) {
  return { phase: 'handled', signal: signal ?? null, checkedAt: now };
}

// Whether the node, now carrying `signal`, must be acted on: it is unhandled, or its signal is not the one acted on.
export function nodeNeedsHandling(state, signal) {
  return state.phase !== 'handled' || !same(state.signal, signal);
}

// What the periodic round does with a node: 'retry' once a failed handling's backoff has passed (failing: a failure is
// on record; backoffPassed: its time has come); 'recheck' a node still signalled, every recheckMs, so that a server
// that was disconnected or restarting when the signal came (or has come back on the node since) is drained too;
// null: nothing.
export function nodeRoundDue(state, { failing, backoffPassed, now, recheckMs }) {
  if (failing) return backoffPassed ? 'retry' : null;
  if (state.phase === 'handled' && state.signal && now - state.checkedAt >= recheckMs) return 'recheck';
  return null;
}

// The state a round leaves the node in before it handles it: a recheck acts again whatever the signal.
export function nodeForRound(state, due) {
  return due === 'recheck' ? UNHANDLED : state;
}

// The nodes whose drain signal was last acted on: [{ node, signal }] for GET /v1/cluster (nodeMaintenance).
export function signalledNodes(entries) {
  return entries.filter(({ state }) => state.phase === 'handled' && state.signal).map(({ name, state }) => ({ node: name, signal: state.signal }));
}
