// The real system-table source: the official driver, one connection kept alive with backoff.

import { appError, AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import {
  buildCreateDatabase, buildCreateProbeTable, buildDropProbeTable, buildPing, buildPlaceProbeTable, buildReadProbeTables, buildReadSystemTables,
  buildReadTableServerStats, buildReadTableStatus, buildSetHeartbeatTimeout, buildUpdateTableShards,
} from './queries.js';

// runQuery(term) -> Promise<result>. Tests pass a fake that records term.build() and replays fixtures.
// connections: the connection manager, which learns the servers' addresses from each read.
export function createRethinkDbSource({ r, runQuery, connections = null }) {
  return {
    kind: 'rethinkdb',
    async readSystemTables({ backfills = true } = {}) {
      const raw = await runQuery(buildReadSystemTables(r, { backfills }), 'read system tables');
      connections?.learn(raw.serverStatus);
      return raw;
    },
    steerAwayFrom: async (serverIds) => connections?.steerAwayFrom(serverIds) ?? { moved: false, reason: 'no connection manager' },
    updateTableShards: (tableId, rawShards) => runQuery(buildUpdateTableShards(r, tableId, rawShards), 'update table_config'),
    readTableServerStats: () => runQuery(buildReadTableServerStats(r), 'read table_server stats'),
    readTableStatus: (tableId) => runQuery(buildReadTableStatus(r, tableId), 'read table_status'),
    updateHeartbeatTimeout: (seconds) => runQuery(buildSetHeartbeatTimeout(r, seconds), 'update cluster_config heartbeat'),
    readProbeTables: (db) => runQuery(buildReadProbeTables(r, db), 'read the disk probes\' tables'),
    createProbeTable: async (db, table) => {
      await runQuery(buildCreateDatabase(r, db), `create database ${db}`);
      return runQuery(buildCreateProbeTable(r, db, table), `create table ${db}.${table}`);
    },
    placeProbeTable: (tableId, server) => runQuery(buildPlaceProbeTable(r, tableId, server), 'place a disk probe table'),
    dropProbeTable: (tableId) => runQuery(buildDropProbeTable(r, tableId), 'drop a disk probe table'),
    ping: async () => { await runQuery(buildPing(r), 'ping'); return true; },
    close: async () => {},
  };
}

// Runs a term on the managed connection within a time limit, translating driver errors into ours.
export function createQueryRunner({ connections, queryTimeoutMs }) {
  return async function runQuery(term, what) {
    const conn = connections.get();
    let timedOut = false;
    try {
      return await withinMs(term.run(conn), queryTimeoutMs, () => {
        timedOut = true;
        return appError('storeSlow', { what, ms: queryTimeoutMs });
      });
    } catch (err) {
      const translated = translateDriverError(err, what);
      // A timed-out connection may be half-open (it still says open): drop it, which also abandons the
      // query, and reconnect. Other unavailability errors drop it only if the driver saw it close.
      if (translated.code === 'DATA_STORE_UNAVAILABLE') connections.reportFailure(err, { force: timedOut });
      throw translated;
    }
  };
}

export function translateDriverError(err, what) {
  if (err instanceof AppError) return err;
  const name = err?.name ?? '';
  const message = err?.msg ?? err?.message ?? String(err);
  if (name === 'ReqlDriverError' || name === 'ReqlTimeoutError' || name === 'ReqlAvailabilityError'
    || /ECONNREFUSED|ECONNRESET|EHOSTUNREACH|ETIMEDOUT|closed/i.test(message)) {
    return appError('storeUnavailable', { what, message }, { cause: err });
  }
  if (name === 'ReqlOpFailedError' || name === 'ReqlOpIndeterminateError') {
    return appError('storeRefused', { what, message }, { cause: err });
  }
  return appError('storeError', { what, name, message }, { cause: err });
}

// Keeps one connection open to one server of the cluster. It starts from the seed hosts and learns every
// server's driver addresses from server_status (hostname and canonical addresses, at network.reql_port), so
// that when the server it goes through is lost it reconnects at once through another live one; only when none
// answers does it back off exponentially. steerAwayFrom(serverIds) moves the connection off servers about to
// stop or be drained, before they go. get() never waits: it throws DATA_STORE_UNAVAILABLE at once while
// there is no connection, so callers answer 503 instead of hanging.
// connect(address) -> a driver connection to { host, port }.
export function createConnectionManager({
  connect, seeds = [], clock, logger, reconnectMinMs, reconnectMaxMs, closeGraceMs = 5000, connectStaggerMs = 0,
}) {
  let conn = null;
  let via = null;
  let lastError = null;
  let attempts = 0;
  let closed = false;
  let loop = null;
  const learned = new Map();
  let avoided = new Set();

  // Every address to try, each once: those of servers not avoided first, then the seeds, then avoided servers.
  function candidates({ skip = new Set() } = {}) {
    const servers = [...learned.entries()].flatMap(([serverId, s]) => s.addresses.map((a) => ({ ...a, serverId, name: s.name })));
    const ordered = [...servers.filter((a) => !avoided.has(a.serverId)), ...seeds.map((a) => ({ ...a, serverId: null })), ...servers.filter((a) => avoided.has(a.serverId))];
    const seen = new Set();
    return ordered.filter((a) => {
      const key = `${a.host}:${a.port}`;
      if (seen.has(key) || (a.serverId && skip.has(a.serverId))) return false;
      seen.add(key);
      return true;
    });
  }

  // The first address that accepts, and the server behind it (the driver asks the server who it is). Addresses are
  // dialled in order; with connectStaggerMs, the next one is also dialled when the last has not answered within it (a
  // frozen or cut-off server costs a whole connect timeout per address, and a live one may be next), and a refusal
  // dials the next at once. The first connection that answers wins, except one through a server the order puts last
  // (avoided, or in `skip`: a seed may lead to it): that one is kept aside and wins only if no other answers, so that
  // the stagger never changes which server is preferred. Connections that answer after the winner are closed.
  function connectToAny(options = {}) {
    const list = candidates(options);
    if (list.length === 0) return Promise.reject(new Error('no RethinkDB address to connect to'));
    const last = (serverId) => Boolean(serverId) && (avoided.has(serverId) || Boolean(options.skip?.has(serverId)));
    return new Promise((resolve, reject) => {
      let next = 0;
      let pending = 0;
      let done = false;
      let failure = null;
      let fallback = null;
      const finish = (fn, value) => { done = true; fn(value); };
      const end = () => {
        if (pending > 0 || next < list.length) return false;
        if (fallback) finish(resolve, fallback);
        else finish(reject, failure);
        return true;
      };
      const dialNext = () => {
        if (done) return;
        // Closed meanwhile: no more dialling (a closed store's old addresses may belong to something else by now).
        if (closed) { discard(fallback); finish(reject, new Error('the connection manager is closed')); return; }
        if (next >= list.length) { end(); return; }
        const address = list[next];
        const index = next;
        next += 1;
        pending += 1;
        attempts += 1;
        dial(address).then((won) => {
          pending -= 1;
          if (done || closed) { discard(won); if (!done) dialNext(); return; }
          if (last(won.address.serverId)) {
            if (fallback) discard(won);
            else fallback = won;
            if (!end() && next === index + 1) dialNext();
            return;
          }
          discard(fallback);
          finish(resolve, won);
        }, (err) => {
          pending -= 1;
          failure = err;
          if (done) return;
          logger.warn({ err: { message: err.message }, host: address.host, port: address.port }, 'rethinkdb connect failed');
          dialNext();
        });
        if (connectStaggerMs > 0) clock.sleep(connectStaggerMs).then(() => { if (next === index + 1) dialNext(); });
      };
      dialNext();
    });
  }

  // A connection that lost the race: closed, with a listener for an error while it closes (none is left on it).
  function discard(won) {
    if (!won) return;
    won.c.on?.('error', () => {});
    won.c.close?.({ noreplyWait: false })?.catch?.(() => {});
  }

  async function dial(address) {
    const c = await connect(address);
    // Until it is adopted, a connection that breaks (a server going down right now) is refused here; its
    // 'error' event must have a listener, or it would be an uncaught exception.
    let broken = null;
    const onBroken = (err) => { broken = err ?? new Error('connection closed'); };
    c.on?.('error', onBroken);
    c.on?.('close', onBroken);
    const server = c.server ? await c.server().catch(() => null) : null;
    c.removeListener?.('error', onBroken);
    c.removeListener?.('close', onBroken);
    if (broken) throw broken;
    return { c, address: { host: address.host, port: address.port, serverId: server?.id ?? address.serverId, name: server?.name ?? address.name ?? null } };
  }

  function adopt(c, address) {
    conn = c;
    via = address;
    lastError = null;
    c.on?.('close', () => onLost(c, new Error('connection closed')));
    c.on?.('error', (err) => onLost(c, err));
    logger.info({ attempts, host: address.host, port: address.port, server: address.name }, 'rethinkdb connected');
  }

  async function connectLoop() {
    let delayMs = reconnectMinMs;
    // The server just lost is tried last in the first round: another live one is taken at once.
    let skip = via?.serverId ? new Set([via.serverId]) : new Set();
    while (!closed && !conn) {
      try {
        const { c, address } = await connectToAny({ skip });
        if (closed) { await c.close().catch(() => {}); return; }
        adopt(c, address);
        return;
      } catch (err) {
        if (skip.size > 0) { skip = new Set(); continue; }
        lastError = err;
        logger.warn({ err: { message: err.message }, attempts, retryInMs: delayMs }, 'no RethinkDB server answered; retrying');
        await clock.sleep(delayMs);
        delayMs = Math.min(reconnectMaxMs, delayMs * 2);
      }
    }
  }

  function onLost(c, err) {
    if (conn !== c) return;
    conn = null;
    lastError = err;
    if (!closed) {
      logger.warn({ err: { message: err?.message }, server: via?.name }, 'rethinkdb connection lost; reconnecting through another server');
      ensureLoop();
    }
  }

  function ensureLoop() {
    if (!loop) loop = connectLoop().finally(() => { loop = null; });
  }

  // server_status documents: each connected server's driver addresses (hostname and canonical hosts).
  function learn(serverStatus) {
    learned.clear();
    for (const s of serverStatus ?? []) {
      const port = s.network?.reql_port;
      if (!port) continue;
      // A loopback canonical address beside another names the server only to itself (the chart advertises 127.0.0.1
      // beside the pod's IP, see deploy/k8s/rethinkdb-statefulset.yaml): from here it would reach this pod, not that
      // server. A server whose canonical addresses are all loopback (every server on one host) keeps them.
      const canonical = (s.network.canonical_addresses ?? []).map((a) => a.host).filter(Boolean);
      const routable = canonical.filter((host) => !isLoopback(host));
      const hosts = [...new Set([s.network.hostname, ...(routable.length > 0 ? routable : canonical)].filter(Boolean))];
      learned.set(s.id, { name: s.name, hostname: s.network.hostname ?? null, addresses: hosts.map((host) => ({ host, port })) });
    }
  }

  // Before servers stop or are drained: the connection moves through another one, if one answers.
  async function steerAwayFrom(serverIds) {
    avoided = new Set(serverIds);
    if (!conn || !via?.serverId || !avoided.has(via.serverId)) return { moved: false, reason: 'not connected through these servers' };
    const from = via;
    try {
      const { c, address } = await connectToAny({ skip: avoided });
      if (address.serverId && avoided.has(address.serverId)) {
        await c.close({ noreplyWait: false }).catch(() => {});
        return { moved: false, reason: 'no other server answered' };
      }
      const old = conn;
      adopt(c, address);
      // Queries already running on the old connection get time to finish before it is closed.
      clock.sleep(closeGraceMs).then(() => old.close({ noreplyWait: false })).catch(() => {});
      logger.info({ from: from.name, to: address.name }, 'rethinkdb connection moved off a server that is about to stop');
      return { moved: true, from: from.name, to: address.name };
    } catch (err) {
      return { moved: false, reason: `no other server answered: ${err.message}` };
    }
  }

  return {
    start: ensureLoop,
    get() {
      if (!conn) {
        throw appError('notConnected', { lastError: lastError && (lastError.message ?? lastError.msg) });
      }
      return conn;
    },
    reportFailure(err, { force = false } = {}) {
      const c = conn;
      if (!c || (!force && c.open)) return;
      onLost(c, err);
      if (force) c.close({ noreplyWait: false }).catch(() => {});
    },
    learn,
    // The servers server_status listed at the last read, with their driver addresses: [{ serverId, name, addresses }].
    servers: () => [...learned.entries()].map(([serverId, s]) => ({
      serverId, name: s.name, hostname: s.hostname, addresses: s.addresses,
    })),
    steerAwayFrom,
    status: () => ({
      connected: conn !== null, attempts, via: via ? { host: via.host, port: via.port, server: via.name } : null,
      lastError: lastError ? String(lastError.message ?? lastError.msg) : null,
    }),
    async close() {
      closed = true;
      const c = conn;
      conn = null;
      if (c) await c.close({ noreplyWait: false }).catch(() => {});
    },
  };
}

// 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost.
export function isLoopback(host) {
  const h = String(host).toLowerCase().replace(/^\[|\]$/g, '').replace(/^::ffff:/, '');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}
