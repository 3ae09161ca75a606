// What an application needs around the official JavaScript driver (`rethinkdb` on npm) to go through a gate's stop
// (a rollout of the proxy Deployment, a drained node, a deleted pod) and a gate's crash without errors it cannot
// handle. RethinkDB's drivers never reconnect by themselves: a connection the gate closed stays closed, and every
// query run on it fails with "Connection is closed".
//
// createResilientConnection({ r, connect }) keeps one connection to the client Service (connect() opens a new one)
// and runs queries on it:
//   - a connection found closed before a query is sent is replaced first (right away, then with backoff, within
//     maxWaitMs): a stopping gate closes each connection only once nothing of it is in flight, so this is the
//     common case, and nothing is lost;
//   - a query whose connection broke after it was sent is sent again on a new connection when the caller says it is
//     safe to (resend: true: a read, or a write that has the same effect twice, such as a replace by primary key);
//     else it fails with OutcomeUnknownError, because the write may have been applied: the caller decides (read the
//     document back, or record the doubt).
//   - a query a stopping gate answered instead of running it (a ReqlOpFailedError saying "the query gate is
//     stopping") is sent again on a new connection, whatever it is: it was not run;
// Any other error (a ReqlOpFailedError, a ReqlQueryLogicError, ...) is the query's answer and passes through.
//
// Usage:
//   const db = createResilientConnection({ r, connect: () => r.connect({ host: 'rethinkdb-client', port: 28015 }) });
//   const doc = await db.run(r.table('users').get(id), { resend: true });
//   await db.run(r.table('users').get(id).update({ visits: r.row('visits').add(1) }));   // not resent
//   await db.close();
//
// Tested with a gate stopping and a gate crashing under load: test/real/client-reconnect.test.js.

export class OutcomeUnknownError extends Error {
  constructor(cause) {
    super(`the connection broke after the query was sent, so it may or may not have been applied: ${cause.message}`);
    this.name = 'OutcomeUnknownError';
    this.cause = cause;
  }
}

// The gate's answer to a query it did not run because it is stopping (gate/src/protocol.js GATE_STOPPING).
export const isGateStopping = (err) => err?.name === 'ReqlOpFailedError' && /query gate is stopping/.test(err.message);

// A broken connection, as the driver reports it (its own ReqlDriverError, or the socket's error).
export function isConnectionError(err) {
  return err?.name === 'ReqlDriverError' || /connection is closed|ECONNRESET|EPIPE|ECONNREFUSED|socket hang up/i.test(err?.message ?? '');
}

export function createResilientConnection({
  r, connect, maxWaitMs = 10000, minBackoffMs = 50, maxBackoffMs = 1000, sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }),
  now = () => Date.now(), onReconnect = () => {},
}) {
  let conn = null;
  let opening = null;
  let closed = false;
  let reconnects = 0;
  let everConnected = false;

  // The stopping gates' connections no new query goes to, until the gate closes them (closed at the latest by
  // close()). Those already closed are dropped at each abandon, so that a long-lived client keeps only a few.
  const abandoned = new Set();
  function abandon(c, { keep }) {
    if (conn === c) conn = null;
    for (const x of abandoned) if (!x.open) abandoned.delete(x);
    if (keep) abandoned.add(c);
  }

  // The open connection, or a new one; concurrent callers share one attempt.
  function current() {
    if (conn?.open) return Promise.resolve(conn);
    if (!opening) {
      opening = (async () => {
        const until = now() + maxWaitMs;
        let backoff = minBackoffMs;
        for (let first = true; ; first = false) {
          if (closed) throw new Error('the resilient connection was closed');
          try {
            const fresh = await connect();
            const replaced = everConnected;
            everConnected = true;
            // The driver emits its socket's errors (a reset: ECONNRESET) on the connection, and Node throws an
            // 'error' nobody listens to: the process would die of a gate's crash. The query in flight fails anyway.
            fresh.on('error', () => {});
            if (replaced) { reconnects += 1; onReconnect(reconnects); }
            conn = fresh;
            return fresh;
          } catch (err) {
            if (now() + backoff > until) throw err;
            if (!first) backoff = Math.min(maxBackoffMs, backoff * 2);
            await sleep(backoff);
          }
        }
      })().finally(() => { opening = null; });
    }
    return opening;
  }

  async function run(query, { resend = false, runOptions = {} } = {}) {
    const until = now() + maxWaitMs;
    for (;;) {
      const c = await current();
      try {
        return await query.run(c, runOptions);
      } catch (err) {
        // Not closed here: other queries of this connection may still be in flight, and the stopping gate answers them
        // before it closes it. New queries go to a new connection.
        if (isGateStopping(err)) { abandon(c, { keep: true }); continue; }
        if (!isConnectionError(err)) throw err;
        abandon(c, { keep: false });
        if (c.open) c.close({ noreplyWait: false }).catch(() => {});
        if (!resend) throw new OutcomeUnknownError(err);
        if (now() > until) throw err;
      }
    }
  }

  async function close() {
    closed = true;
    for (const c of [conn, ...abandoned]) if (c?.open) await c.close({ noreplyWait: false }).catch(() => {});
  }

  return { run, close, reconnects: () => reconnects };
}

// A demonstration: node examples/clients/resilient-connection.js HOST PORT SECONDS reads and writes one table
// (test.resilient, made if missing) and prints what it did as JSON.
async function main([host = '127.0.0.1', port = '28015', seconds = '10']) {
  const { default: r } = await import('rethinkdb');
  const db = createResilientConnection({ r, connect: () => r.connect({ host, port: Number(port) }) });
  await db.run(r.dbList().contains('test').branch(null, r.dbCreate('test')), { resend: true });
  await db.run(r.db('test').tableList().contains('resilient').branch(null, r.db('test').tableCreate('resilient')), { resend: true });
  const table = r.db('test').table('resilient');
  const counts = { reads: 0, writes: 0, failed: 0, unknown: 0 };
  const until = Date.now() + Number(seconds) * 1000;
  for (let i = 0; Date.now() < until; i += 1) {
    try {
      if (i % 2 === 0) { await db.run(table.get(`k${i % 100}`), { resend: true }); counts.reads += 1; }
      else { await db.run(table.insert({ id: `k${i % 100}`, i }, { conflict: 'replace' }), { resend: true }); counts.writes += 1; }
    } catch (err) {
      if (err instanceof OutcomeUnknownError) counts.unknown += 1; else counts.failed += 1;
    }
  }
  await db.close();
  process.stdout.write(`${JSON.stringify({ ...counts, reconnects: db.reconnects() })}\n`);
}

if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  main(process.argv.slice(2)).catch((err) => { process.stderr.write(`${err.stack}\n`); process.exit(1); });
}
