// Tracks in-flight work so that shutdown can stop taking new work and wait for what is running, and refuses
// work before the manager has started (its persisted state loaded), so that nothing acts on a partial picture.

import { appError } from '../errors.js';

export function createWorkTracker({ started = true } = {}) {
  const inFlight = new Set();
  let stopping = false;
  let open = started;
  let startingReason = 'the manager is loading its persisted state';

  async function track(fn) {
    if (stopping) throw appError('shuttingDown');
    if (!open) throw appError('starting', { reason: startingReason });
    const promise = Promise.resolve().then(fn);
    inFlight.add(promise);
    try {
      return await promise;
    } finally {
      inFlight.delete(promise);
    }
  }

  return {
    track,
    shuttingDown: () => stopping,
    beginShutdown() { stopping = true; },
    started: () => open,
    markStarted() { open = true; },
    // No new work until markStarted() again (a replica that stopped leading); running work goes on, fenced.
    close(reason) { open = false; startingReason = reason; },
    // Why the manager has not started yet (shown by /readyz and in every refusal).
    noteStarting(reason) { startingReason = reason; },
    startingReason: () => startingReason,
    inFlightCount: () => inFlight.size,
    drain: () => Promise.allSettled([...inFlight]),
  };
}
