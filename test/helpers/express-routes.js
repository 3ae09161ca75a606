// Lists the routes an express 5 app serves, read from its router stack: "GET /v1/operations/:id", ...

// Each layer is a route (layer.route: path and methods) or middleware; a mounted Router is middleware whose
// handle has its own stack, under the layer's path.
export function listRoutes(app) {
  return [...new Set(routesOf(app.router, ''))].sort();
}

function routesOf(router, prefix) {
  return router.stack.flatMap((layer) => {
    if (layer.route) {
      const { path, methods } = layer.route;
      if (typeof path !== 'string') throw new Error(`route ${String(path)} is not a plain string path; list it by hand`);
      return Object.keys(methods).filter((m) => m !== '_all').map((m) => `${m.toUpperCase()} ${joinPaths(prefix, path)}`);
    }
    if (Array.isArray(layer.handle?.stack)) {
      if (typeof layer.rawPath !== 'string') throw new Error(`router mounted at ${String(layer.rawPath)}: not a plain string path`);
      return routesOf(layer.handle, joinPaths(prefix, layer.rawPath));
    }
    return [];
  });
}

function joinPaths(prefix, path) {
  const joined = `${prefix}/${path}`.replace(/\/+/g, '/');
  return joined.length > 1 ? joined.replace(/\/$/, '') : joined;
}
