// The eviction admission webhook: the API server sends an AdmissionReview (admission.k8s.io/v1) for every
// CREATE of pods/eviction in the RethinkDB namespace (deploy/k8s/manager-webhook.yaml) and admits the eviction
// only if the answer allows it. A refusal is a 429, as a PodDisruptionBudget's: kubectl drain and the cluster
// autoscaler retry it. Served over TLS on its own port (src/webhook-server.js), never on the API port.

import express from 'express';
import { checkRelayClaim } from '../auth/relay-credentials.js';
import { appError, fromBodyParserError, logLevelForStatus } from '../errors.js';

const API_VERSION = 'admission.k8s.io/v1';
// An eviction's AdmissionReview is a few KiB; the limit leaves room for any object the API server may send.
const BODY_LIMIT_BYTES = 1024 * 1024;
const OPERATIONS = ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'];

// relayReview(review): resolves with the leader's answer when this replica must not review it itself (a follower),
// null when it reviews it; rejects when a follower cannot reach the leader.
// credentials: src/auth/relay-credentials.js; a review says it was passed on by a follower only with a peer's token.
export function createWebhookApp({
  maintenance, work, logger, relayReview = async () => null, credentials = { verify: async () => ({ ok: false, reason: 'no relay credentials' }) },
}) {
  const log = logger.child({ module: 'webhook' });
  const app = express();
  app.disable('x-powered-by');
  // Each request's logger carries its id (this process's count), so that its lines, its error included, read together;
  // a review's lines also carry the AdmissionReview's uid, which the API server's audit log shows.
  let requests = 0;
  app.use((req, res, next) => {
    requests += 1;
    req.id = requests;
    req.log = log.child({ reqId: req.id });
    next();
  });
  app.use(express.json({ limit: BODY_LIMIT_BYTES }));

  // Who passed the review on, when a peer replica proves it did (its relay token); null otherwise. A claim without
  // the proof is ignored, so that nobody can make a follower review an eviction itself instead of asking the leader.
  async function peerRelay(req, ask) {
    const claim = await checkRelayClaim(req.headers, credentials.verify);
    if (claim.claimed && !claim.peer) req.log.info({ pod: ask.pod, claimedBy: claim.claimedBy, reason: claim.reason }, 'relay headers from a caller that is not a manager replica ignored');
    return claim.peer?.relayedBy ?? null;
  }


  app.post('/v1/admission/eviction', async (req, res) => {
    // A malformed review throws BAD_REQUEST here, before anything is done or passed on.
    const review = parseReview(req.body);
    const reply = (response) => res.json({ apiVersion: API_VERSION, kind: 'AdmissionReview', response: { uid: review.uid, ...response } });
    if (!review.eviction) {
      reply({ allowed: true });
      return;
    }
    const ask = review.eviction;
    const reqLog = req.log.child({ uid: review.uid });
    try {
      // A follower passes the review on to the leader (never a review passed on already) and answers with its answer.
      const relayedBy = await peerRelay(req, ask);
      if (relayedBy) reqLog.info({ pod: ask.pod, relayedBy }, 'eviction review passed on by a follower');
      const fromLeader = relayedBy ? null : await relayReview(req.body);
      if (fromLeader && !fromLeader.response) throw new Error("the leader's webhook answered without a response");
      if (fromLeader) {
        reply({ ...fromLeader.response, uid: review.uid });
        return;
      }
      const answer = await work.track(() => maintenance.reviewEviction(ask));
      reply({
        allowed: answer.allowed,
        ...(answer.allowed ? {} : { status: { code: answer.code, reason: 'TooManyRequests', message: answer.message } }),
        ...(answer.warnings?.length ? { warnings: answer.warnings.map((w) => w.slice(0, 250)) } : {}),
      });
    } catch (err) {
      // Starting (the persisted state not loaded yet), shutting down, or a follower that cannot reach the leader: the
      // manager cannot act, so the eviction goes ahead as if the manager were down (the webhook's failurePolicy
      // Ignore), with a warning that says so.
      const message = `rethinkdb-k8s-manager did not act: ${err.message}; the eviction goes ahead without demoting primaries first`;
      reqLog.warn({ pod: ask.pod, err: err.message }, 'eviction allowed: the manager takes no work now');
      reply({ allowed: true, warnings: [message.slice(0, 250)] });
    }
  });

  app.use((req, res, next) => next(appError('webhookNotFound', { method: req.method, path: req.path })));
  app.use(createErrorHandler());
  return app;
}

// The webhook's one error handler: a malformed review or body is the caller's mistake (4xx, its code from
// src/errors.js); anything else is INTERNAL, and its message stays in the log, the request's.
function createErrorHandler() {
  // eslint-disable-next-line no-unused-vars
  return function webhookErrorHandler(err, req, res, next) {
    const log = req.log;
    const appErr = fromBodyParserError(err, { bodyLimitBytes: BODY_LIMIT_BYTES });
    const entry = { code: appErr.code, status: appErr.statusCode, method: req.method, path: req.path, err: appErr.message };
    const level = logLevelForStatus(appErr.statusCode);
    if (appErr.statusCode >= 500) log[level]({ ...entry, cause: appErr.cause?.message }, 'webhook request failed');
    else log[level](entry, 'webhook request rejected');
    res.status(appErr.statusCode).json({ error: appErr.code, message: appErr.message });
  };
}

// What the webhook reads of an AdmissionReview: { uid, eviction } where eviction is what reviewEviction is asked
// ({ pod, namespace, dryRun, user }), or null for a review that is not an eviction (allowed as it is). The API server
// sends every field that decides what happens with its type (dryRun a boolean or absent, never a string): a review
// with any of them of another type is refused with every problem named, and nothing is done.
function parseReview(body) {
  if (!isObject(body) || body.kind !== 'AdmissionReview' || body.apiVersion !== API_VERSION || !isObject(body.request)) {
    throw appError('reviewNotAdmissionReview', { apiVersion: API_VERSION });
  }
  const { request } = body;
  const metadata = isObject(request.object) ? request.object.metadata : undefined;
  const problems = [
    expectField(request.uid, 'request.uid', 'a non-empty string', (v) => typeof v === 'string' && v !== ''),
    expectField(request.operation, 'request.operation', `one of ${OPERATIONS.join(', ')}`, (v) => OPERATIONS.includes(v)),
    expectField(request.dryRun, 'request.dryRun', 'true or false (a JSON boolean) or absent', optional(isBoolean)),
    expectField(request.resource, 'request.resource', 'an object with a string resource', (v) => isObject(v) && typeof v.resource === 'string'),
    expectField(request.subResource, 'request.subResource', 'a string or absent', optional(isString)),
    expectField(request.name, 'request.name', 'a string or absent', optional(isString)),
    expectField(request.namespace, 'request.namespace', 'a string or absent', optional(isString)),
    expectField(request.userInfo, 'request.userInfo', 'an object or absent', optional(isObject)),
    expectField(request.userInfo?.username, 'request.userInfo.username', 'a string or absent', optional(isString)),
    expectField(request.object, 'request.object', 'an object, null or absent', (v) => v === undefined || v === null || isObject(v)),
    expectField(metadata, 'request.object.metadata', 'an object or absent', optional(isObject)),
    expectField(metadata?.name, 'request.object.metadata.name', 'a string or absent', optional(isString)),
    expectField(metadata?.namespace, 'request.object.metadata.namespace', 'a string or absent', optional(isString)),
  ].filter(Boolean);
  const eviction = problems.length === 0 && isEviction(request);
  const pod = request.name || metadata?.name;
  const namespace = request.namespace || metadata?.namespace;
  if (eviction && !pod) problems.push('an eviction review must name the pod (request.name or request.object.metadata.name)');
  if (eviction && !namespace) problems.push('an eviction review must name the namespace (request.namespace or request.object.metadata.namespace)');
  if (problems.length > 0) throw appError('reviewMalformed', { problems });
  return { uid: request.uid, eviction: eviction ? { pod, namespace, dryRun: request.dryRun === true, user: request.userInfo?.username ?? null } : null };
}

function isEviction(request) {
  return request.operation === 'CREATE' && request.resource.resource === 'pods' && request.subResource === 'eviction';
}

// null when value passes; otherwise what was wrong and what is accepted.
function expectField(value, field, accepted, accepts) {
  return accepts(value) ? null : `${field} must be ${accepted}, got ${describeValue(value)}`;
}

function describeValue(value) {
  if (value === undefined) return 'none';
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'string') return `the string ${JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value)}`;
  if (typeof value === 'object') return 'an object';
  return `the ${typeof value} ${JSON.stringify(value)}`;
}

const isObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);
const isString = (v) => typeof v === 'string';
const isBoolean = (v) => typeof v === 'boolean';
const optional = (check) => (v) => v === undefined || check(v);
