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

// How loud an answer's log line is. A refusal because a dependency or the leadership is missing (503) is expected
// during an outage or a hand-over and repeats with every call: a warning, not an error. A probe's answer is never
// logged per request (a probe comes every few seconds); the readiness changes are logged where they are seen.
export function logLevelForStatus(statusCode, { probe = false } = {}) {
  if (probe) return 'debug';
  if (statusCode === 503) return 'warn';
  if (statusCode >= 500) return 'error';
  return 'info';
}
