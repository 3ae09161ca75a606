// The real system-table source: the official driver, one connection kept alive with backoff.

import { AppError } from '../errors.js';
import { withinMs } from '../lib/clock.js';
import { buildPing, buildReadSystemTables, buildUpdateTableShards } from './queries.js';

// runQuery(term) -> Promise<result>. Tests pass a fake that records term.build() and replays fixtures.
export function createRethinkDbSource({ r, runQuery }) {
  return {
    kind: 'rethinkdb',
    readSystemTables: () => runQuery(buildReadSystemTables(r), 'read system tables'),
    updateTableShards: (tableId, rawShards) => runQuery(buildUpdateTableShards(r, tableId, rawShards), 'update table_config'),
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
        return new AppError('DATA_STORE_UNAVAILABLE', `RethinkDB did not answer "${what}" within ${queryTimeoutMs} ms`);
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
    return new AppError('DATA_STORE_UNAVAILABLE', `RethinkDB unavailable during "${what}": ${message}`, { cause: err });
  }
  if (name === 'ReqlOpFailedError' || name === 'ReqlOpIndeterminateError') {
    return new AppError('RECONFIGURATION_REJECTED', `RethinkDB could not "${what}": ${message}`, { cause: err });
  }
  return new AppError('INTERNAL', `RethinkDB error during "${what}": ${name} ${message}`, { cause: err });
}

// Keeps one connection open, reconnecting with exponential backoff. get() never waits: it throws
// DATA_STORE_UNAVAILABLE at once while there is no connection, so callers answer 503 instead of hanging.
export function createConnectionManager({ connect, clock, logger, reconnectMinMs, reconnectMaxMs }) {
  let conn = null;
  let lastError = null;
  let attempts = 0;
  let closed = false;
  let loop = null;

  async function connectLoop() {
    let delayMs = reconnectMinMs;
    while (!closed && !conn) {
      attempts += 1;
      try {
        const c = await connect();
        if (closed) { await c.close().catch(() => {}); return; }
        conn = c;
        lastError = null;
        c.on?.('close', () => onLost(c, new Error('connection closed')));
        c.on?.('error', (err) => onLost(c, err));
        logger.info({ attempts }, 'rethinkdb connected');
        return;
      } catch (err) {
        lastError = err;
        logger.warn({ err: { message: err.message }, attempts, retryInMs: delayMs }, 'rethinkdb connect failed');
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
      logger.warn({ err: { message: err?.message } }, 'rethinkdb connection lost; reconnecting');
      ensureLoop();
    }
  }

  function ensureLoop() {
    if (!loop) loop = connectLoop().finally(() => { loop = null; });
  }

  return {
    start: ensureLoop,
    get() {
      if (!conn) {
        throw new AppError('DATA_STORE_UNAVAILABLE',
          `not connected to RethinkDB${lastError ? `: ${lastError.message ?? lastError.msg}` : ' yet'}`);
      }
      return conn;
    },
    reportFailure(err, { force = false } = {}) {
      const c = conn;
      if (!c || (!force && c.open)) return;
      onLost(c, err);
      if (force) c.close({ noreplyWait: false }).catch(() => {});
    },
    status: () => ({ connected: conn !== null, attempts, lastError: lastError ? String(lastError.message ?? lastError.msg) : null }),
    async close() {
      closed = true;
      const c = conn;
      conn = null;
      if (c) await c.close({ noreplyWait: false }).catch(() => {});
    },
  };
}
