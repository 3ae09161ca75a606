// Pure: the HTTP request each command makes, and the exit code its answer earns.

import { isFullOutcome } from '../actions/report.js';
import { EXIT_CODES } from './arguments.js';

// The CLI's action names and the manager's routes (src/routes/action-routes.js).
export const ACTION_PATHS = Object.freeze({
  drain: '/v1/actions/move-primaries-from-server',
  release: '/v1/actions/release-server',
});


export function requestFor(parsed) {
  switch (parsed.command) {
    case 'status':
      return { method: 'GET', path: '/v1/cluster' };
    case 'drain':
    case 'release':
    case 'plan': {
      const { name, ...body } = parsed.action;
      return { method: 'POST', path: `${ACTION_PATHS[name]}${parsed.dryRun ? '?dryRun=true' : ''}`, body };
    }
    case 'operations':
      return { method: 'GET', path: parsed.id === undefined ? '/v1/operations' : `/v1/operations/${encodeURIComponent(parsed.id)}` };
    case 'events':
      return { method: 'GET', path: parsed.limit === undefined ? '/v1/events' : `/v1/events?limit=${parsed.limit}` };
    default:
      throw new TypeError(`no request for command ${parsed.command}`);
  }
}

// answer: { status, body } with body the parsed JSON, or null when the answer was not JSON.
export function exitCodeFor(parsed, answer) {
  if (answer.status >= 400 || answer.body === null || typeof answer.body !== 'object') return EXIT_CODES.MANAGER_ERROR;
  if (parsed.action && !isFullOutcome(answer.body.outcome)) return EXIT_CODES.NOT_FULLY_DONE;
  return EXIT_CODES.OK;
}

// The one line stderr gets when the manager answered an error, or something that is not its JSON.
export function errorLine(answer) {
  const body = answer.body;
  if (body && typeof body === 'object' && typeof body.error === 'string') return `error: ${body.error} (HTTP ${answer.status}): ${body.message ?? ''}`.trimEnd();
  const excerpt = answer.text.replace(/\s+/g, ' ').trim().slice(0, 200);
  if (answer.status >= 400) return `error: HTTP ${answer.status}, not the manager's error format: ${excerpt || '(empty body)'}`;
  return `error: HTTP ${answer.status}, but the answer is not the manager's JSON (is --url the manager?): ${excerpt || '(empty body)'}`;
}
