// createGate(deps): the query gate's TCP server. Each accepted client gets a session (./session.js) with an upstream
// connection of its own to GATE_UPSTREAM (a `rethinkdb proxy` or a server), over TLS when configured, and may be
// served over TLS itself. It never listens on its own: start() does. leave() turns /readyz false and keeps serving
// for the shutdown delay; stop() stops accepting, lets the queries in flight finish within the drain time, then
// closes what is left. hold() and release() serve the manager's holds
// (./holds.js): a hold answers once no query of its tables is in flight through this gate, or after its drainMs.

import { readFileSync } from 'node:fs';
import { createServer as createTcpServer, connect as tcpConnect } from 'node:net';
import { createServer as createTlsServer, connect as tlsConnect } from 'node:tls';
import { createByteBudget } from './budget.js';
import { createHolds } from './holds.js';
import { createSession } from './session.js';

const LIMIT_LOG_MS = 10000;
const LIMIT_MESSAGES = {
  retained_bytes: 'a query was relayed without a copy for a retry or a hold: the gate keeps GATE_MAX_RETAINED_BYTES at most',
  partial_frame_bytes: 'a connection was closed: half-received frames would hold more than GATE_MAX_PARTIAL_FRAME_BYTES',
  frame_timeout: 'a connection was closed: a frame did not arrive whole within GATE_FRAME_TIMEOUT_MS',
  handshake_timeout: 'a connection was closed: its handshake did not finish within GATE_HANDSHAKE_TIMEOUT_MS',
  connections: 'a connection was refused: the gate has GATE_MAX_CONNECTIONS open',
};

export function createGate({ config, metrics, clock, logger }) {
  const log = logger.child({ module: 'gate' });
  const sessions = new Set();
  // Every client socket accepted and not closed yet, whatever its session's state (stop() destroys what is left).
  const sockets = new Set();
  let server = null;
  let accepting = false;
  let stopping = false;
  // Leaving (leave()): still accepting and serving, but /readyz says not ready, so that the Service stops sending new
  // connections here before stop() refuses them.
  let leaving = false;
  // The gate-wide bounds (docs/query-gate.md, "Bounds"): bytes kept for retries and holds, bytes of half-received
  // frames, connections.
  const budgets = {
    retained: createByteBudget({ limit: config.maxRetainedBytes ?? 64 * 1024 * 1024 }),
    partial: createByteBudget({ limit: config.maxPartialFrameBytes ?? 192 * 1024 * 1024 }),
  };
  metrics.watchBudgets?.(budgets);
  const maxConnections = config.maxConnections ?? 2048;
  // A bound that bites is counted each time and logged at most once every LIMIT_LOG_MS per kind, with how often it bit.
  const limitLog = new Map();
  function onLimit(kind, details = {}) {
    metrics.limitHit(kind);
    const now = clock.now();
    const last = limitLog.get(kind) ?? { at: -Infinity, since: 0 };
    last.since += 1;
    if (now - last.at >= LIMIT_LOG_MS) {
      log.warn({ limit: kind, ...details, times: last.since }, LIMIT_MESSAGES[kind] ?? 'a gate limit was reached');
      last.at = now;
      last.since = 0;
    }
    limitLog.set(kind, last);
  }
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
    if (sockets.size >= maxConnections) {
      onLimit('connections', { maxConnections });
      // What the server says to a client it will not serve, as the V1_0 handshake's drivers show it.
      client.end(`ERROR: rethinkdb-query-gate has ${sockets.size} connections open, its limit (GATE_MAX_CONNECTIONS).\0`);
      client.on('error', () => {});
      setTimeout(() => client.destroy(), 1000).unref();
      return;
    }
    sockets.add(client);
    client.once('close', () => sockets.delete(client));
    client.setNoDelay(true);
    const session = createSession({
      client, connectUpstream, config, metrics, clock, logger: log, holds, budgets, onLimit, onClose: () => sessions.delete(session),
    });
    sessions.add(session);
  }

  // Each second: a frame begun and not completed within GATE_FRAME_TIMEOUT_MS closes its connection.
  let sweeper = null;
  const sweep = () => { const now = clock.now(); for (const session of sessions) session.sweep(now); };

  function start() {
    sweeper = setInterval(sweep, 1000);
    sweeper.unref();
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

  // The first half of a shutdown: not ready from now on, and serving as before for delayMs, so that the endpoints
  // behind the Service drop this gate while its listener still accepts (a client that reconnects in that time, to an
  // address not yet updated, is served here, not refused). Returns at once when delayMs is 0 or once stop() began.
  async function leave(delayMs = (config.shutdownDelaySeconds ?? 0) * 1000) {
    leaving = true;
    const until = clock.now() + delayMs;
    while (!stopping && clock.now() < until) await clock.sleep(Math.min(100, until - clock.now()));
    return { leftAfterMs: delayMs - Math.max(0, until - clock.now()) };
  }

  // Stops accepting; each session closes once nothing of it is in flight; what is left after drainMs is closed. Never
  // waits longer than drainMs and a second: a socket that does not close by itself is destroyed.
  async function stop(drainMs = config.drainSeconds * 1000) {
    accepting = false;
    stopping = true;
    clearInterval(sweeper);
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
    ready: () => accepting && !leaving,
    leave,
    hold,
    release: (id) => holds.release(id),
    holds: () => holds.list(),
    validateHold: (body) => holds.validate(body),
    heldQueries: () => [...sessions].reduce((n, session) => n + session.heldCount(), 0),
    sweep,
    budgets,
  };
}
