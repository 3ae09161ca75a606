// createGate(deps): the query gate's TCP server. Each accepted client gets a session (./session.js) with an upstream
// connection of its own to GATE_UPSTREAM (a `rethinkdb proxy` or a server), over TLS when configured, and may be
// served over TLS itself. It never listens on its own: start() does. stop() stops accepting, lets the queries in
// flight finish within the drain time, then closes what is left.

import { readFileSync } from 'node:fs';
import { createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { createServer as createTlsServer, connect as tlsConnect } from 'node:tls';
import { createSession } from './session.js';

export function createGate({ config, metrics, clock, logger }) {
  const log = logger.child({ module: 'gate' });
  const sessions = new Set();
  // Every client socket accepted and not closed yet, whatever its session's state (stop() destroys what is left).
  const sockets = new Set();
  let server = null;
  let accepting = false;

  function connectUpstream() {
    const { host, port } = config.upstream;
    const socket = config.upstreamTls.enabled
      ? tlsConnect({
        host, port, servername: config.upstreamTls.servername ?? host, ca: config.upstreamTls.caFile ? readFileSync(config.upstreamTls.caFile) : undefined,
      })
      : tcpConnect({ host, port });
    socket.setNoDelay(true);
    // A connection that is not up within the limit is given up (the client's is closed with it).
    const timer = setTimeout(() => socket.destroy(new Error(`could not connect to ${host}:${port} within ${config.connectTimeoutMs} ms`)), config.connectTimeoutMs);
    socket.once(config.upstreamTls.enabled ? 'secureConnect' : 'connect', () => clearTimeout(timer));
    socket.once('close', () => clearTimeout(timer));
    return socket;
  }

  function accept(client) {
    if (!accepting) { client.destroy(); return; }
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.setNoDelay(true);
    const session = createSession({
      client, connectUpstream, config, metrics, clock, logger: log, onClose: () => sessions.delete(session),
    });
    sessions.add(session);
  }

  function start() {
    server = config.tls.enabled
      ? createTlsServer({ cert: readFileSync(config.tls.certFile), key: readFileSync(config.tls.keyFile) }, accept)
      : createTcpServer(accept);
    accepting = true;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(config.port, config.host, () => {
        server.off('error', reject);
        server.on('error', (err) => log.error({ err: err.message }, 'gate server error'));
        resolve({ port: server.address().port });
      });
    });
  }

  // Stops accepting; each session closes once nothing of it is in flight; what is left after drainMs is closed. Never
  // waits longer than drainMs and a second: a socket that does not close by itself is destroyed.
  async function stop(drainMs = config.drainSeconds * 1000) {
    accepting = false;
    const closedServer = new Promise((resolve) => { if (server) server.close(() => resolve()); else resolve(); });
    for (const session of sessions) session.drain();
    const until = clock.now() + drainMs;
    while (sessions.size > 0 && clock.now() < until) await clock.sleep(Math.min(50, until - clock.now()));
    const left = sessions.size;
    for (const session of [...sessions]) session.destroy('the gate stopped before the query finished');
    await Promise.race([closedServer, clock.sleep(1000)]);
    for (const socket of sockets) socket.destroy();
    return { closedWithQueriesInFlight: left };
  }

  return {
    start, stop, connections: () => sessions.size, ready: () => accepting,
  };
}
