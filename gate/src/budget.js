// A gate-wide count of bytes against a limit: the copies kept for a retry or a hold, or the half-received frames.
// take(n) counts n if they fit (false when they do not); add(n) counts n whatever the limit (a negative n gives back);
// give(n) gives n back. Pure bookkeeping.

export function createByteBudget({ limit }) {
  let used = 0;
  return {
    limit,
    take(n) {
      if (used + n > limit) return false;
      used += n;
      return true;
    },
    add(n) { used += n; },
    give(n) { used -= n; },
    over: () => used > limit,
    used: () => used,
  };
}
