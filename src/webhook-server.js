// Serves the eviction webhook over TLS with the certificate and key from files (a Secret mounted in the manager's
// pod; see docs/node-maintenance.md). A renewed certificate (cert-manager rewrites the files) is picked up
// without a restart: the files are checked every reloadIntervalMs and the TLS context is replaced when they change.

import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { createServer, request as httpsRequest } from 'node:https';
import { RELAY_HEADERS } from './auth/relay-credentials.js';
import { listenFailureMessage } from './lib/listen-errors.js';

// How long a client has to send one whole request (headers and body) to either port (HTTP_REQUEST_TIMEOUT_SECONDS):
// past it Node answers 408 and closes the connection, so a body that never arrives in full does not hold a
// connection for Node's default 300 s. The time to answer is not limited: a request counts only until its last byte
// arrived. Node looks for such requests every connectionsCheckingInterval (30 s by default, too coarse here).
// Shared with the API port (src/server.js).
export function incomingRequestLimits(requestTimeoutMs) {
  return { requestTimeout: requestTimeoutMs, headersTimeout: requestTimeoutMs, connectionsCheckingInterval: Math.min(1000, requestTimeoutMs) };
}

// Resolves with { server, port, close } once listening; rejects with a clear message if the port is taken
// (err.code 'WEBHOOK_LISTEN_FAILED') or the files cannot be read (err.code 'WEBHOOK_TLS_UNREADABLE').
export async function startWebhookServer({
  app, certFile, keyFile, port, host = '0.0.0.0', logger, reloadIntervalMs = 60000, requestTimeoutMs = 30000,
}) {
  const log = logger.child({ module: 'webhook-server' });
  const read = () => ({ cert: readFileSync(certFile), key: readFileSync(keyFile) });
  const stamp = () => [certFile, keyFile].map((f) => statSync(f).mtimeMs).join(':');
  let seen;
  let server;
  try {
    seen = stamp();
    server = createServer({ ...read(), ...incomingRequestLimits(requestTimeoutMs) }, app);
  } catch (err) {
    throw Object.assign(new Error(`the webhook certificate or key cannot be read (${err.message})`), { code: 'WEBHOOK_TLS_UNREADABLE' });
  }
  const timer = setInterval(() => {
    try {
      const now = stamp();
      if (now === seen) return;
      server.setSecureContext(read());
      seen = now;
      log.info({ certFile }, 'webhook certificate reloaded');
    } catch (err) {
      log.warn({ err: err.message }, 'webhook certificate not reloaded; the previous one is kept');
    }
  }, reloadIntervalMs);
  timer.unref();
  return new Promise((resolve, reject) => {
    server.once('error', (err) => {
      clearInterval(timer);
      reject(Object.assign(
        new Error(listenFailureMessage(err, { what: 'webhook', host, port, key: 'WEBHOOK_PORT' })),
        { code: 'WEBHOOK_LISTEN_FAILED' },
      ));
    });
    server.listen(port, host, () => {
      resolve({
        server,
        port: server.address().port,
        close: () => new Promise((done) => { clearInterval(timer); server.close(() => done()); server.closeAllConnections(); }),
      });
    });
  });
}

// A follower's eviction reviews go to the leader's webhook (the API server may call either replica behind the
// Service). The leader's certificate is checked against the CA (WEBHOOK_TLS_CA_FILE, else ca.crt beside the serving
// certificate, as deploy/webhook-cert.sh and cert-manager write it) for serverName, the Service's DNS name the
// certificate is made for. Returns null when there is no CA to check it with: the follower then does not relay.
// credential(): this replica's relay token (src/auth/relay-credentials.js), the leader's proof that a replica sent it.
export function createReviewRelay({ caFile = null, certFile, serverName, relayedBy, credential, timeoutMs }) {
  const path = caFile ?? (certFile ? join(dirname(certFile), 'ca.crt') : null);
  if (!path || !existsSync(path)) return null;
  return async (leaderWebhook, review) => {
    const token = await credential();
    if (!token) throw new Error('this replica has no relay token to pass the review on with (RELAY_TOKEN_FILE)');
    return sendReview(leaderWebhook, review, { ca: readFileSync(path), serverName, relayedBy: relayedBy(), token, timeoutMs });
  };
}

function sendReview(leaderWebhook, review, {
  ca, serverName, relayedBy, token, timeoutMs,
}) {
  return new Promise((resolve, reject) => {
    const body = Buffer.from(JSON.stringify(review));
    const url = new URL('/v1/admission/eviction', leaderWebhook);
    const req = httpsRequest(url, {
      method: 'POST', ca, servername: serverName,
      headers: {
        'content-type': 'application/json', 'content-length': body.length, [RELAY_HEADERS.relayedBy]: relayedBy, [RELAY_HEADERS.credential]: token,
      },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        try {
          if (res.statusCode !== 200) throw new Error(`the leader's webhook answered ${res.statusCode}`);
          resolve(JSON.parse(Buffer.concat(chunks)));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`the leader's webhook did not answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end(body);
  });
}
