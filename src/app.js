// createApp(deps): the express app. It never listens; src/server.js does.

import express from 'express';
import { pinoHttp } from 'pino-http';
import { PROBE_PATHS } from './auth/access-policy.js';
import { AppError, appError, fromBodyParserError, logLevelForStatus } from './errors.js';
import { createActionRoutes } from './routes/action-routes.js';
import { createAuthMiddleware } from './routes/auth-middleware.js';
import { createOpenApiRoutes } from './routes/openapi.js';
import { createReadRoutes } from './routes/read-routes.js';
import { createStatusPageRoutes } from './routes/status-page.js';
import { bodyLimitBytes } from './routes/validation.js';

export function createApp({
  store, actions, marks, operations, work, logger, clock, authenticator, protectReads = false, monitor = null, audit = null, status = async () => ({}),
  extraRoutes = [], observers = [], relay = null, election = () => ({ enabled: false, leading: true }), podServerOverrides = {},
}) {
  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(pinoHttp({
    logger: logger.child({ module: 'http' }),
    autoLogging: { ignore: (req) => PROBE_PATHS.has(req.url) || req.url === '/metrics' },
    customLogLevel: (req, res, err) => (err && res.statusCode < 500 ? 'error' : logLevelForStatus(res.statusCode)),
  }));
  app.use(requireOriginForm);
  // Middleware that must see every request and its answer, refused ones included (the metrics' hook counter).
  for (const observer of observers) app.use(observer);
  // Before every route: a refused caller never reaches an action. Who it is, before its body is read; what it
  // may do, once the body says which pod or node it names.
  const auth = createAuthMiddleware({ authenticator, protectReads });
  app.use(auth.authenticateRequest);
  // A follower passes what only the leader serves on to it (routes/leader-relay.js): after the caller is
  // authenticated, before the body is parsed (it relays the body as it came).
  if (relay) app.use(relay);
  app.use(requireJsonBodies);
  app.use(express.json({ limit: bodyLimitBytes, strict: true }));
  app.use(requireCompleteBodies);
  app.use(auth.authorizeRequest);
  app.use(createReadRoutes({
    store, marks, operations, work, monitor, audit, status, election, podServerOverrides, logger: logger.child({ module: 'readiness' }),
  }));
  app.use(createStatusPageRoutes());
  app.use(createActionRoutes({ actions, work, clock }));
  app.use(createOpenApiRoutes());
  for (const router of extraRoutes) app.use(router);
  app.use((req, res, next) => next(appError('routeNotFound', { method: req.method, path: req.path })));
  app.use(createErrorHandler(logger.child({ module: 'errors' })));
  return app;
}

// Only a path is a request target here (RFC 9112's origin form): an absolute URL, an authority, '*' or a path that a URL
// parser would read as naming a host ('//host', a backslash) is refused before anything else sees it, so that no
// part of the manager (the follower's relay above all) is ever pointed at another host by a request.
export function requireOriginForm(req, res, next) {
  const target = req.url;
  if (typeof target !== 'string' || !target.startsWith('/') || target.startsWith('//') || target.includes('\\')) {
    next(appError('targetNotOriginForm'));
    return;
  }
  next();
}

const carriesBody = (req) => Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;

// A request that carries a body must say it is JSON, framed by length or by chunks and nothing else (Node does
// not undo other transfer codings, so their bytes would be read as the body).
function requireJsonBodies(req, res, next) {
  const te = req.headers['transfer-encoding'];
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked') {
    next(appError('transferEncodingRefused', { te }));
    return;
  }
  if (carriesBody(req) && !req.is('application/json')) {
    next(appError('bodyNotJson', { contentType: req.headers['content-type'] }));
    return;
  }
  next();
}

// A body that was not read to its end (the framing was malformed, or the connection closed first) is refused:
// the body parser skips a request that is already finished and leaves no body, which must not read as "none".
function requireCompleteBodies(req, res, next) {
  if (carriesBody(req) && (!req.complete || req.body === undefined)) {
    next(appError('bodyIncomplete'));
    return;
  }
  next();
}

// The one error handler: status from the error, logged at the level logLevelForStatus gives (4xx at info, 503 at
// warn, other 5xx at error, probes not per request), never a stack trace in the body. reqId is pino-http's id of the
// request, the same as the `req.id` of its "request completed" line, so that the two lines join.
function createErrorHandler(log) {
  // eslint-disable-next-line no-unused-vars
  return function errorHandler(err, req, res, next) {
    const appErr = fromExpressError(err);
    const entry = { code: appErr.code, status: appErr.statusCode, method: req.method, path: req.path, reqId: req.id, err: appErr.message };
    const level = logLevelForStatus(appErr.statusCode, { probe: PROBE_PATHS.has(req.path) });
    if (appErr.statusCode >= 500) log[level]({ ...entry, cause: appErr.cause?.message }, 'request failed');
    else log[level](entry, 'request rejected');
    res.status(appErr.statusCode).json({ error: appErr.code, message: appErr.message, ...(appErr.details ? { details: appErr.details } : {}) });
  };
}

// The body parser's errors as the webhook maps them; express's own 4xx (a path it cannot decode) are the caller's too.
function fromExpressError(err) {
  if (!(err instanceof AppError) && err?.type === undefined && err?.status >= 400 && err?.status < 500) return new AppError('BAD_REQUEST', err.message);
  return fromBodyParserError(err, { bodyLimitBytes });
}
