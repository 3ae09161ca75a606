// Retrying with exponential backoff: for work that must eventually succeed (loading the persisted state at
// start-up) or be retried until it is no longer needed.

export function backoffMs(attempt, { minMs, maxMs }) {
  return Math.min(maxMs, minMs * 2 ** Math.max(0, attempt - 1));
}

// Runs fn(attempt) until it resolves. A failure for which retryable(err) is false, or one after stopped()
// turned true, is thrown; any other is passed to onFailure and retried after the backoff.
export async function retryUntilDone(fn, {
  clock, minMs, maxMs, retryable = () => true, stopped = () => false, onFailure = () => {},
}) {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await fn(attempt);
    } catch (err) {
      if (!retryable(err) || stopped()) throw err;
      const delayMs = backoffMs(attempt, { minMs, maxMs });
      onFailure(err, { attempt, delayMs });
      await clock.sleep(delayMs);
    }
  }
}

// The one book of backoffs for work retried on a later round (src/manager.js makes one), keyed by what is retried:
// 'node:<name>' (a node maintenance signal), 'votes:<server id>' (the votes a Raft leadership move owes).
// failed(key) counts a failure and returns { attempts, retryInMs, at }; succeeded(key) forgets it; due(key) is true
// when the key has no failure on record or its backoff has passed; failing(key) when a failure is on record.
// (A migration's retry is a mark persisted on its pod, so that it survives a change of leader: src/policy/migrations.js.)
export function createRetryBook({ clock, retry }) {
  const entries = new Map();
  return {
    failed(key) {
      const attempts = (entries.get(key)?.attempts ?? 0) + 1;
      const retryInMs = backoffMs(attempts, retry);
      const entry = { attempts, at: clock.now() + retryInMs };
      entries.set(key, entry);
      return { ...entry, retryInMs };
    },
    succeeded(key) { entries.delete(key); },
    due(key) { const entry = entries.get(key); return !entry || entry.at <= clock.now(); },
    failing(key) { return entries.has(key); },
    view: () => [...entries].map(([key, { attempts, at }]) => ({ key, attempts, retryAt: at })),
  };
}
