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
