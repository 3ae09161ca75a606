// Request validation with JSON schemas: errors name the field, say what was wrong and what is accepted.
// Each route declares the schemas of its path parameters, query and body (or that it takes no body); the same
// declarations are what the OpenAPI document at /openapi.json describes.

import Ajv from 'ajv';
import { appError } from '../errors.js';

// The largest request body accepted, in bytes (larger is a 413 before any route runs).
export const bodyLimitBytes = 16 * 1024;

const SERVER_PATTERN = '^[A-Za-z0-9_]+$';
const POD_NAME = /^[a-z0-9]+(-[a-z0-9]+)+$/;

const ajv = new Ajv({
  allErrors: true, strict: true, strictRequired: false, coerceTypes: false, verbose: true,
});

function compileValidator(schema, where) {
  const validate = ajv.compile(schema);
  const accepted = describeSchema(schema);
  return (value) => {
    if (validate(value)) return value;
    // A failed oneOf reports each branch's own failure too; the oneOf message alone says it better.
    const hasOneOf = validate.errors.some((e) => e.keyword === 'oneOf');
    const problems = validate.errors.filter((e) => !(hasOneOf && e.schemaPath.startsWith('#/oneOf/'))).map((e) => formatError(e, where));
    throw appError('inputInvalid', { where, problems: [...new Set(problems)], accepted }, {
      details: { problems, accepted },
    });
  };
}

function formatError(error, where) {
  const path = `${where}${error.instancePath.replace(/\//g, '.')}`;
  if (error.keyword === 'additionalProperties') return `${path}.${error.params.additionalProperty} is not an accepted field`;
  if (error.keyword === 'required') return `${path}.${error.params.missingProperty} is required`;
  if (error.keyword === 'oneOf') return `${path} must have exactly one of ${error.schema.map((b) => b.required.join(' + ')).join(', ')}`;
  if (error.keyword === 'enum') return `${path} must be one of ${error.params.allowedValues.join(', ')}`;
  // A pod's name where a server's is asked (rethinkdb-1 for rethinkdb_1): said with the server's name.
  if (error.keyword === 'pattern' && error.schema === SERVER_PATTERN && typeof error.data === 'string' && POD_NAME.test(error.data)) {
    return `${path} must be a server name (letters, digits and _); "${error.data}" looks like a pod's name: its server is ${error.data.replace(/[^A-Za-z0-9_]/g, '_')} (RethinkDB names a server after its hostname, with _ for each -)`;
  }
  return `${path} ${error.message}`;
}

// A one-line summary of an object schema, e.g. {"server": string (required), "reason": string}.
function describeSchema(schema) {
  if (schema.type !== 'object') return schema.type;
  const required = new Set(schema.required ?? []);
  const fields = Object.entries(schema.properties ?? {}).map(([name, prop]) => `"${name}": ${describeType(prop)}${required.has(name) ? ' (required)' : ''}`);
  return `{${fields.join(', ')}}`;
}

function describeType(prop) {
  if (prop.enum) return prop.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (prop.type === 'integer') return `integer ${prop.minimum ?? ''}..${prop.maximum ?? ''}`;
  if (prop.type === 'array') return `array of ${describeType(prop.items)}`;
  if (prop.pattern) return `string matching ${prop.pattern}`;
  return prop.type;
}

// Query and path values arrive as strings. A value that spells an integer, a number or a boolean exactly
// becomes one when its schema asks for that type (as OpenAPI parameters are read); anything else is left as
// it came, so that the schema rejects it with the value the client sent.
const exactly = { integer: /^-?(0|[1-9][0-9]{0,15})$/, number: /^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,15})?$/ };

function parseParameterValues(schema, values) {
  const parsed = { ...values };
  for (const [name, value] of Object.entries(parsed)) {
    const type = Object.hasOwn(schema.properties ?? {}, name) ? schema.properties[name].type : undefined;
    if (typeof value !== 'string') continue;
    if (exactly[type]?.test(value)) parsed[name] = Number(value);
    else if (type === 'boolean' && (value === 'true' || value === 'false')) parsed[name] = value === 'true';
  }
  return parsed;
}

// A route's input contract: schemas for its path parameters, query and body. body: null means the route
// takes no body; an absent body or an empty object is then all it accepts.
function compileRequestValidator({ params = noParams, query = noQuery, body = null }) {
  const validateParams = compileValidator(params, 'path');
  const validateQuery = compileValidator(query, 'query');
  const validateBody = body ? compileValidator(body, 'body') : null;
  const bodyless = `this route takes no body${Object.keys(query.properties ?? {}).length ? `; its input is the query ${describeSchema(query)}` : ''}`;
  return function validateRequest(req) {
    const result = {
      params: validateParams(parseParameterValues(params, req.params ?? {})),
      query: validateQuery(parseParameterValues(query, req.query ?? {})),
    };
    if (validateBody) return { ...result, body: validateBody(req.body ?? {}) };
    if (!isEmptyBody(req.body)) {
      throw appError('bodyNotAccepted', { problem: bodyless }, { details: { problems: [`body: ${bodyless}`], accepted: 'none' } });
    }
    return { ...result, body: {} };
  };
}

function isEmptyBody(body) {
  return body === undefined || (typeof body === 'object' && body !== null && !Array.isArray(body) && Object.keys(body).length === 0);
}

// Mounts a documented route on a router: the request is validated against the route's schemas before the
// handler sees it, so what is documented is what is enforced. handler(input, res) gets { params, query, body }.
export function mountRoute(router, route, handler) {
  const validateRequest = compileRequestValidator(route);
  // The handler gets the validated input, who is asking (set by the auth middleware) and, for a request a follower
  // relayed, the milliseconds left of the caller's budget (src/routes/leader-relay.js).
  router[route.method](route.path, (req, res) => handler({ ...validateRequest(req), identity: req.identity ?? null, relayDeadlineMs: req.relayDeadlineMs ?? null }, res));
}

// Kubernetes names of nodes and pods: RFC 1123 subdomains (dot-separated labels of a-z, 0-9 and inner '-').
const dnsName = { type: 'string', minLength: 1, maxLength: 253, pattern: '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$' };

export const fields = {
  server: { type: 'string', minLength: 1, maxLength: 128, pattern: SERVER_PATTERN },
  node: dnsName,
  pod: dnsName,
  table: { type: 'string', minLength: 3, maxLength: 200, pattern: '^[A-Za-z0-9_]+\\.[A-Za-z0-9_]+$' },
  shard: { type: 'integer', minimum: 0, maximum: 1023 },
  deadlineSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
  reason: { type: 'string', maxLength: 256 },
  flag: { type: 'boolean' },
};

export function objectSchema(properties, required = []) {
  return { type: 'object', properties, required, additionalProperties: false };
}

const noParams = objectSchema({});
const noQuery = objectSchema({});
export const dryRunQuery = objectSchema({ dryRun: fields.flag });
