// Retrying with backoff: the delays double from the minimum up to the maximum, and what may not be retried is thrown.

import { createVirtualClock } from '../../src/lib/clock.js';
import { backoffMs, retryUntilDone } from '../../src/lib/retry.js';

describe('retryUntilDone', () => {
  test.each([[1, 500], [2, 1000], [3, 2000], [6, 16000], [7, 30000], [50, 30000]])('when attempt %i has failed, then the next waits %i ms', (attempt, delayMs) => {
    expect(backoffMs(attempt, { minMs: 500, maxMs: 30000 })).toBe(delayMs);
  });

  test('when fn fails twice, then it runs a third time after 500 + 1000 ms and its value is returned', async () => {
    const clock = createVirtualClock();
    const failures = [];
    const value = await retryUntilDone(async (attempt) => {
      if (attempt < 3) throw new Error(`failure ${attempt}`);
      return 'loaded';
    }, { clock, minMs: 500, maxMs: 30000, onFailure: (err, info) => failures.push({ message: err.message, ...info }) });
    expect(value).toBe('loaded');
    expect(failures).toEqual([{ message: 'failure 1', attempt: 1, delayMs: 500 }, { message: 'failure 2', attempt: 2, delayMs: 1000 }]);
    expect(clock.now() - clock.start).toBe(1500);
  });

  test('when a failure is not retryable, or the caller has stopped, then it is thrown at once', async () => {
    const clock = createVirtualClock();
    const refused = retryUntilDone(async () => { throw new Error('unknown action'); }, { clock, minMs: 500, maxMs: 1000, retryable: () => false });
    await expect(refused).rejects.toThrow('unknown action');
    const stopped = retryUntilDone(async () => { throw new Error('down'); }, { clock, minMs: 500, maxMs: 1000, stopped: () => true });
    await expect(stopped).rejects.toThrow('down');
    expect(clock.now()).toBe(clock.start);
  });
});
