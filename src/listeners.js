// The two ports, as parts that manager.serve() adds to its runner's 'serving' group (src/lib/runner.js: listening from
// start() to the end of shutdown, so that they answer through the drain and the linger with 503s a relay can act on).
//   API       plain HTTP, the app every route is on; a listen failure (a port in use, a privileged port) fails the
//             start with a message that says which and why
//   webhook   the eviction webhook over TLS (src/webhook-server.js). Certificate files that cannot be read yet (the
//             optional Secret not created, or not yet mounted) leave it off, which its failurePolicy Ignore turns
//             into evictions without demotion; they are tried again every retryMs. A port that is taken fails the
//             start, or, found on a retry, calls onRetryFailed(err) (src/server.js: the same fatal exit).
// port(): the port listened on (port 0 asks the system for one), null before.

import { createServer } from 'node:http';
import { listenFailureMessage } from './lib/listen-errors.js';
import { incomingRequestLimits, startWebhookServer } from './webhook-server.js';

export function httpListener({
  app, host, port, requestTimeoutMs, logger,
}) {
  let listened = null;
  return {
    name: 'http',
    port: () => listened,
    async start() {
      // A client has HTTP_REQUEST_TIMEOUT_SECONDS to send a whole request (src/webhook-server.js, incomingRequestLimits).
      const server = createServer(incomingRequestLimits(requestTimeoutMs), app);
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, resolve);
      }).catch((err) => {
        throw Object.assign(new Error(listenFailureMessage(err, { what: 'HTTP', host, port, key: 'PORT' })), { code: 'HTTP_LISTEN_FAILED', listenCode: err.code });
      });
      listened = server.address().port;
      logger.debug({ port: listened }, 'API port open');
      return () => {
        server.close();
        server.closeAllConnections();
      };
    },
  };
}

export function webhookListener({
  app, certFile, keyFile, host, port, requestTimeoutMs, logger, retryMs = 60000,
  onRetryFailed = (err) => logger.error({ err: err.message }, 'the eviction webhook could not start'),
}) {
  let listened = null;
  return {
    name: 'webhook',
    port: () => listened,
    async start() {
      let webhook = null;
      let retry = null;
      let stopped = false;
      const open = async () => {
        try {
          webhook = await startWebhookServer({
            app, certFile, keyFile, port, host, logger, requestTimeoutMs,
          });
        } catch (err) {
          if (err.code !== 'WEBHOOK_TLS_UNREADABLE') throw err;
          logger.error({ err: err.message }, 'eviction webhook off for now (tried again in a minute): evictions go ahead without demoting primaries first (see docs/node-maintenance.md)');
          if (!stopped) {
            retry = setTimeout(() => open().catch(onRetryFailed), retryMs);
            retry.unref();
          }
          return;
        }
        if (stopped) {
          await webhook.close();
          return;
        }
        listened = webhook.port;
        logger.info({ port: webhook.port }, 'eviction webhook listening (TLS)');
      };
      await open();
      return async () => {
        stopped = true;
        clearTimeout(retry);
        await webhook?.close();
      };
    },
  };
}
