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

// One connection's share of a gate-wide budget: the same calls, and take(n) also refuses past `limit` for this
// connection alone, so that one client cannot spend the whole budget. shortOf(): 'connection' or 'gate', which limit
// the last refused take() met.
export function createShare(budget, { limit }) {
  let own = 0;
  let short = null;
  return {
    limit,
    take(n) {
      if (own + n > limit) { short = 'connection'; return false; }
      if (!budget.take(n)) { short = 'gate'; return false; }
      own += n;
      return true;
    },
    add(n) { own += n; budget.add(n); },
    give(n) { own -= n; budget.give(n); },
    used: () => own,
    shortOf: () => short,
  };
}

