// Wires the manager from its dependencies. Used by src/server.js with real clients and by tests with fakes.

import { createActions } from './actions/actions.js';
import { createOperationRegistry } from './actions/operations.js';
import { createReconfigurer } from './actions/reconfigurer.js';
import { createHooks } from './actions/hooks.js';
import { createApp } from './app.js';
import { createKeyedMutex } from './lib/keyed-mutex.js';
import { createWorkTracker } from './lib/work-tracker.js';
import { createHookRoutes } from './routes/hook-routes.js';
import { createStateStore } from './state/state-store.js';

export function createManager({ config, store, kube = null, clock, logger, extraRoutes = [] }) {
  const locks = createKeyedMutex();
  const marks = createStateStore({ kube, clock, logger });
  const operations = createOperationRegistry({ clock, logger });
  const work = createWorkTracker();
  const reconfigurer = createReconfigurer({ store, locks, marks, clock, logger, waitPollIntervalMs: config.waitPollIntervalMs });
  const actions = createActions({ store, reconfigurer, marks, operations, kube, clock, logger, config });
  const hooks = createHooks({ store, actions, kube, config, logger });
  const hookRoutes = createHookRoutes({ hooks, work, prestopDeadlineSeconds: config.deadlines.prestopSeconds });
  const app = createApp({ store, actions, marks, operations, work, logger, extraRoutes: [hookRoutes, ...extraRoutes] });

  // Stop taking work, let running actions and operations finish within graceMs, then close the store.
  async function shutdown(graceMs) {
    work.beginShutdown();
    const settled = Promise.all([work.drain(), operations.drain()]).then(() => true);
    const finished = await Promise.race([settled, clock.sleep(graceMs).then(() => false)]);
    await store.close();
    return { finished, inFlight: work.inFlightCount(), runningOperations: operations.runningCount() };
  }

  return { app, actions, marks, operations, work, store, shutdown };
}
