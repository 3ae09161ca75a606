// fast-check arbitraries for the malformed-request corpus, driven by an OpenAPI operation: a valid request
// built from the operation's schemas, and variants of it with one defect each, together with the answer the
// defect must get (status, and text that names the field).

import Ajv from 'ajv';
import fc from 'fast-check';
import { bodyLimitBytes as BODY_LIMIT_BYTES } from '../../src/routes/validation.js';

const ajv = new Ajv({ strict: false });
const isValid = (schema, value) => ajv.validate(schema, value);

const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'valueOf', 'hasOwnProperty', '__defineGetter__'];

// The path, query and body schemas of an operation, as object schemas.
export function operationInput(operation) {
  const parameters = (where) => {
    const list = (operation.parameters ?? []).filter((p) => p.in === where);
    return {
      type: 'object', additionalProperties: false,
      properties: Object.fromEntries(list.map((p) => [p.name, p.schema])), required: list.filter((p) => p.required).map((p) => p.name),
    };
  };
  return { path: parameters('path'), query: parameters('query'), body: operation.requestBody?.content?.['application/json']?.schema ?? null };
}

// A value the schema accepts (the subset of JSON Schema the routes use).
export function validValue(schema) {
  return baseValue(schema).filter((value) => isValid(schema, value));
}

function baseValue(schema) {
  if (schema.enum) return fc.constantFrom(...schema.enum);
  if (schema.type === 'boolean') return fc.boolean();
  if (schema.type === 'integer') return fc.integer({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9 });
  if (schema.type === 'number') return fc.double({ min: schema.minimum ?? -1e9, max: schema.maximum ?? 1e9, noNaN: true });
  if (schema.type === 'string' && schema.pattern) return fc.stringMatching(new RegExp(schema.pattern));
  if (schema.type === 'string') return fc.string({ unit: 'grapheme', minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40) });
  if (schema.type === 'array') {
    return fc.uniqueArray(validValue(schema.items), { minLength: schema.minItems ?? 0, maxLength: Math.min(schema.maxItems ?? 3, 3), selector: (v) => JSON.stringify(v) });
  }
  if (schema.type === 'object') {
    const properties = Object.fromEntries(Object.entries(schema.properties ?? {}).map(([name, s]) => [name, validValue(s)]));
    return fc.record(properties, { requiredKeys: schema.required ?? [] });
  }
  throw new Error(`no generator for the schema ${JSON.stringify(schema)}`);
}

// A whole valid request: path parameters, query and (for routes that take one) body.
function validRequest(input) {
  return fc.record({ path: validValue(input.path), query: validValue(input.query), body: input.body ? validValue(input.body) : fc.constant(undefined) });
}

const oddStrings = fc.constantFrom(
  '', ' ', 'TRUE', 'yes', '1', '-1', '0', '1.5', '1e3', '0x10', 'null', '[]', '{}', 'NaN', 'Infinity', 'Bad_Name', 'a b', 'a/b', '..', '%00',
  '\u0000', 'é', '😀', '<script>', "'; DROP TABLE", 'rethinkdb_1;rm -rf /', ...PROTOTYPE_KEYS,
);
const hugeString = (max) => fc.integer({ min: 257, max }).map((n) => 'x'.repeat(n));
const nested = fc.record({ depth: fc.integer({ min: 50, max: 1500 }), array: fc.boolean() })
  .map(({ depth, array }) => JSON.parse(array ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`));
const oddNumbers = fc.constantFrom(-1, 0, 0.5, -0.5, 1e308, -1e308, 2 ** 53 + 2, 65, 501, 1024, 86401, 604801);
const smallJson = fc.oneof(fc.jsonValue({ maxDepth: 3 }), oddStrings, oddNumbers);
// One of these fits in a body under the size limit; a few of the small ones do too.
const anyJson = fc.oneof(smallJson, nested, hugeString(12000));
const unknownKeys = fc.oneof(fc.constantFrom(...PROTOTYPE_KEYS, 'dryRun', 'Server', 'a[b]', ''), fc.string({ unit: 'grapheme', maxLength: 20 }));

// A query or path value that no reading accepts: not as the text, nor as the number or boolean it spells.
function rejectedParameter(schema, text) {
  const readings = [text];
  if (text.trim() !== '' && !Number.isNaN(Number(text))) readings.push(Number(text));
  if (text === 'true' || text === 'false') readings.push(text === 'true');
  return readings.every((value) => !isValid(schema, value));
}

const parameterText = (maxLength) => fc.oneof(oddStrings, fc.string({ unit: 'grapheme', maxLength: 40 }), hugeString(maxLength));
const roundTrip = (value) => JSON.parse(JSON.stringify(value) ?? 'null');
const without = (object, keys) => Object.fromEntries(Object.entries(object).filter(([k]) => !keys.includes(k)));
const withKey = (object, key, value) => Object.defineProperty({ ...object }, key, { value, enumerable: true, writable: true, configurable: true });
const pick = (names) => fc.constantFrom(...names);

// Each defect: which operations it applies to, and an arbitrary of { request parts, expected answer }.
const DEFECTS = {
  unknownQueryParameter: {
    applies: () => true,
    arbitrary: (input) => fc.tuple(validRequest(input), unknownKeys.filter((k) => !Object.hasOwn(input.query.properties, k)), fc.string({ maxLength: 20 }))
      .map(([req, name, value]) => ({ ...req, queryEntries: [...entries(req.query), [name, value]], expect: { status: 400, text: `query.${name} is not an accepted field` } })),
  },
  badQueryValue: {
    applies: (input) => Object.keys(input.query.properties).length > 0,
    arbitrary: (input) => fc.tuple(validRequest(input), pick(Object.keys(input.query.properties)), fc.oneof(parameterText(4000).map((t) => [t]), fc.constant(null)))
      .filter(([, name, value]) => value === null || rejectedParameter(input.query.properties[name], value[0]))
      .map(([req, name, value]) => {
        // null: the parameter twice (an array), which no scalar schema accepts.
        const values = value ?? [serialize(req.query[name] ?? 'x'), serialize(req.query[name] ?? 'x')];
        return { ...req, queryEntries: [...entries(without(req.query, [name])), ...values.map((v) => [name, v])], expect: { status: 400, text: `query.${name}` } };
      }),
  },
  missingRequiredQuery: {
    applies: (input) => input.query.required.length > 0,
    arbitrary: (input) => fc.tuple(validRequest(input), pick(input.query.required))
      .map(([req, name]) => ({ ...req, queryEntries: entries(without(req.query, [name])), expect: { status: 400, text: `query.${name} is required` } })),
  },
  badPathParameter: {
    applies: (input) => Object.keys(input.path.properties).length > 0,
    // An empty segment is left out: /v1/operations/ is another route (the list), not a malformed id.
    arbitrary: (input) => fc.tuple(validRequest(input), pick(Object.keys(input.path.properties)), parameterText(2000).filter((t) => t !== ''))
      .filter(([, name, text]) => rejectedParameter(input.path.properties[name], text))
      .map(([req, name, text]) => ({ ...req, path: { ...req.path, [name]: text }, expect: { status: 400, text: `path.${name}` } })),
  },
  undecodablePathParameter: {
    applies: (input) => Object.keys(input.path.properties).length > 0,
    arbitrary: (input) => fc.tuple(validRequest(input), pick(Object.keys(input.path.properties)), fc.constantFrom('%', '%zz', '%E0%A4%A', 'a%', '%C0%AF'))
      .map(([req, name, raw]) => ({ ...req, rawPath: { [name]: raw }, expect: { status: 400, text: 'Failed to decode param' } })),
  },
  unknownNameInPath: {
    // Names of the right shape that exist nowhere, prototype keys among them: a 404, and nothing changes.
    applies: (input) => Object.keys(unknownNames(input)).length > 0,
    arbitrary: (input) => {
      const names = unknownNames(input);
      return fc.tuple(validRequest(input), pick(Object.keys(names)).chain((name) => fc.tuple(fc.constant(name), pick(names[name]))))
        .map(([req, [name, text]]) => ({ ...req, path: { ...req.path, [name]: text }, expect: { status: 404 } }));
    },
  },
  badFieldValue: {
    applies: (input) => Object.keys(input.body?.properties ?? {}).length > 0,
    arbitrary: (input) => fc.tuple(validRequest(input), pick(Object.keys(input.body.properties)), anyJson)
      .filter(([, name, value]) => !isValid(input.body.properties[name], roundTrip(value)))
      .map(([req, name, value]) => ({ ...req, body: { ...req.body, [name]: value }, expect: { status: 400, text: `body.${name}` } })),
  },
  unknownField: {
    applies: (input) => input.body !== null,
    arbitrary: (input) => fc.tuple(validRequest(input), unknownKeys.filter((k) => !Object.hasOwn(input.body.properties ?? {}, k)), anyJson)
      .map(([req, name, value]) => ({ ...req, body: withKey(req.body, name, value), expect: { status: 400, text: `body.${name} is not an accepted field` } })),
  },
  missingRequiredField: {
    applies: (input) => (input.body?.required ?? []).length > 0,
    arbitrary: (input) => fc.tuple(validRequest(input), pick(input.body.required))
      .map(([req, name]) => ({ ...req, body: without(req.body, [name]), expect: { status: 400, text: `body.${name} is required` } })),
  },
  notExactlyOneOf: {
    applies: (input) => Boolean(input.body?.oneOf),
    arbitrary: (input) => {
      const keys = input.body.oneOf.flatMap((branch) => branch.required);
      const all = fc.record(Object.fromEntries(keys.map((k) => [k, validValue(input.body.properties[k])])));
      return fc.tuple(validRequest(input), fc.option(all, { nil: null }))
        .map(([req, both]) => ({ ...req, body: { ...without(req.body, keys), ...(both ?? {}) }, expect: { status: 400, text: 'body must have exactly one of' } }));
    },
  },
  bodyNotAnObject: {
    applies: (input) => input.body !== null,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.array(fc.jsonValue({ maxDepth: 2 }), { maxLength: 4 }))
      .map(([req, array]) => ({ ...req, body: array, expect: { status: 400, text: 'body must be object' } })),
  },
  bodyWhereNoneIsTaken: {
    applies: (input) => input.body === null,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.oneof(
      fc.dictionary(unknownKeys, anyJson, { minKeys: 1, maxKeys: 1 }), fc.dictionary(unknownKeys, smallJson, { minKeys: 1, maxKeys: 4 }),
      fc.array(smallJson, { maxLength: 4 }), anyJson.map((value) => [value]),
    ))
      .map(([req, body]) => ({ ...req, body, expect: { status: 400, text: 'this route takes no body' } })),
  },
  oversizedBody: {
    applies: () => true,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.integer({ min: BODY_LIMIT_BYTES + 1, max: 4 * BODY_LIMIT_BYTES }), fc.boolean())
      .map(([req, size, array]) => ({
        ...req,
        bodyText: array ? `[${'1,'.repeat(Math.ceil(size / 2))}1]` : JSON.stringify({ ...req.body, reason: 'x'.repeat(size) }),
        expect: { status: 413, text: `exceeds ${BODY_LIMIT_BYTES} bytes` },
      })),
  },
  invalidJson: {
    applies: () => true,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.oneof(
      fc.constantFrom(' ', '\n', '{', '}', '[', '{"a":}', '{"a":1,}', "{'a':1}", '{a:1}', 'NaN', 'undefined', '"text"', '1', 'true', 'null',
        '// comment\n{}', '{"a":"\u0000"', '{"a":1}{"b":2}', '{"__proto__":'),
      fc.nat().map((n) => ({ truncate: n })),
      fc.string({ minLength: 1, maxLength: 5 }).map((suffix) => ({ suffix })),
    )).map(([req, defect]) => {
      const text = JSON.stringify(req.body ?? {});
      if (defect.truncate !== undefined) return { req, bodyText: text.slice(0, 1 + (defect.truncate % (text.length - 1))) };
      if (defect.suffix !== undefined) return { req, bodyText: `${text}${defect.suffix}` };
      return { req, bodyText: defect };
    }).filter(({ bodyText }) => !isStrictJson(bodyText))
      .map(({ req, bodyText }) => ({ ...req, bodyText, expect: { status: 400, text: 'request body is not valid JSON' } })),
  },
  wrongContentType: {
    applies: () => true,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.constantFrom(
      null, 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'text/json',
      'application/json-patch+json', 'application/vnd.api+json', 'application/javascript', 'application/json; charset=latin1', 'image/png',
    )).map(([req, contentType]) => ({ ...req, bodyText: JSON.stringify(req.body ?? { a: 1 }), contentType, expect: { status: 415 } })),
  },
  wrongContentEncoding: {
    // A body that says it is compressed but is not (400), or compressed in a way nobody reads (415).
    applies: () => true,
    arbitrary: (input) => fc.tuple(validRequest(input), fc.constantFrom(['gzip', 400], ['deflate', 400], ['br', 400], ['compress', 415], ['x-custom', 415]))
      .map(([req, [encoding, status]]) => ({ ...req, bodyText: JSON.stringify(req.body ?? { a: 1 }), headers: { 'content-encoding': encoding }, expect: { status } })),
  },
};

function unknownNames(input) {
  const candidates = [...PROTOTYPE_KEYS, 'hasownproperty', 'rethinkdb-99', 'rethinkdb_99', 'node-99'];
  return Object.fromEntries(Object.entries(input.path.properties)
    .map(([name, schema]) => [name, candidates.filter((text) => isValid(schema, text))]).filter(([, list]) => list.length > 0));
}

// For each defect that applies to the operation, an arbitrary of requests that have it.
export function malformedRequests(operation) {
  const input = operationInput(operation);
  return Object.fromEntries(Object.entries(DEFECTS).filter(([, d]) => d.applies(input)).map(([defect, d]) => [defect, d.arbitrary(input)]));
}

function isStrictJson(text) {
  try {
    const value = JSON.parse(text);
    return typeof value === 'object' && value !== null;
  } catch {
    return false;
  }
}

function serialize(value) {
  return typeof value === 'string' ? value : String(value);
}

function entries(object) {
  return Object.entries(object).map(([k, v]) => [k, serialize(v)]);
}

// The raw HTTP request: path template filled in, query encoded, body as text with its content type.
export function toHttpRequest(method, template, parts, headers = {}) {
  const path = template.replace(/\{([A-Za-z0-9_]+)\}/g, (_, name) => parts.rawPath?.[name] ?? encodeURIComponent(parts.path[name]));
  const query = new URLSearchParams(parts.queryEntries ?? entries(parts.query)).toString();
  const bodyText = parts.bodyText ?? (parts.body === undefined ? undefined : JSON.stringify(parts.body));
  const contentType = parts.contentType === undefined ? 'application/json' : parts.contentType;
  return {
    method: method.toUpperCase(),
    path: `${path}${query ? `?${query}` : ''}`,
    headers: { ...headers, ...parts.headers, ...(bodyText !== undefined && contentType !== null ? { 'content-type': contentType } : {}) },
    body: bodyText,
  };
}
