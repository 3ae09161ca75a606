// Serializes work per key (a table id), so two writers never touch one table_config at once.
// A waiter may give up at its deadline; the chain still passes the lock on in order.

import { appError } from '../errors.js';

export function createKeyedMutex() {
  const tails = new Map();

  // timeoutMs: how long to wait for the lock; past it, DEADLINE_EXCEEDED and fn never runs.
  async function runExclusive(key, fn, { timeoutMs = Infinity } = {}) {
    const previous = tails.get(key) ?? Promise.resolve();
    let release;
    const current = new Promise((resolve) => { release = resolve; });
    const tail = previous.then(() => current);
    tails.set(key, tail);
    const acquired = await waitFor(previous, timeoutMs);
    if (!acquired) {
      // Our turn comes after `previous`; hand it straight on so that later waiters are not stuck behind us.
      previous.then(() => settle(key, tail, release));
      throw appError('lockWaitTooLong', { ms: timeoutMs, key });
    }
    try {
      return await fn();
    } finally {
      settle(key, tail, release);
    }
  }

  function settle(key, tail, release) {
    release();
    if (tails.get(key) === tail) tails.delete(key);
  }

  return { runExclusive };
}

async function waitFor(promise, timeoutMs) {
  if (timeoutMs === Infinity) {
    await promise;
    return true;
  }
  let timer;
  const timedOut = new Promise((resolve) => {
    timer = setTimeout(() => resolve(false), Math.max(0, timeoutMs));
    timer.unref?.();
  });
  try {
    return await Promise.race([promise.then(() => true), timedOut]);
  } finally {
    clearTimeout(timer);
  }
}
