// Counts every HTTP request the manager answers and observes its duration, labelled by the route's template (never
// the raw path, which would make a series per pod or operation id), method and status code.

import { DOCUMENTED_ROUTES } from './openapi.js';

// Pure: the documented template ('/v1/operations/:id') that a method and path match, or 'unmatched'.
export function routeTemplate(method, path, routes = DOCUMENTED_ROUTES) {
  const segments = path.replace(/\/$/, '').split('/');
  const found = routes.find((route) => {
    if (route.method.toUpperCase() !== method.toUpperCase()) return false;
    const pattern = route.path.replace(/\/$/, '').split('/');
    return pattern.length === segments.length && pattern.every((p, i) => p.startsWith(':') ? segments[i] !== '' : p === segments[i]);
  });
  return found ? found.path : 'unmatched';
}

export function createHttpMetrics({ metrics, clock = { now: () => performance.now() } }) {
  return function observeHttpRequest(req, res, next) {
    const startedMs = clock.now();
    let recorded = false;
    const record = () => {
      if (recorded) return;
      recorded = true;
      metrics.recordHttpRequest({
        method: req.method, route: routeTemplate(req.method, req.path), code: res.writableFinished ? String(res.statusCode) : 'aborted',
        seconds: (clock.now() - startedMs) / 1000,
      });
    };
    res.on('finish', record);
    res.on('close', record);
    next();
  };
}
