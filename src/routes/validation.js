// Request validation with JSON schemas: errors name the field, say what was wrong and what is accepted.

import Ajv from 'ajv';
import { AppError } from '../errors.js';

const ajv = new Ajv({
  allErrors: true, strict: true, strictRequired: false, coerceTypes: false, verbose: true,
});

export function compileValidator(schema, where) {
  const validate = ajv.compile(schema);
  const accepted = describeSchema(schema);
  return (value) => {
    if (validate(value)) return value;
    // A failed oneOf reports each branch's own failure too; the oneOf message alone says it better.
    const hasOneOf = validate.errors.some((e) => e.keyword === 'oneOf');
    const problems = validate.errors.filter((e) => !(hasOneOf && e.schemaPath.startsWith('#/oneOf/'))).map((e) => formatError(e, where));
    throw new AppError('BAD_REQUEST', `invalid ${where}: ${[...new Set(problems)].join('; ')}. Accepted ${where}: ${accepted}`, {
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
  return `${path} ${error.message}`;
}

// A one-line summary of an object schema, e.g. {"server": string (required), "reason": string}.
export function describeSchema(schema) {
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

export const fields = {
  server: { type: 'string', minLength: 1, maxLength: 128 },
  node: { type: 'string', minLength: 1, maxLength: 253 },
  table: { type: 'string', minLength: 3, maxLength: 200, pattern: '^[A-Za-z0-9_]+\\.[A-Za-z0-9_]+$' },
  shard: { type: 'integer', minimum: 0, maximum: 1023 },
  deadlineSeconds: { type: 'integer', minimum: 1, maximum: 86400 },
  reason: { type: 'string', maxLength: 256 },
  flag: { type: 'boolean' },
};

export function objectSchema(properties, required = []) {
  return { type: 'object', properties, required, additionalProperties: false };
}

export const dryRunQuery = objectSchema({ dryRun: { enum: ['true', 'false'] } });
