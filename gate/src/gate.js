// createGate(deps): the query gate's TCP server. Each accepted client gets a session (./session.js) with an upstream
// connection of its own to GATE_UPSTREAM (a `rethinkdb proxy` or a server), over TLS when configured, and may be
// served over TLS itself. It never listens on its own: start() does. stop() stops accepting, lets the queries in
// flight finish within the drain time, then closes what is left. hold() and release() serve the manager's holds
// (./holds.js): a hold answers once no query of its tables is in flight through this gate, or after its drainMs.

import { readFileSync } from 'node:fs';
import { createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { createServer as createTlsServer, connect as tlsConnect } from 'node:tls';
import { createHolds } from './holds.js';
import { createSession } from './session.js';

export function createGate({ config, metrics, clock, logger }) {
  const log = logger.child({ module: 'gate' });
  const sessions = new Set();
  // Every client socket accepted and not closed yet, whatever its session's state (stop() destroys what is left).
  const sockets = new Set();
  let server = null;
  let accepting = false;
  let stopping = false;
  const holds = createHolds({
    maxMs: config.hold?.maxMs ?? 5000,
    clock,
    onChange: (ended) => {
      metrics.holdEnded(ended.how, ended.heldMs);
      log.info({ hold: ended.id, tables: ended.tables, how: ended.how, heldMs: ended.heldMs }, 'hold ended');
      for (const session of sessions) session.releaseHeld();
    },
  });

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
      client, connectUpstream, config, metrics, clock, logger: log, holds, onClose: () => sessions.delete(session),
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
    stopping = true;
    // What holds keep back goes up now: a drain that waited for the holds could outlast its own deadline and close
    // connections with queries never sent, which their clients could not tell from queries lost.
    holds.clear();
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

  // Holds `tables` for ttlMs; answers once no query of them is in flight here, or when drainMs have passed (inFlight
  // then says how many were). abandoned(): the caller went away; the hold, whose id it will never know, ends then.
  // -> the hold, or { refused } (stopping; abandoned; expired while it drained: nothing is held then).
  async function hold({ tables, ttlMs, drainMs }, { abandoned = () => false } = {}) {
    if (stopping) return { refused: 'the gate is stopping' };
    const held = holds.add({ tables, ttlMs });
    metrics.holdStarted();
    const names = new Set(tables);
    const inFlightNow = () => [...sessions].reduce((n, session) => n + session.inFlightTouching(names), 0);
    const startedAt = clock.now();
    let inFlight = inFlightNow();
    while (inFlight > 0 && clock.now() - startedAt < drainMs && !abandoned() && holds.has(held.id)) {
      await clock.sleep(2);
      inFlight = inFlightNow();
    }
    if (abandoned()) { holds.release(held.id); return { refused: 'the caller went away before the hold answered' }; }
    if (!holds.has(held.id)) return { refused: 'the hold ended while it drained (its ttl, or the gate stopping)' };
    const drainedMs = clock.now() - startedAt;
    log.info({ hold: held.id, tables, ttlMs, inFlight, drainedMs }, 'hold started');
    return { ...held, remainingMs: Math.max(0, held.remainingMs - drainedMs), inFlight, drainedMs };
  }

  return {
    start,
    stop,
    connections: () => sessions.size,
    ready: () => accepting,
    hold,
    release: (id) => holds.release(id),
    holds: () => holds.list(),
    validateHold: (body) => holds.validate(body),
    heldQueries: () => [...sessions].reduce((n, session) => n + session.heldCount(), 0),
  };
}
