// The root pino logger. The destination is an argument so that tests can capture lines in memory.

import pino from 'pino';

export function createLogger({ level = 'info', destination } = {}) {
  return pino({
    level,
    base: { service: 'rethinkdb-k8s-manager' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['req.headers.authorization', 'req.headers["x-rethinkdb-manager-relay-token"]', 'password', '*.password'], censor: '[redacted]' },
  }, destination);
}
