// The OpenAPI document at /openapi.json: valid OpenAPI 3.1, and it lists exactly the routes the app serves.

import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import Ajv from 'ajv';
import request from 'supertest';
import { loadConfig } from '../../src/config.js';
import { ERROR_CODES } from '../../src/errors.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createManager } from '../../src/manager.js';
import { createDataStore } from '../../src/rethinkdb/data-store.js';
import { buildOpenApiDocument, toOpenApiPath } from '../../src/routes/openapi.js';
import { createSandboxCluster, createSandboxSource } from '../../src/sandbox/sandbox-cluster.js';
import { listRoutes } from '../helpers/express-routes.js';
import { createResponseChecker } from '../helpers/openapi-responses.js';
import { createSandboxHarness } from '../helpers/harness.js';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

function documentedRoutes(document, { sandbox = true } = {}) {
  return Object.entries(document.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m])
    .filter((m) => sandbox || !item[m]['x-sandbox-only'])
    .map((m) => `${m.toUpperCase()} ${path}`)).sort();
}

const served = (app) => listRoutes(app).map((route) => toOpenApiPathOfRoute(route)).sort();
const toOpenApiPathOfRoute = (route) => { const [method, path] = route.split(' '); return `${method} ${toOpenApiPath(path)}`; };

// A manager on the real-RethinkDB wiring (no sandbox model): the sandbox routes are not mounted.
function createRethinkDbBackendApp() {
  const clock = createVirtualClock();
  const logger = createLogger({ level: 'info', destination: new Writable({ write(chunk, enc, cb) { cb(); } }) });
  const store = createDataStore({ source: createSandboxSource(createSandboxCluster({ clock })) });
  return createManager({ config: loadConfig({}), store, clock, logger }).app;
}

describe('GET /openapi.json', () => {
  let document;
  beforeAll(async () => {
    const res = await request(createSandboxHarness().app).get('/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    document = res.body;
  });

  test('when served, then it is the document built from the route tables', () => {
    expect(document).toEqual(buildOpenApiDocument());
  });

  test('when checked against the OpenAPI 3.1 schema, then it is valid', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(document));
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  test('when the sandbox app is listed from its router stack, then every route it serves is documented', () => {
    const undocumented = served(createSandboxHarness().app).filter((route) => !documentedRoutes(document).includes(route));
    expect(undocumented).toEqual([]);
  });

  test('when the document is listed, then every documented route is served by the sandbox app', () => {
    const routes = served(createSandboxHarness().app);
    const missing = documentedRoutes(document).filter((route) => !routes.includes(route));
    expect(missing).toEqual([]);
  });

  test('when the manager runs on RethinkDB, then it serves exactly the documented routes that are not sandbox-only', () => {
    const routes = served(createRethinkDbBackendApp());
    const expected = documentedRoutes(document, { sandbox: false });
    expect(routes).toEqual(expected);
  });

  test('when a route is a sandbox route, then it is marked x-sandbox-only and says so', () => {
    const operations = Object.entries(document.paths).flatMap(([path, item]) => METHODS.filter((m) => item[m]).map((m) => [path, item[m]]));
    for (const [path, op] of operations) {
      expect([path, op['x-sandbox-only'] === true]).toEqual([path, path.startsWith('/v1/sandbox/')]);
      if (op['x-sandbox-only']) expect(op.description).toMatch(/only on the sandbox backend/);
    }
  });

  // Written out here rather than derived from src/auth/access-policy.js, so that the two can be compared.
  function expectedSecurity(method, path) {
    if (path === '/livez' || path === '/readyz' || path === '/') return [];
    if (/^\/v1\/(hooks|actions)\//.test(path) || (path.startsWith('/v1/sandbox/') && method !== 'get')) return [{ bearerAuth: [] }];
    return [{}, { bearerAuth: [] }];
  }

  test('when a route is a hook, an action or a sandbox control, then it needs a bearer token; reads may take one; probes none (explicitly)', () => {
    expect(document.components.securitySchemes.bearerAuth).toEqual(expect.objectContaining({ type: 'http', scheme: 'bearer' }));
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        const op = item[method];
        const security = expectedSecurity(method, path);
        expect([method, path, op.security ?? null]).toEqual([method, path, security]);
        if (security.length > 0) expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['401', '403']));
      }
    }
  });

  test('when an operation documents an error code, then src/errors.js answers it with that status', () => {
    for (const item of Object.values(document.paths)) {
      for (const op of METHODS.map((m) => item[m]).filter(Boolean)) {
        for (const [status, response] of Object.entries(op.responses).filter(([s]) => Number(s) >= 400)) {
          for (const code of response.content['application/json'].schema.allOf[1].properties.error.enum ?? []) {
            expect([op.operationId, code, ERROR_CODES[code]?.statusCode]).toEqual([op.operationId, code, Number(status)]);
          }
        }
        expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['400', '413', '415', '500']));
      }
    }
    expect(document.components.schemas.Error.properties.error.enum).toEqual(Object.keys(ERROR_CODES));
  });

  test('when every parameter and body schema is compiled in strict mode, then it compiles', () => {
    const ajv = new Ajv({ strict: true, strictRequired: false });
    for (const item of Object.values(document.paths)) {
      for (const op of METHODS.map((m) => item[m]).filter(Boolean)) {
        for (const parameter of op.parameters ?? []) expect(() => ajv.compile(parameter.schema)).not.toThrow();
        const body = op.requestBody?.content['application/json'].schema;
        if (body) expect(() => ajv.compile(body)).not.toThrow();
      }
    }
  });

  test('when a route answers with success, then its body has a schema of its own, not a bare object', () => {
    const bare = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        for (const [status, response] of Object.entries(item[method].responses).filter(([s]) => s.startsWith('2'))) {
          for (const { schema } of Object.values(response.content)) {
            const resolved = schema.$ref ? document.components.schemas[schema.$ref.split('/').pop()] : schema;
            if (!resolved || (resolved.type === 'object' && !resolved.properties && !resolved.required)) bare.push(`${method} ${path} ${status}`);
          }
        }
      }
    }
    expect(bare).toEqual([]);
  });

  test('when every response schema is compiled in strict mode with formats, then it compiles and its references resolve', () => {
    expect(createResponseChecker(document).compileAll()).toBeGreaterThan(100);
  });

  test('when the document is served, then it names a relative server, the manager itself', () => {
    expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
  });
});

// @redocly/cli's recommended ruleset (run as its CLI, offline: no telemetry, no update check).
describe('redocly lint of /openapi.json', () => {
  let dir;
  afterAll(() => { if (dir) rmSync(dir, { recursive: true, force: true }); });

  test('when linted with the recommended ruleset, then it reports no error and no warning', async () => {
    dir = mkdtempSync(join(tmpdir(), 'openapi-lint-'));
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(buildOpenApiDocument(), null, 2));
    const cli = new URL('../../node_modules/@redocly/cli/bin/cli.js', import.meta.url).pathname;
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' };
    const { stdout } = await promisify(execFile)(process.execPath, [cli, 'lint', '--extends=recommended', '--format=json', file], { env, cwd: dir, maxBuffer: 16 * 1024 * 1024 })
      .catch((err) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(stdout);
    expect(report.problems.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`)).toEqual([]);
    expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 0 });
  }, 60000);
});
