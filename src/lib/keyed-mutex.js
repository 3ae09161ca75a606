// Serializes work per key (a table id), so two writers never touch one table_config at once.

export function createKeyedMutex() {
  const tails = new Map();

  async function runExclusive(key, fn) {
    const previous = tails.get(key) ?? Promise.resolve();
    let release;
    const current = new Promise((resolve) => { release = resolve; });
    const tail = previous.then(() => current);
    tails.set(key, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (tails.get(key) === tail) tails.delete(key);
    }
  }

  function isLocked(key) {
    return tails.has(key);
  }

  return { runExclusive, isLocked };
}
