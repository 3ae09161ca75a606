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

// The catalogue: every message the manager composes, by name, beside its code. A template takes the facts it names
// and says what happened, why, and what to do; appError(name, facts) makes the error. A message that comes whole
// from elsewhere (a policy's reason, a token check's verdict) is given to AppError as it is.
const MESSAGES = {
  // the HTTP edge
  routeNotFound: ['NOT_FOUND', ({ method, path }) => `no route for ${method} ${path}; see docs/api.md or GET /openapi.json`],
  webhookNotFound: ['NOT_FOUND', ({ method, path }) => `no webhook at ${method} ${path}; the eviction webhook is POST /v1/admission/eviction`],
  targetNotOriginForm: ['BAD_REQUEST', () => 'the request target must be a path starting with a single "/" (origin form); absolute URLs, authorities and "*" are not accepted'],
  transferEncodingRefused: ['BAD_REQUEST', ({ te }) => `Transfer-Encoding "${te}" is not accepted; send the body with Content-Length or Transfer-Encoding: chunked`],
  bodyNotJson: ['UNSUPPORTED_MEDIA_TYPE', ({ contentType }) => `request bodies must be application/json, got ${contentType ?? 'no content type'}`],
  bodyIncomplete: ['BAD_REQUEST', () => 'the request body was not received completely (malformed framing, or the connection closed); nothing was done'],
  bodyTooLarge: ['PAYLOAD_TOO_LARGE', ({ limitBytes }) => `request body exceeds ${limitBytes} bytes (${limitBytes / 1024} KiB); send at most that`],
  bodyInvalidJson: ['BAD_REQUEST', ({ detail }) => `request body is not valid JSON: ${detail}`],
  charsetUnsupported: ['UNSUPPORTED_MEDIA_TYPE', ({ detail }) => `${detail}; send the JSON body in UTF-8 (application/json; charset=utf-8)`],
  encodingUnsupported: ['UNSUPPORTED_MEDIA_TYPE', ({ detail }) => `${detail}; send the body without Content-Encoding, or with gzip, deflate or br`],
  inputInvalid: ['BAD_REQUEST', ({ where, problems, accepted }) => `invalid ${where}: ${problems.join('; ')}. Accepted ${where}: ${accepted}`],
  bodyNotAccepted: ['BAD_REQUEST', ({ problem }) => `invalid body: ${problem}. Accepted body: none (or {})`],
  podOrNode: ['BAD_REQUEST', () => 'invalid query: give exactly one of pod and node'],
  reviewNotAdmissionReview: ['BAD_REQUEST', ({ apiVersion }) => `expected an ${apiVersion} AdmissionReview: a JSON object with apiVersion "${apiVersion}", kind "AdmissionReview" and a request object`],
  reviewMalformed: ['BAD_REQUEST', ({ problems }) => `malformed AdmissionReview, nothing was done: ${problems.join('; ')}`],
  operationNotFound: ['OPERATION_NOT_FOUND', ({ id }) => `operation "${id}" does not exist (operations are kept in memory; a restart forgets them)`],
  noMonitor: ['NOT_FOUND', () => 'this manager has no monitor'],
  prestopTooSlow: ['DEADLINE_EXCEEDED', ({ pod, seconds }) => `preStop for ${pod} did not finish within ${seconds} s; the pod may stop with primaries still on it`],
  internal: ['INTERNAL', () => 'internal error'],
  // taking work
  shuttingDown: ['SHUTTING_DOWN', () => 'the manager is shutting down and takes no new work'],
  starting: ['STARTING', ({ reason }) => `${reason}; it takes no work until it has, retry shortly`],
  lockWaitTooLong: ['DEADLINE_EXCEEDED', ({ ms, key }) => `gave up waiting ${ms} ms for the lock on ${key}`],
  // leadership and the relay
  notLeader: ['NOT_LEADER', ({ identity, what }) => `this manager replica (${identity}) does not lead (any more), so it does not ${what}; the leader does`],
  relayedToFollower: ['NOT_LEADER', ({ identity, relayedBy }) => `this manager replica (${identity}) does not lead, so it cannot serve a request relayed by ${relayedBy}`],
  relayedWhileShuttingDown: ['SHUTTING_DOWN', ({ identity, method, path }) => `this manager replica (${identity}) is shutting down and does not lead; send ${method} ${path} to another replica`],
  leaderAnswerLost: ['LEADER_ANSWER_LOST', ({ leader, method, path, why }) => `the leader ${leader} took ${method} ${path} but its answer was lost (${why}); check what it did before sending it again`],
  noLeaderInTime: ['NO_LEADER', ({ method, path, budgetMs, problem }) => `no manager replica could serve ${method} ${path} within ${budgetMs} ms: ${problem}`],
  leaderAddressRefused: ['NO_LEADER', ({ problem }) => `the Lease names an address for the leader that is not relayed to: ${problem}`],
  noRelayToken: ['NO_LEADER', ({ method, path, problem }) => `this replica cannot relay ${method} ${path} to the leader: ${problem}`],
  noLeader: ['NO_LEADER', () => 'no manager replica leads now'],
  noLeaderCa: ['NO_LEADER', () => "this replica does not lead and has no CA to check the leader's webhook certificate with (WEBHOOK_TLS_CA_FILE, or ca.crt beside the certificate)"],
  leaseUnreadable: ['NO_LEADER', ({ error }) => `this replica cannot read the Lease, so it cannot relay to the leader: ${error}`],
  leaseRoundSlow: ['KUBERNETES_UNAVAILABLE', ({ ms }) => `the Lease round did not finish within ${ms} ms`],
  // authentication
  tokenReviewsBusy: ['KUBERNETES_UNAVAILABLE', ({ max }) => `cannot verify the bearer token now: ${max} token reviews are already running; retry`],
  tokenReviewFailed: ['KUBERNETES_UNAVAILABLE', () => 'cannot verify the bearer token: the TokenReview could not be made (the manager\'s log says why)'],
  sandboxNoTokenReview: ['KUBERNETES_UNAVAILABLE', () => 'the sandbox has no TokenReview API; use static-token authentication with the sandbox'],
  // RethinkDB
  storeSlow: ['DATA_STORE_UNAVAILABLE', ({ what, ms }) => `RethinkDB did not answer "${what}" within ${ms} ms`],
  storeUnavailable: ['DATA_STORE_UNAVAILABLE', ({ what, message }) => `RethinkDB unavailable during "${what}": ${message}`],
  storeRefused: ['RECONFIGURATION_REJECTED', ({ what, message }) => `RethinkDB could not "${what}": ${message}`],
  storeError: ['INTERNAL', ({ what, name, message }) => `RethinkDB error during "${what}": ${name} ${message}`],
  notConnected: ['DATA_STORE_UNAVAILABLE', ({ lastError }) => `not connected to RethinkDB${lastError ? `: ${lastError}` : ' yet'}`],
  pingSlow: ['DATA_STORE_UNAVAILABLE', ({ ms }) => `RethinkDB did not answer within ${ms} ms`],
  clusterReadSlow: ['DEADLINE_EXCEEDED', ({ ms }) => `the data store did not answer within ${ms} ms`],
  heartbeatRejected: ['RECONFIGURATION_REJECTED', ({ seconds, firstError }) => `RethinkDB rejected the heartbeat timeout ${seconds} s: ${firstError ?? 'no result'}`],
  heartbeatWriteSlow: ['DEADLINE_EXCEEDED', ({ ms }) => `the write did not answer within ${ms} ms, and the demotion goes ahead (the write may still land)`],
  tableConfigNoResult: ['RECONFIGURATION_REJECTED', ({ tableId }) => `table_config update for ${tableId} returned no result`],
  tableConfigRejected: ['RECONFIGURATION_REJECTED', ({ firstError }) => `RethinkDB rejected the table_config update: ${firstError}`],
  tableGone: ['TABLE_NOT_FOUND', ({ tableId }) => `table ${tableId} no longer exists (update skipped)`],
  // Kubernetes
  kubeSlow: ['KUBERNETES_UNAVAILABLE', ({ what, ms }) => `Kubernetes API did not answer "${what}" within ${ms} ms`],
  kubeNotFound: ['NOT_FOUND', ({ what, detail }) => `Kubernetes: ${what}: ${detail}`],
  kubeForbidden: ['KUBERNETES_UNAVAILABLE', ({ what, status, detail }) => `Kubernetes refused "${what}" (${status}): ${detail}; check the manager's ServiceAccount and RBAC`],
  kubeRejected: ['INTERNAL', ({ what, status, detail }) => `Kubernetes rejected "${what}" (${status}): ${detail}`],
  kubeUnavailable: ['KUBERNETES_UNAVAILABLE', ({ what, detail }) => `Kubernetes API unavailable during "${what}": ${detail}`],
  noKubeForScale: ['KUBERNETES_UNAVAILABLE', () => 'no Kubernetes API to scale the StatefulSet with'],
  noKubeForNode: ['KUBERNETES_UNAVAILABLE', () => 'no Kubernetes API is configured, so a node cannot be resolved to pods'],
  // what a request names
  podNotFound: ['POD_NOT_FOUND', ({ pod, namespace, known = null }) => `pod "${pod}" does not exist in namespace ${namespace}${known === null ? '' : ` (RethinkDB pods: ${known})`}`],
  podHasNoServer: ['POD_NOT_FOUND', ({ pod, known }) => `no RethinkDB server belongs to pod "${pod}" (without a Kubernetes API the manager knows pods only by their servers' hostnames: ${known})`],
  nodeNotFound: ['NODE_NOT_FOUND', ({ node }) => `Kubernetes node "${node}" does not exist`],
  serverNotFound: ['SERVER_NOT_FOUND', ({ ref, known }) => `server "${ref}" is not in the cluster (known: ${known})`],
  tableNotManaged: ['TABLE_NOT_FOUND', ({ ref, known }) => `table "${ref}" is not managed by this manager (managed: ${known})`],
  tableUnreadable: ['DATA_STORE_UNAVAILABLE', ({ table, error }) => `table ${table}: ${error}`],
  shardNotFound: ['SHARD_NOT_FOUND', ({ table, last, shard }) => `table ${table} has shards 0 to ${last}, not ${shard}`],
  sandboxObjectNotFound: ['NOT_FOUND', ({ what, name }) => `Kubernetes: get ${what} ${name}: ${what}s "${name}" not found`],
  sandboxServerNotFound: ['SERVER_NOT_FOUND', ({ name, known }) => `sandbox server "${name}" does not exist (known: ${known})`],
  sandboxPodNotFound: ['POD_NOT_FOUND', ({ name }) => `sandbox pod "${name}" does not exist`],
  sandboxNodeNotFound: ['NODE_NOT_FOUND', ({ node }) => `sandbox node "${node}" does not exist`],
  // actions and events
  replaceConnected: ['BAD_REQUEST', ({ server }) => `${server} is connected; only a lost (disconnected) server can be replaced`],
  migrationVersion: ['BAD_REQUEST', ({ version, expected }) => `migration record version ${version ?? 'none'} is not ${expected}; it is not resumed`],
  migrationIntentUnknown: ['BAD_REQUEST', ({ type }) => `unknown migration intent ${type}`],
  noExecutorStep: ['INTERNAL', ({ type }) => `no executor step for intent ${type}`],
  joinTooSlow: ['DEADLINE_EXCEEDED', ({ pod, seconds }) => `no RethinkDB server for pod ${pod} joined within ${seconds} s`],
};

// The catalogue's entries: { name: { code, message(facts) } } (docs/api.md lists the codes; tests check each entry).
export const ERROR_CATALOGUE = Object.freeze(Object.fromEntries(Object.entries(MESSAGES).map(([name, [code, message]]) => {
  if (!ERROR_CODES[code]) throw new TypeError(`catalogue entry ${name} has unknown code ${code}`);
  return [name, Object.freeze({ code, message })];
})));

// The error a catalogue entry names, its message made from facts. options: { cause, details } as AppError takes them.
export function appError(name, facts = {}, options = {}) {
  const entry = ERROR_CATALOGUE[name];
  if (!entry) throw new TypeError(`no error ${name} in the catalogue`);
  return new AppError(entry.code, entry.message(facts), options);
}

function isAppError(err) {
  return err instanceof AppError;
}

// Anything that is not already an AppError becomes INTERNAL, keeping the original as cause.
export function toAppError(err) {
  if (isAppError(err)) return err;
  return appError('internal', {}, { cause: err });
}

// What express's body parser (body-parser, through http-errors) reports, in our codes: a body over the limit, a body
// that is not JSON, a charset or content coding it cannot read, another fault of the request it marks as safe to show
// (expose, a 4xx); anything else is ours, INTERNAL with a generic message (the original kept as cause, never shown).
export function fromBodyParserError(err, { bodyLimitBytes }) {
  if (isAppError(err)) return err;
  switch (err?.type) {
    case 'entity.too.large':
      return appError('bodyTooLarge', { limitBytes: bodyLimitBytes });
    case 'entity.parse.failed':
      return appError('bodyInvalidJson', { detail: err.message });
    case 'charset.unsupported':
      return appError('charsetUnsupported', { detail: err.message });
    case 'encoding.unsupported':
      return appError('encodingUnsupported', { detail: err.message });
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
