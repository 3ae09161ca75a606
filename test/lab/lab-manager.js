// The manager wired to a lab cluster the way src/server.js wires it to a real one (config, the real driver path
// through src/rethinkdb/connect.js, reconcile before any work), for the real-cluster tests and the evaluation.

import r from 'rethinkdb';
import { loadConfig } from '../../src/config.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createRethinkDbStore } from '../../src/rethinkdb/connect.js';

// Connected through server `via`; env overrides the lab's defaults (fast polls and reconnects, no monitor, no
// auth). destination: where its log lines go; kube: a Kubernetes port (./lab-kube.js) or none. ready() waits for
// the connection, then leads as src/server.js's replica without an election does (reconciles, then starts what runs
// while leading).
export function createLabManager(cluster, { via = 0, env = {}, destination = process.stderr, kube = null } = {}) {
  const s = cluster.servers[via];
  const config = loadConfig({
    RETHINKDB_HOST: s.host, RETHINKDB_PORT: String(s.driverPort), WAIT_POLL_INTERVAL_MS: '100', RETHINKDB_RECONNECT_MIN_MS: '100',
    RETHINKDB_RECONNECT_MAX_MS: '500', RETHINKDB_QUERY_TIMEOUT_MS: '3000', MONITOR_ENABLED: 'false', LOG_LEVEL: 'info', AUTH_MODE: 'none', ...env,
  });
  const logger = createLogger({ level: config.logLevel, destination });
  const clock = createSystemClock();
  const { store, connections, probeTargets, close } = createRethinkDbStore({ r, config, clock, logger });
  const manager = createManager({ config, store, kube, clock, logger, probeTargets });

  async function ready(timeoutMs = 10000) {
    const until = Date.now() + timeoutMs;
    while (!connections.status().connected) {
      if (Date.now() > until) throw new Error(`manager not connected: ${connections.status().lastError}`);
      await new Promise((res) => { setTimeout(res, 50); });
    }
    await manager.lead();
  }

  // close: the manager's own shutdown (as src/server.js runs it on SIGTERM: running work gets graceMs, what it owes is
  // settled), then the connections.
  return {
    ...manager, config, connections, ready, close: async ({ graceMs = 1000 } = {}) => { await manager.shutdown(graceMs); await close(); },
  };
}
