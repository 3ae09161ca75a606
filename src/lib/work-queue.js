// A keyed work queue, as client-go's rate-limited delaying queue: work is a key, reconciled by one function that
// reads the world and acts on what it finds (level-triggered: a key says what to look at, not what happened).
//   add(key)            reconcile it soon; a key already waiting is not queued twice, and one being reconciled is
//                       reconciled once more after (so that nothing added meanwhile is missed);
//   addAfter(key, ms)   reconcile it after ms (the earlier of two delays wins);
//   addRateLimited(key) after the key's backoff, which doubles with each failure in a row (backoff.baseMs to maxMs);
//   forget(key)         the key's failures are forgotten (its next backoff is the first).
// Keys are reconciled in the order added, by up to `workers` at once, never one key twice at once. reconcile(key) may return { requeueAfterMs } (look again
// then: a resync); a reconcile that throws is logged and its key added rate-limited. Nothing runs before start() or
// after stop(). Time comes from the injected clock and timers (tests drive them).

export function createWorkQueue({
  name, reconcile, clock, logger, metrics = null, backoff = { baseMs: 500, maxMs: 60000 }, timers = { setTimeout, clearTimeout }, workers = 1,
}) {
  const log = logger.child({ module: 'work-queue', queue: name });
  const order = [];
  const queued = new Map(); // key -> when it was added (for the wait metric)
  const delayed = new Map(); // key -> { at, timer }
  const failures = new Map(); // key -> failures in a row
  const dirty = new Set();
  const current = new Set(); // the keys being reconciled
  const running = new Set(); // the workers' promises while they run (idle(), stop())
  let active = 0; // workers started and not finished, counted synchronously (running's entries leave a microtask later)
  let started = false;
  const depth = () => metrics?.workQueueDepth(name, order.length);

  function add(key) {
    if (!started) return;
    cancelDelay(key);
    if (current.has(key)) { dirty.add(key); return; }
    if (queued.has(key)) return;
    queued.set(key, clock.now());
    order.push(key);
    metrics?.workQueueAdded(name);
    depth();
    if (active < workers) spawn();
  }

  // A worker starts on a later microtask, so that add() never runs a reconcile inside its caller.
  function spawn() {
    active += 1;
    const worker = Promise.resolve().then(loop).finally(() => running.delete(worker));
    running.add(worker);
  }

  function addAfter(key, ms) {
    if (!started) return;
    if (!(ms > 0)) { add(key); return; }
    const at = clock.now() + ms;
    const existing = delayed.get(key);
    if (existing && existing.at <= at) return;
    if (existing) timers.clearTimeout(existing.timer);
    const timer = timers.setTimeout(() => { delayed.delete(key); add(key); }, ms);
    timer?.unref?.();
    delayed.set(key, { at, timer });
  }

  function cancelDelay(key) {
    const existing = delayed.get(key);
    if (!existing) return;
    timers.clearTimeout(existing.timer);
    delayed.delete(key);
  }

  // The key's next backoff, counting this failure.
  function addRateLimited(key) {
    const n = (failures.get(key) ?? 0) + 1;
    failures.set(key, n);
    metrics?.workQueueRetried(name);
    addAfter(key, Math.min(backoff.maxMs, backoff.baseMs * 2 ** (n - 1)));
  }

  async function loop() {
    try {
      await work();
    } finally {
      active -= 1;
    }
  }

  async function work() {
    while (started && order.length > 0) {
      const key = order.shift();
      const addedAt = queued.get(key);
      queued.delete(key);
      depth();
      current.add(key);
      const startedAt = clock.now();
      let outcome = 'done';
      try {
        const answer = await reconcile(key);
        failures.delete(key);
        if (answer?.requeueAfterMs > 0) addAfter(key, answer.requeueAfterMs);
      } catch (err) {
        outcome = 'failed';
        log.warn({ key, err: err.message, failures: (failures.get(key) ?? 0) + 1 }, 'reconcile failed; the key is retried after its backoff');
        addRateLimited(key);
      } finally {
        current.delete(key);
        metrics?.workQueueReconciled(name, outcome, (startedAt - addedAt) / 1000, (clock.now() - startedAt) / 1000);
      }
      // Added again while it ran: once more now, unless it failed (its backoff has put it back already).
      if (dirty.delete(key) && outcome !== 'failed') add(key);
    }
  }

  // Takes no more work, drops what waits, and resolves once the reconciles under way (if any) have returned.
  async function stop() {
    started = false;
    for (const { timer } of delayed.values()) timers.clearTimeout(timer);
    delayed.clear();
    order.length = 0;
    queued.clear();
    dirty.clear();
    depth();
    await Promise.all([...running]);
  }

  return {
    add,
    addAfter,
    addRateLimited,
    forget: (key) => failures.delete(key),
    // Starts taking work; returns the stop function (the runner's part).
    start() {
      started = true;
      return stop;
    },
    stop,
    // What waits now (GET /v1/cluster may show it; tests do).
    view: () => ({
      queued: [...order], delayed: [...delayed.entries()].map(([key, d]) => ({ key, inMs: Math.max(0, d.at - clock.now()) })), current: [...current], failures: Object.fromEntries(failures),
    }),
    // Until no worker runs (what a reconcile adds meanwhile included).
    async idle() {
      while (running.size > 0) await Promise.all([...running]);
    },
  };
}
