// createApp(deps): the express app. It never listens; src/server.js does.

import express from 'express';
import { pinoHttp } from 'pino-http';
import { PROBE_PATHS } from './auth/access-policy.js';
import { AppError, logLevelForStatus, toAppError } from './errors.js';
import { createActionRoutes } from './routes/action-routes.js';
import { createAuthMiddleware } from './routes/auth-middleware.js';
import { createOpenApiRoutes } from './routes/openapi.js';
import { createReadRoutes } from './routes/read-routes.js';
import { createStatusPageRoutes } from './routes/status-page.js';
import { bodyLimitBytes } from './routes/validation.js';

export function createApp({
  store, actions, marks, operations, work, logger, authenticator, protectReads = false, monitor = null, audit = null, status = async () => ({}),
  extraRoutes = [], observers = [], election = () => ({ enabled: false, leading: true }), podServerOverrides = {},
}) {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(pinoHttp({
    logger: logger.child({ module: 'http' }),
    autoLogging: { ignore: (req) => PROBE_PATHS.has(req.url) || req.url === '/metrics' },
    customLogLevel: (req, res, err) => (err && res.statusCode < 500 ? 'error' : logLevelForStatus(res.statusCode)),
  }));
  // Middleware that must see every request and its answer, refused ones included (the metrics' hook counter).
  for (const observer of observers) app.use(observer);
  // Before every route: a refused caller never reaches an action. Who it is, before its body is read; what it
  // may do, once the body says which pod or node it names.
  const auth = createAuthMiddleware({ authenticator, protectReads });
  app.use(auth.authenticateRequest);
  app.use(requireJsonBodies);
  app.use(express.json({ limit: bodyLimitBytes, strict: true }));
  app.use(requireCompleteBodies);
  app.use(auth.authorizeRequest);
  app.use(createReadRoutes({
    store, marks, operations, work, monitor, audit, status, election, podServerOverrides, logger: logger.child({ module: 'readiness' }),
  }));
  app.use(createStatusPageRoutes());
  app.use(createActionRoutes({ actions, work }));
  app.use(createOpenApiRoutes());
  for (const router of extraRoutes) app.use(router);
  app.use((req, res, next) => next(new AppError('NOT_FOUND', `no route for ${req.method} ${req.path}; see the README's API reference`)));
  app.use(createErrorHandler(logger.child({ module: 'errors' })));
  return app;
}

const carriesBody = (req) => Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

// A request that carries a body must say it is JSON, framed by length or by chunks and nothing else (Node does
// not undo other transfer codings, so their bytes would be read as the body).
function requireJsonBodies(req, res, next) {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked') {
    next(new AppError('BAD_REQUEST', `Transfer-Encoding "${te}" is not accepted; send the body with Content-Length or Transfer-Encoding: chunked`));
    return;
  }
  if (carriesBody(req) && !req.is('application/json')) {
    next(new AppError('UNSUPPORTED_MEDIA_TYPE', `request bodies must be application/json, got ${req.headers['content-type'] ?? 'no content type'}`));
    return;
  }
  next();
}

// A body that was not read to its end (the framing was malformed, or the connection closed first) is refused:
// the body parser skips a request that is already finished and leaves no body, which must not read as "none".
function requireCompleteBodies(req, res, next) {
  if (carriesBody(req) && (!req.complete || req.body === undefined)) {
    next(new AppError('BAD_REQUEST', 'the request body was not received completely (malformed framing, or the connection closed); nothing was done'));
    return;
  }
  next();
}

// The one error handler: status from the error, logged at the level logLevelForStatus gives (4xx at info, 503 at
// warn, other 5xx at error, probes not per request), never a stack trace in the body.
function createErrorHandler(log) {
  // eslint-disable-next-line no-unused-vars
  return function errorHandler(err, req, res, next) {
    const appErr = fromExpressError(err);
    const entry = { code: appErr.code, status: appErr.statusCode, method: req.method, path: req.path, err: appErr.message };
    const level = logLevelForStatus(appErr.statusCode, { probe: PROBE_PATHS.has(req.path) });
    if (appErr.statusCode >= 500) log[level]({ ...entry, cause: appErr.cause?.message }, 'request failed');
    else log[level](entry, 'request rejected');
    res.status(appErr.statusCode).json({ error: appErr.code, message: appErr.message, ...(appErr.details ? { details: appErr.details } : {}) });
  };
}

function fromExpressError(err) {
  if (err instanceof AppError) return err;
  if (err?.type === 'entity.too.large') return new AppError('PAYLOAD_TOO_LARGE', `request body exceeds ${bodyLimitBytes} bytes (${bodyLimitBytes / 1024} KiB)`);
  if (err?.type === 'entity.parse.failed') return new AppError('BAD_REQUEST', `request body is not valid JSON: ${err.message}`);
  if (err?.type === 'charset.unsupported' || err?.type === 'encoding.unsupported') return new AppError('UNSUPPORTED_MEDIA_TYPE', err.message);
  if (err?.status >= 400 && err?.status < 500) return new AppError('BAD_REQUEST', err.message);
  return toAppError(err);
}
