// Builds the real data store: the official driver, one managed connection, the query runner and the system-table
// source. Used by src/server.js and by the tests that run the manager against real RethinkDB servers.

import { readFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import { probeTableOf } from '../policy/disk-probe.js';
import { createDataStore } from './data-store.js';
import { buildDiskProbe } from './queries.js';
import { createConnectionManager, createQueryRunner, createRethinkDbSource } from './rethinkdb-source.js';

// A reconnect dials the next address when the last has not answered within this: a frozen server (SIGSTOP, a hung
// node) answers no connect until RETHINKDB_CONNECT_TIMEOUT_SECONDS, once per address it has (measured on 2.4.4: a
// PRESTOP's reconnect tried a frozen server's two addresses for 12 s before reaching a live server).
const CONNECT_STAGGER_MS = 500;

// r: the `rethinkdb` driver module. Returns the store, the connection manager (status), the prober's targets and close().
export function createRethinkDbStore({ r, config, clock, logger }) {
  const rc = config.rethinkdb;
  const ssl = rc.tls ? {
    ...(rc.tlsCaFile ? { ca: readFileSync(rc.tlsCaFile) } : {}),
    ...(rc.tlsServername ? { servername: rc.tlsServername } : {}),
  } : undefined;
  const connect = (address) => r.connect({ host: address.host, port: address.port, user: rc.user, password: rc.password, timeout: rc.connectTimeoutSeconds, ssl });
  const connections = createConnectionManager({
    connect: async (address) => {
      await refuseClusterPort(address);
      return connect(address).catch(async (err) => { throw await explainConnectFailure(err, address); });
    },
    seeds: rc.seeds,
    clock,
    logger: logger.child({ module: 'rethinkdb' }),
    reconnectMinMs: rc.reconnectMinMs,
    reconnectMaxMs: rc.reconnectMaxMs,
    connectStaggerMs: CONNECT_STAGGER_MS,
  });
  connections.start();
  logger.info({ seeds: rc.seeds, user: rc.user, tls: rc.tls }, 'connecting to RethinkDB');
  const source = createRethinkDbSource({ r, runQuery: createQueryRunner({ connections, queryTimeoutMs: rc.queryTimeoutMs }), connections });
  const store = createDataStore({ source, managedTables: config.managedTables, probeDb: config.latency.diskProbeDb });
  // What the manager's prober (./prober.js) needs: the servers last listed, a connection of its own to one, a probe.
  // probeVia: a server's row of rethinkdb.stats through another server's connection, which that server fetches over the
  // cluster's links (it waits for an answer up to 5 s: stats_backend.cc).
  const probeTargets = {
    listServers: () => connections.servers(), connect, probe: (c) => r.expr(1).run(c), probeVia: (c, serverId) => r.db('rethinkdb').table('stats').get(['server', serverId]).run(c),
    probeDisk: (c, serverName) => buildDiskProbe(r, config.latency.diskProbeDb, probeTableOf(serverName)).run(c),
  };
  return {
    store, connections, probeTargets, close: () => connections.close(),
  };
}

// A connection that failed without a RethinkDB answer (the driver says only "operation timed out") may have reached
// another of RethinkDB's ports: what the port says to an HTTP request names it (wrongPortOf). The error is returned
// with that added, or as it was.
async function explainConnectFailure(err, address, probeMs = 1000) {
  if (!/timed out|handshake|unexpected|parse/i.test(`${err.message ?? err.msg}`)) return err;
  const first = await firstBytes(address, probeMs).catch(() => null);
  const wrong = first ? wrongPortOf(first) : null;
  if (!wrong) return err;
  const explained = new Error(`${err.message ?? err.msg} ${address.host}:${address.port} ${wrong}`);
  explained.name = err.name;
  return explained;
}

// Pure: what another RethinkDB port's first answer to "GET / HTTP/1.0" says it is, or null.
export function wrongPortOf(bytes) {
  const text = bytes.toString('latin1', 0, Math.min(bytes.length, 64));
  if (text.startsWith('HTTP/')) {
    return 'answers HTTP: it is a web port (RethinkDB\'s web UI listens on 8080), not the driver port; point RETHINKDB_HOST (or RETHINKDB_PORT) at the driver port (28015)';
  }
  if (text.startsWith('RethinkDB cluster')) {
    return 'is RethinkDB\'s cluster port (29015), where servers join each other, not the driver port; point RETHINKDB_HOST (or RETHINKDB_PORT) at the driver port (28015)';
  }
  return null;
}

// RethinkDB's cluster port greets every connection with "RethinkDB cluster\n..." at once; the driver, given that
// port, throws its ReqlDriverError from a socket callback, where nothing can catch it, and the process dies. So the
// address is listened to for a moment first (the driver port and others say nothing until spoken to), and a
// cluster port is refused with a sentence. A connection that fails here is left to the driver to report.
async function refuseClusterPort(address, ms = 50) {
  const greeting = await firstBytes(address, ms, { send: null }).catch(() => null);
  const wrong = greeting ? wrongPortOf(greeting) : null;
  if (wrong) throw Object.assign(new Error(`Could not connect to ${address.host}:${address.port}: it ${wrong}`), { name: 'ReqlDriverError' });
}

// The first bytes a TCP port sends (after `send`, an HTTP request by default), within ms (none: an empty buffer).
function firstBytes({ host, port }, ms, { send = 'GET / HTTP/1.0\r\n\r\n' } = {}) {
  return new Promise((resolve, reject) => {
    const socket = tcpConnect({ host, port }, () => { if (send) socket.write(send); });
    let got = Buffer.alloc(0);
    const done = () => { clearTimeout(timer); socket.destroy(); resolve(got); };
    const timer = setTimeout(done, ms);
    socket.on('data', (chunk) => { got = Buffer.concat([got, chunk]); if (got.length >= 17) done(); });
    socket.on('error', (e) => { clearTimeout(timer); reject(e); });
    socket.on('close', done);
  });
}
