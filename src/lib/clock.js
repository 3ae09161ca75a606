// Time as an injected dependency, so that pure code never reads the clock and tests can control it.

export function createSystemClock() {
  return {
    now: () => Date.now(),
    sleep: (ms) => new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, ms));
      timer.unref?.();
    }),
  };
}

// A deadline is an absolute point in time on a given clock.
export function createDeadline(clock, timeoutMs) {
  const expiresAt = clock.now() + timeoutMs;
  return {
    expiresAt,
    timeoutMs,
    remainingMs: () => Math.max(0, expiresAt - clock.now()),
    expired: () => clock.now() >= expiresAt,
  };
}

// The deadline an edge makes from a request's seconds, once (undefined or null: none; each action then has its own).
export function deadlineIn(clock, seconds) {
  return seconds === undefined || seconds === null ? null : createDeadline(clock, seconds * 1000);
}

// The deadline the caller gave, or a new one of defaultMs: how an action gets its deadline.
export function deadlineOr(deadline, clock, defaultMs) {
  return deadline ?? createDeadline(clock, defaultMs);
}

// Resolves with the promise's value, or rejects with onTimeout() when the deadline passes first.
export async function withinMs(promise, timeoutMs, onTimeout) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(onTimeout()), Math.max(0, timeoutMs));
    timer.unref?.();
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

// Virtual time for the sandbox's scenario replay and the tests: sleeping advances the clock at once, so waits,
// elections and backfills take no real time.
export function createVirtualClock(start = Date.parse('2026-11-21T12:00:00Z')) {
  let now = start;
  return {
    now: () => now,
    sleep: async (ms) => { now += Math.max(1, ms); },
    advance: (ms) => { now += ms; },
    advanceTo: (at) => { now = Math.max(now, at); },
    start,
  };
}
