// The OpenAPI 3.1 document served at GET /openapi.json. It is built from the same route tables the routers
// validate with (methods, paths, and the schemas of path parameters, query and body), so the two cannot drift.

import { Router } from 'express';
import { classifyRequest } from '../auth/access-policy.js';
import { ERROR_CODES } from '../errors.js';
import { VERSION } from '../lib/version.js';
import { ACTION_ROUTE_SPECS } from './action-routes.js';
import { HOOK_ROUTES } from './hook-routes.js';
import { LEADER_ROUTE } from './leader-relay.js';
import { METRICS_ROUTE } from './metrics-routes.js';
import { READ_ROUTES } from './read-routes.js';
import { RESPONSE_SCHEMAS } from './response-schemas.js';
import { SANDBOX_ROUTES } from './sandbox-routes.js';
import { STATUS_PAGE_ROUTE } from './status-page.js';
import { bodyLimitBytes, mountRoute } from './validation.js';

const OPENAPI_ROUTE = {
  method: 'get', path: '/openapi.json', operationId: 'getOpenApiDocument', tag: 'meta',
  summary: 'This document',
  ok: [{
    status: 200, description: 'the OpenAPI 3.1 document',
    schema: { type: 'object', required: ['openapi', 'info', 'paths'], properties: { openapi: { const: '3.1.0' }, info: { type: 'object' }, paths: { type: 'object' } } },
  }],
  errors: [],
};

export const DOCUMENTED_ROUTES = [
  ...Object.values(READ_ROUTES), LEADER_ROUTE, ...ACTION_ROUTE_SPECS, ...Object.values(HOOK_ROUTES), ...Object.values(SANDBOX_ROUTES), OPENAPI_ROUTE, METRICS_ROUTE, STATUS_PAGE_ROUTE,
];

// Any request can be malformed, too large, of the wrong content type, or meet a bug.
const COMMON_ERRORS = ['BAD_REQUEST', 'PAYLOAD_TOO_LARGE', 'UNSUPPORTED_MEDIA_TYPE', 'INTERNAL'];
const SANDBOX_ONLY = 'Present only on the sandbox backend (no RETHINKDB_HOST configured); 404 NOT_FOUND otherwise.';

// The body of every error answer (src/app.js's error handler).
const ERROR_BODY = {
  type: 'object',
  required: ['error', 'message'],
  additionalProperties: false,
  properties: {
    error: { type: 'string', enum: Object.keys(ERROR_CODES) },
    message: { type: 'string', description: 'what was wrong and what is accepted' },
    details: { type: 'object', description: 'for a malformed request: problems (one per field) and accepted (the schema in one line)' },
  },
};

const TAGS = [
  { name: 'probes', description: 'Liveness and readiness for the kubelet' },
  { name: 'reads', description: 'The cluster, the monitor, audit records and operations' },
  { name: 'actions', description: 'Operator actions: move primaries, move data' },
  { name: 'hooks', description: 'Lifecycle hooks called by the RethinkDB pods, and PERFWARNING' },
  { name: 'sandbox', description: `Admin endpoints of the in-memory sandbox. ${SANDBOX_ONLY}` },
  { name: 'meta', description: 'This document, metrics and the status page' },
];

const STATUS_TEXT = {
  400: 'malformed request: it does not match the schemas (unknown fields and query parameters are refused), or the body is not valid JSON',
  401: 'no bearer token, or one that is not valid',
  403: 'the token is valid but not allowed to call this route',
  404: 'what the request names does not exist',
  413: `the body is larger than ${bodyLimitBytes} bytes`,
  415: 'the body is not application/json (UTF-8)',
  500: 'a bug: the manager failed in a way it did not expect',
  502: 'RethinkDB rejected a write',
  503: 'the data store or Kubernetes is unavailable, or the manager is shutting down',
  504: 'the work did not finish by its deadline',
};

export function buildOpenApiDocument({ routes = DOCUMENTED_ROUTES, version = VERSION } = {}) {
  const paths = {};
  for (const route of routes) {
    const path = toOpenApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: describeOperation(route) };
  }
  return structuredClone({
    openapi: '3.1.0',
    info: {
      title: 'rethinkdb-k8s-manager',
      version,
      description: [
        'Turns Kubernetes events into cheap RethinkDB reconfigurations.',
        `Bodies are JSON (content-type application/json, UTF-8), at most ${bodyLimitBytes} bytes; routes that take no body accept none (or {}).`,
        'Every path parameter, query and body is checked against the schemas below: unknown fields and query parameters are refused with a 400 that names them and says what is accepted.',
        'Errors are {"error": CODE, "message": "...", "details"?: {...}}.',
      ].join(' '),
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    // Relative: the document is served by the manager it describes, wherever that is reached.
    servers: [{ url: '/', description: 'the manager serving this document' }],
    tags: TAGS,
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer', description: 'a Kubernetes service-account token for audience rethinkdb-manager (AUTH_MODE=tokenreview) or the static token (AUTH_MODE=static). Hooks: a pod acts on itself only. Actions and sandbox controls: an operator. Reads: only with AUTH_PROTECT_READS=true.' } },
      schemas: {
        Error: ERROR_BODY,
        ...RESPONSE_SCHEMAS,
        Liveness: {
          type: 'object', required: ['status', 'version'], additionalProperties: false,
          properties: { status: { const: 'ok' }, version: { type: 'string', description: "the manager's version (package.json)" } },
        },
        Readiness: {
          type: 'object', required: ['status', 'backend'], additionalProperties: false,
          properties: {
            status: { const: 'ready' }, backend: { type: 'string', enum: ['rethinkdb', 'sandbox'] },
            role: { type: 'string', enum: ['leader', 'follower'], description: 'with leader election only' },
            leader: { anyOf: [{ type: 'string' }, { type: 'null' }], description: 'with leader election only: the replica holding the Lease' },
          },
        },
      },
    },
  });
}

// Express's /v1/operations/:id is OpenAPI's /v1/operations/{id}.
export function toOpenApiPath(expressPath) {
  return expressPath.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function describeOperation(route) {
  const parameters = [...toParameters(route.params, 'path'), ...toParameters(route.query, 'query')];
  return {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    ...(route.description || route.sandboxOnly || !route.body ? { description: operationDescription(route) } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(route.body ? { requestBody: { required: bodyIsRequired(route.body), content: { 'application/json': { schema: route.body } } } } : {}),
    responses: { ...successResponses(route.ok), ...errorResponses(route) },
    ...securityOf(route),
    ...(route.sandboxOnly ? { 'x-sandbox-only': true } : {}),
  };
}

// The access a route needs, from the same rules the auth middleware applies (src/auth/access-policy.js).
function accessOf(route) {
  return classifyRequest(route.method.toUpperCase(), route.path);
}

// Hooks, actions and sandbox controls need a token; reads need one only with AUTH_PROTECT_READS=true.
function securityOf(route) {
  const access = accessOf(route);
  if (access === 'hook' || access === 'operator') return { security: [{ bearerAuth: [] }] };
  if (access === 'read') return { security: [{}, { bearerAuth: [] }] };
  // Probes, /metrics, the status page and this document: open, said explicitly rather than left to a default.
  return { security: [] };
}

function operationDescription(route) {
  return [route.description, route.body ? null : 'Takes no body.', route.sandboxOnly ? SANDBOX_ONLY : null].filter(Boolean).join(' ');
}

function toParameters(schema, where) {
  if (!schema) return [];
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties ?? {}).map(([name, property]) => ({ name, in: where, required: where === 'path' || required.has(name), schema: property }));
}

function bodyIsRequired(schema) {
  return (schema.required ?? []).length > 0 || Boolean(schema.oneOf);
}

// schema: a name in components.schemas, or a schema. Every success answer has one (test/routes/openapi.test.js).
function successResponses(ok) {
  return Object.fromEntries(ok.map(({ status, description, contentType = 'application/json', schema, location = false }) => [String(status), {
    description,
    ...(location ? { headers: { Location: { description: 'where to follow the operation', schema: { type: 'string' } } } } : {}),
    content: { [contentType]: { schema: typeof schema === 'string' ? { $ref: `#/components/schemas/${schema}` } : schema } },
  }]));
}

// One response per status, listing the codes this route can answer with it (from src/errors.js).
function errorResponses(route) {
  const codes = [...new Set([...COMMON_ERRORS, ...route.errors, ...(route.sandboxOnly ? ['NOT_FOUND'] : [])])];
  const byStatus = new Map();
  for (const code of codes) {
    const status = ERROR_CODES[code].statusCode;
    byStatus.set(status, [...(byStatus.get(status) ?? []), code]);
  }
  // Authentication's codes are whichever src/errors.js lists with 401 and 403; a token review that cannot be
  // made is a 503.
  if (accessOf(route) !== 'open') {
    for (const status of [401, 403]) byStatus.set(status, codesWithStatus(status));
    if (!byStatus.get(503)?.includes('KUBERNETES_UNAVAILABLE')) byStatus.set(503, [...(byStatus.get(503) ?? []), 'KUBERNETES_UNAVAILABLE']);
  }
  return Object.fromEntries([...byStatus.entries()].sort(([a], [b]) => a - b).map(([status, list]) => [String(status), {
    description: `${STATUS_TEXT[status] ?? 'error'}${list.length ? ` (${list.join(', ')})` : ''}`,
    content: { 'application/json': { schema: { allOf: [{ $ref: '#/components/schemas/Error' }, { type: 'object', properties: { error: list.length ? { enum: list } : { type: 'string' } } }] } } },
  }]));
}

function codesWithStatus(status) {
  return Object.entries(ERROR_CODES).filter(([, v]) => v.statusCode === status).map(([code]) => code);
}


export function createOpenApiRoutes({ document = buildOpenApiDocument() } = {}) {
  const router = Router();
  mountRoute(router, OPENAPI_ROUTE, (input, res) => {
    res.json(document);
  });
  return router;
}
