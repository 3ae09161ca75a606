// Builds the real data store: the official driver, one managed connection, the query runner and the system-table
// source. Used by src/server.js and by the tests that run the manager against real RethinkDB servers.

import { readFileSync } from 'node:fs';
import { createDataStore } from './data-store.js';
import { createConnectionManager, createQueryRunner, createRethinkDbSource } from './rethinkdb-source.js';

// r: the `rethinkdb` driver module. Returns the store, the connection manager (status) and close().
export function createRethinkDbStore({ r, config, clock, logger }) {
  const rc = config.rethinkdb;
  const ssl = rc.tls ? {
    ...(rc.tlsCaFile ? { ca: readFileSync(rc.tlsCaFile) } : {}),
    ...(rc.tlsServername ? { servername: rc.tlsServername } : {}),
  } : undefined;
  const connections = createConnectionManager({
    connect: (address) => r.connect({ host: address.host, port: address.port, user: rc.user, password: rc.password, timeout: rc.connectTimeoutSeconds, ssl }),
    seeds: rc.seeds,
    clock,
    logger: logger.child({ module: 'rethinkdb' }),
    reconnectMinMs: rc.reconnectMinMs,
    reconnectMaxMs: rc.reconnectMaxMs,
  });
  connections.start();
  logger.info({ seeds: rc.seeds, user: rc.user, tls: rc.tls }, 'connecting to RethinkDB');
  const source = createRethinkDbSource({ r, runQuery: createQueryRunner({ connections, queryTimeoutMs: rc.queryTimeoutMs }), connections });
  const store = createDataStore({ source, managedTables: config.managedTables });
  return { store, connections, close: () => connections.close() };
}
