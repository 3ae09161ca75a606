// The gate's HTTP port (GATE_METRICS_PORT): /livez, /readyz and /metrics, open as probes and Prometheus need them;
// and the manager's holds (./holds.js), which only a caller holding the shared token may take or end:
//   POST   /v1/holds        {"tables":["db.table"],"ttlMs":2000,"drainMs":300} -> 200 the hold, once no query of the
//                           tables is in flight here (or drainMs passed; "inFlight" says how many were)
//   DELETE /v1/holds/<id>   -> 200 the hold ended, 404 if it is not in force (released, or expired)
//   GET    /v1/holds        -> 200 the holds in force and the queries they hold
// The token is read from GATE_HOLD_TOKEN_FILE at each request (a Secret's file is rewritten when it rotates) and
// compared in constant time. Without GATE_HOLD_TOKEN_FILE the routes answer 404 (holds are off); with it but its file
// missing or empty, 503. A request answered 4xx changed nothing.

import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile as readFileAsync } from 'node:fs/promises';

const MAX_BODY_BYTES = 64 * 1024;

export function createAdminHandler({
  gate, metrics, tokenFile, readFile = readFileAsync, logger,
}) {
  const log = logger.child({ module: 'gate-admin' });

  function send(res, status, body, type = 'application/json') {
    res.statusCode = status;
    res.setHeader('content-type', type);
    res.end(type === 'application/json' ? `${JSON.stringify(body)}\n` : body);
  }

  // null when the caller holds the token; else [status, body].
  async function refusal(req) {
    if (!tokenFile) return [404, { error: 'holds are off: GATE_HOLD_TOKEN_FILE is not set' }];
    let expected;
    try {
      expected = (await readFile(tokenFile, 'utf8')).trim();
    } catch (err) {
      return [503, { error: `the hold token could not be read: ${err.message}` }];
    }
    if (!expected) return [503, { error: 'the hold token file is empty' }];
    const match = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    const digest = (text) => createHash('sha256').update(text).digest();
    if (!match || !timingSafeEqual(digest(match[1]), digest(expected))) return [401, { error: 'a valid bearer token is required' }];
    return null;
  }

  // The body, up to MAX_BODY_BYTES; a longer one is read to its end and dropped (the server's request timeout bounds
  // how long that may take), then refused with 413.
  function readBody(req) {
    return new Promise((resolve, reject) => {
      const chunks = [];
      let size = 0;
      req.on('data', (chunk) => {
        size += chunk.length;
        if (size <= MAX_BODY_BYTES) chunks.push(chunk);
      });
      req.on('end', () => {
        if (size > MAX_BODY_BYTES) reject(Object.assign(new Error(`the body is over ${MAX_BODY_BYTES} bytes`), { status: 413 }));
        else resolve(Buffer.concat(chunks).toString('utf8'));
      });
      req.on('error', reject);
    });
  }

  async function holds(req, res, path) {
    const refused = await refusal(req);
    if (refused) { send(res, ...refused); return; }
    if (path === '/v1/holds' && req.method === 'GET') { send(res, 200, { holds: gate.holds(), heldQueries: gate.heldQueries() }); return; }
    if (path === '/v1/holds' && req.method === 'POST') {
      let body;
      try {
        body = JSON.parse(await readBody(req));
      } catch (err) {
        send(res, err.status ?? 400, { error: err.status ? err.message : 'the body must be JSON' });
        return;
      }
      const checked = gate.validateHold(body);
      if (checked.error) { send(res, 400, { error: checked.error }); return; }
      let gone = false;
      res.on('close', () => { gone = !res.writableFinished; });
      const held = await gate.hold(checked, { abandoned: () => gone });
      if (held.refused) send(res, 503, { error: held.refused });
      else send(res, 200, held);
      return;
    }
    const id = /^\/v1\/holds\/([0-9a-f-]{36})$/.exec(path)?.[1];
    if (id && req.method === 'DELETE') {
      const ended = gate.release(id);
      if (ended) send(res, 200, ended);
      else send(res, 404, { error: 'no such hold in force (released, or expired)' });
      return;
    }
    if (path === '/v1/holds' || id) { res.setHeader('allow', path === '/v1/holds' ? 'GET, POST' : 'DELETE'); send(res, 405, { error: `${req.method} is not allowed here` }); return; }
    send(res, 404, { error: 'not found' });
  }

  return async function handle(req, res) {
    const path = (req.url ?? '/').split('?')[0];
    try {
      if (path === '/livez') { send(res, 200, 'ok\n', 'text/plain'); return; }
      if (path === '/readyz') { send(res, gate.ready() ? 200 : 503, gate.ready() ? 'ready\n' : 'draining\n', 'text/plain'); return; }
      if (path === '/metrics') { send(res, 200, await metrics.registry.metrics(), metrics.registry.contentType); return; }
      if (path === '/v1/holds' || path.startsWith('/v1/holds/')) { await holds(req, res, path); return; }
      send(res, 404, 'not found\n', 'text/plain');
    } catch (err) {
      log.error({ err: err.message }, 'admin request failed');
      if (!res.headersSent) send(res, 500, { error: err.message });
    }
  };
}
