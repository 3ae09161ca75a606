// The one error model: every failure the manager reports has a stable code and an HTTP status.

export const ERROR_CODES = Object.freeze({
  BAD_REQUEST: { statusCode: 400 },
  UNAUTHENTICATED: { statusCode: 401 },
  FORBIDDEN: { statusCode: 403 },
  NOT_FOUND: { statusCode: 404 },
  SERVER_NOT_FOUND: { statusCode: 404 },
  TABLE_NOT_FOUND: { statusCode: 404 },
  SHARD_NOT_FOUND: { statusCode: 404 },
  POD_NOT_FOUND: { statusCode: 404 },
  NODE_NOT_FOUND: { statusCode: 404 },
  OPERATION_NOT_FOUND: { statusCode: 404 },
  UNSUPPORTED_MEDIA_TYPE: { statusCode: 415 },
  PAYLOAD_TOO_LARGE: { statusCode: 413 },
  RECONFIGURATION_REJECTED: { statusCode: 502 },
  // The leader took a relayed request but its answer was lost: it may have done it. Not a 503, which callers (the
  // pods' hooks) may send again.
  LEADER_ANSWER_LOST: { statusCode: 502 },
  SHUTTING_DOWN: { statusCode: 503 },
  STARTING: { statusCode: 503 },
  NOT_LEADER: { statusCode: 503 },
  NO_LEADER: { statusCode: 503 },
  DATA_STORE_UNAVAILABLE: { statusCode: 503 },
  KUBERNETES_UNAVAILABLE: { statusCode: 503 },
  DEADLINE_EXCEEDED: { statusCode: 504 },
  INTERNAL: { statusCode: 500 },
});

export class AppError extends Error {
  constructor(code, message, { cause, details } = {}) {
    super(message, cause ? { cause } : undefined);
    if (!ERROR_CODES[code]) throw new TypeError(`unknown error code ${code}`);
    this.name = 'AppError';
    this.code = code;
    this.statusCode = ERROR_CODES[code].statusCode;
    if (details !== undefined) this.details = details;
  }
}

function isAppError(err) {
  return err instanceof AppError;
}

// Anything that is not already an AppError becomes INTERNAL, keeping the original as cause.
export function toAppError(err) {
  if (isAppError(err)) return err;
  return new AppError('INTERNAL', 'internal error', { cause: err });
}

// What express's body parser (body-parser, through http-errors) reports, in our codes: a body over the limit, a body
// that is not JSON, a charset or content coding it cannot read, another fault of the request it marks as safe to show
// (expose, a 4xx); anything else is ours, INTERNAL with a generic message (the original kept as cause, never shown).
export function fromBodyParserError(err, { bodyLimitBytes }) {
  if (isAppError(err)) return err;
  switch (err?.type) {
    case 'entity.too.large':
      return new AppError('PAYLOAD_TOO_LARGE', `request body exceeds ${bodyLimitBytes} bytes (${bodyLimitBytes / 1024} KiB); send at most that`);
    case 'entity.parse.failed':
      return new AppError('BAD_REQUEST', `request body is not valid JSON: ${err.message}`);
    case 'charset.unsupported':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', `${err.message}; send the JSON body in UTF-8 (application/json; charset=utf-8)`);
    case 'encoding.unsupported':
      return new AppError('UNSUPPORTED_MEDIA_TYPE', `${err.message}; send the body without Content-Encoding, or with gzip, deflate or br`);
    default:
      if (err?.expose === true && err.status >= 400 && err.status < 500) return new AppError('BAD_REQUEST', err.message);
      return toAppError(err);
  }
}

// How loud an answer's log line is. A refusal because a dependency or the leadership is missing (503) is expected
// during an outage or a hand-over and repeats with every call: a warning, not an error. A probe's answer is never
// logged per request (a probe comes every few seconds); the readiness changes are logged where they are seen.
export function logLevelForStatus(statusCode, { probe = false } = {}) {
  if (probe) return 'debug';
  if (statusCode === 503) return 'warn';
  if (statusCode >= 500) return 'error';
  return 'info';
}
