// What the log never holds: a caller's bearer token and a replica's relay token (pino-http logs a request's headers).

import { createLogger } from '../../src/logger.js';
import { createLogSink } from '../helpers/harness.js';

test('when a request with a bearer token and a relay token is logged, then neither token is in the log', () => {
  const sink = createLogSink();
  const logger = createLogger({ level: 'info', destination: sink.stream });
  logger.info({ req: { headers: { authorization: 'Bearer caller.secret.token', 'x-rethinkdb-manager-relay-token': 'relay.secret.token', host: 'x' } } }, 'request completed');
  const text = JSON.stringify(sink.lines);
  expect(text).toContain('request completed');
  expect(text).not.toContain('caller.secret.token');
  expect(text).not.toContain('relay.secret.token');
});
