// Pure: the HTTP request each command makes, and the exit code its answer earns.

import { isFullOutcome } from '../actions/report.js';
import { ACTIONS, EXIT_CODES } from './arguments.js';

// The CLI's action names and the manager's routes (src/routes/action-routes.js).
export const ACTION_PATHS = Object.freeze(Object.fromEntries(Object.entries(ACTIONS).map(([name, { route }]) => [name, `/v1/actions/${route}`])));
export const PERF_WARNING_PATH = '/v1/hooks/perfwarning';
// The request that finds what a SERVER or POD argument names (src/cli/names.js).
export const CLUSTER_REQUEST = Object.freeze({ method: 'GET', path: '/v1/cluster' });

// An operation's statuses that did not do all it was asked (src/actions/operations.js: the report's outcome).
const UNFINISHED_STATUSES = new Set(['partial', 'failed', 'timed_out']);

export function operationRequest(id) {
  return { method: 'GET', path: `/v1/operations/${encodeURIComponent(id)}` };
}

// The command with its SERVER or POD argument replaced by the name it resolved to.
export function withSubject(parsed, name) {
  if (parsed.action) return { ...parsed, action: { ...parsed.action, server: name } };
  if (parsed.perfWarning) return { ...parsed, perfWarning: { ...parsed.perfWarning, pod: name } };
  return parsed;
}

export function requestFor(parsed) {
  switch (parsed.command) {
    case 'status':
      return CLUSTER_REQUEST;
    case 'perf-warning': {
      const { step, ...body } = parsed.perfWarning;
      if (step === 'raise') return { method: 'POST', path: PERF_WARNING_PATH, body };
      const [key, value] = body.pod !== undefined ? ['pod', body.pod] : ['node', body.node];
      return { method: 'DELETE', path: `${PERF_WARNING_PATH}?${key}=${encodeURIComponent(value)}` };
    }
    case 'operations':
      return parsed.id === undefined ? { method: 'GET', path: '/v1/operations' } : operationRequest(parsed.id);
    case 'events':
      return { method: 'GET', path: parsed.limit === undefined ? '/v1/events' : `/v1/events?limit=${parsed.limit}` };
    default: {
      if (!parsed.action) throw new TypeError(`no request for command ${parsed.command}`);
      const { name, ...body } = parsed.action;
      return { method: 'POST', path: `${ACTION_PATHS[name]}${parsed.dryRun ? '?dryRun=true' : ''}`, body };
    }
  }
}

// answer: { status, body } with body the parsed JSON, or null when the answer was not JSON.
export function exitCodeFor(parsed, answer) {
  if (answer.status >= 400 || answer.body === null || typeof answer.body !== 'object') return EXIT_CODES.MANAGER_ERROR;
  return shortfall(parsed, answer.body) === null ? EXIT_CODES.OK : EXIT_CODES.NOT_FULLY_DONE;
}

// What did not fully succeed in a 2xx answer, as the line stderr gets (exit code 4), or null.
export function shortfall(parsed, body) {
  if (parsed.action) {
    // A data move's 202 has no outcome yet: it started (isFullOutcome counts 'started' as full).
    const outcome = body.outcome ?? (body.operation ? 'started' : undefined);
    return isFullOutcome(outcome) ? null : `the action did not fully succeed: outcome ${outcome ?? 'missing'}`;
  }
  if (parsed.command === 'perf-warning' && parsed.perfWarning.step === 'raise') {
    const short = (body.pods ?? []).filter((p) => !isFullOutcome(p.outcome));
    return short.length === 0 ? null : `the perf warning's demotion did not fully succeed: ${short.map((p) => `outcome ${p.outcome} (pod ${p.pod})`).join(', ')}`;
  }
  if (parsed.command === 'perf-warning') {
    // One pod's end, or a node's: each restore that has an outcome (a wait or a started operation has none).
    const ends = Array.isArray(body.pods) ? body.pods : [body];
    const short = ends.filter((e) => e.restore?.outcome !== undefined && !isFullOutcome(e.restore.outcome));
    return short.length === 0 ? null : `the restore after the perf warning did not fully succeed: ${short.map((e) => `outcome ${e.restore.outcome} (pod ${e.pod})`).join(', ')}`;
  }
  if (parsed.command === 'operations' && parsed.id !== undefined) {
    return UNFINISHED_STATUSES.has(body.status) ? `operation ${body.id ?? parsed.id} did not fully succeed: status ${body.status}` : null;
  }
  return null;
}

// The one line stderr gets when the manager answered an error, or something that is not its JSON.
export function errorLine(answer) {
  const body = answer.body;
  if (body && typeof body === 'object' && typeof body.error === 'string') return `error: ${body.error} (HTTP ${answer.status}): ${body.message ?? ''}`.trimEnd();
  const excerpt = answer.text.replace(/\s+/g, ' ').trim().slice(0, 200);
  if (answer.status >= 400) return `error: HTTP ${answer.status}, not the manager's error format: ${excerpt || '(empty body)'}`;
  return `error: HTTP ${answer.status}, but the answer is not the manager's JSON (is --url the manager?): ${excerpt || '(empty body)'}`;
}
