// Checks an answer against what /openapi.json documents for its route and status: the status must be documented, the
// content type must be the documented one, and the body must match the documented schema (ajv, strict, with formats).

import Ajv from 'ajv';
import addFormats from 'ajv-formats';

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const COMPONENTS_ID = 'openapi-components.json';

// '#/components/schemas/X' as a reference into the components added to ajv under COMPONENTS_ID.
function rebased(schema) {
  return JSON.parse(JSON.stringify(schema).replaceAll('"#/components/schemas/', `"${COMPONENTS_ID}#/$defs/`));
}

// The documented operation of a concrete request (path without the query), as [template, operation], or null.
function findOperation(document, method, path) {
  for (const [template, item] of Object.entries(document.paths)) {
    const pattern = new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^/}]+\}/g, '[^/]+')}$`);
    if (pattern.test(path) && item[method]) return [template, item[method]];
  }
  return null;
}

export function createResponseChecker(document) {
  const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false });
  addFormats(ajv);
  ajv.addSchema({ $id: COMPONENTS_ID, $defs: rebased(document.components.schemas) });
  const compiled = new Map();
  const exercised = new Set();

  function validatorFor(key, schema) {
    if (!compiled.has(key)) compiled.set(key, ajv.compile(rebased(schema)));
    return compiled.get(key);
  }

  // Every documented response's schema, compiled (strict mode refuses unknown keywords and bad references).
  function compileAll() {
    for (const [template, item] of Object.entries(document.paths)) {
      for (const method of METHODS.filter((m) => item[m])) {
        for (const [status, response] of Object.entries(item[method].responses)) {
          for (const [type, { schema }] of Object.entries(response.content ?? {})) validatorFor(`${method} ${template} ${status} ${type}`, schema);
        }
      }
    }
    return compiled.size;
  }

  // Problems with one answer, as strings (none: it is what the document says). contentType: the header as sent.
  function check({ method, path, status, contentType = 'application/json', body }) {
    const lower = method.toLowerCase();
    const found = findOperation(document, lower, path.split('?')[0]);
    if (!found) return [`${method} ${path} is not documented`];
    const [template, operation] = found;
    const response = operation.responses[String(status)];
    if (!response) return [`${method} ${template} answered ${status}, which it does not document (${Object.keys(operation.responses).join(', ')})`];
    const type = Object.keys(response.content ?? {}).find((t) => contentType.split(';')[0].trim() === t);
    if (!type) return [`${method} ${template} ${status} answered ${contentType}, not ${Object.keys(response.content ?? {}).join(' or ')}`];
    const validate = validatorFor(`${lower} ${template} ${status} ${type}`, response.content[type].schema);
    exercised.add(`${lower} ${template} ${status}`);
    if (validate(body)) return [];
    return validate.errors.map((e) => `${method} ${template} ${status}: body${e.instancePath} ${e.message}${e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ''}`);
  }

  // check() for a supertest (or fetch-like) response: the body as parsed JSON, or as text for other types.
  function checkResponse(method, path, res) {
    const contentType = res.headers['content-type'] ?? '';
    const body = /^application\/json/.test(contentType) ? res.body : res.text;
    return check({ method, path, status: res.status, contentType, body });
  }

  // The documented success answers (2xx) no check has seen.
  function unexercisedSuccesses() {
    return Object.entries(document.paths).flatMap(([template, item]) => METHODS.filter((m) => item[m])
      .flatMap((m) => Object.keys(item[m].responses).filter((s) => s.startsWith('2')).map((s) => `${m} ${template} ${s}`)))
      .filter((key) => !exercised.has(key));
  }

  return { check, checkResponse, compileAll, unexercisedSuccesses };
}
