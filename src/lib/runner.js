// Long-lived parts that start and stop, in three groups, as controller-runtime's manager runs its runnables:
//   serving  from start() to the very end (stopServing()): the ports (src/listeners.js), started first, so that a
//            port that cannot be listened on fails the start before anything else runs;
//   always   from start() to stopAlways(): the periodic timers;
//   leading  while this replica leads and has loaded its state: the node watch.
// A part is { name, group, start }: start() returns its stop function, or null when it has nothing to run (no
// Kubernetes API, the feature off). A part already running is not started twice. Starts and stops run one at a time,
// in the order they were asked for: a stop asked while a start is under way (a replica that loses the Lease while it
// starts leading) stops what that start started.

export function createRunner({ logger }) {
  const log = logger.child({ module: 'runner' });
  const parts = [];
  const running = new Map();
  let changes = Promise.resolve();
  const inTurn = (change) => {
    changes = changes.catch(() => {}).then(change);
    return changes;
  };

  async function startGroup(group) {
    for (const part of parts.filter((p) => p.group === group && !running.has(p.name))) {
      const stop = await part.start();
      if (stop) running.set(part.name, stop);
    }
  }

  // In the reverse of the order they started; a stop that fails is logged, and the others still stop.
  async function stopGroup(group) {
    for (const part of parts.filter((p) => p.group === group).reverse()) {
      const stop = running.get(part.name);
      if (!stop) continue;
      running.delete(part.name);
      await Promise.resolve().then(stop).catch((err) => log.warn({ part: part.name, err: err.message }, 'a part did not stop cleanly'));
    }
  }

  return {
    add(part) {
      if (!['serving', 'always', 'leading'].includes(part.group)) throw new TypeError(`unknown runner group ${part.group}`);
      parts.push(part);
    },
    start: () => inTurn(async () => {
      await startGroup('serving');
      await startGroup('always');
    }),
    startLeading: () => inTurn(() => startGroup('leading')),
    stopLeading: () => inTurn(() => stopGroup('leading')),
    stopAlways: () => inTurn(() => stopGroup('always')),
    stopServing: () => inTurn(() => stopGroup('serving')),
    // The names of the parts running now (GET /v1/cluster's leadership view may show them; tests do).
    running: () => [...running.keys()],
  };
}
