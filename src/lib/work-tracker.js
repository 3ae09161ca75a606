// Tracks in-flight work so that shutdown can stop taking new work and wait for what is running.

import { AppError } from '../errors.js';

export function createWorkTracker() {
  const inFlight = new Set();
  let stopping = false;

  async function track(fn) {
    if (stopping) throw new AppError('SHUTTING_DOWN', 'the manager is shutting down and takes no new work');
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
    inFlightCount: () => inFlight.size,
    drain: () => Promise.allSettled([...inFlight]),
  };
}
