// With several manager replicas, only the leader acts. Every replica sits behind the one Service, so a follower
// relays what only the leader may do (hooks, actions, operator commands) and what only the leader knows (operations,
// the monitor, the audit records) to the leader's address from the Lease, and answers with the leader's answer. It
// answers itself: the probes, /metrics, the status page, the OpenAPI document, GET /v1/cluster (the shard map from
// RethinkDB, the marks from the pods' annotations) and GET /v1/leader.
// While nobody leads (the leader crashed and its Lease has not expired yet), the request waits for the next leader
// within its budget: a preStop hook within PRESTOP_DEADLINE_SECONDS, the rest within ACTION_DEADLINE_SECONDS. If this
// replica becomes the leader meanwhile, it serves the request itself.

import { request as httpRequest } from 'node:http';
import { Router } from 'express';
import { RELAY_HEADERS, checkRelayClaim } from '../auth/relay-credentials.js';
import { appError, AppError } from '../errors.js';
import { relayRoute } from '../policy/leadership.js';
import { bodyLimitBytes, mountRoute } from './validation.js';

export { RELAY_HEADERS };

// Where to send a relayed request, from the address the Lease names: { hostname, port } of an http://host:port
// address, or { problem } for anything else (a path, credentials, another scheme), which is never relayed to.
export function leaderOrigin(address) {
  let url;
  try { url = new URL(address); } catch { return { problem: `${JSON.stringify(address)} is not a URL` }; }
  if (url.protocol !== 'http:') return { problem: `${address} is not an http:// address` };
  if (url.username || url.password || (url.pathname !== '/' && url.pathname !== '') || url.search || url.hash) {
    return { problem: `${address} is not a bare http://host:port address` };
  }
  return { hostname: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80) };
}

// The requests a follower answers itself.
export function servedByAnyReplica(req) {
  if (req.method !== 'GET' && req.method !== 'HEAD') return false;
  return ['/livez', '/readyz', '/metrics', '/', '/openapi.json', '/v1/cluster', '/v1/leader'].includes(req.path);
}

// The relay's budget for a request: how long it may wait for a leader and for the leader's answer.
export function relayBudgetMs(req, deadlines) {
  if (req.path === '/v1/hooks/prestop') return deadlines.prestopSeconds * 1000;
  return Math.max(deadlines.actionSeconds, deadlines.prestopSeconds) * 1000;
}

export const LEADER_ROUTE = {
  method: 'get', path: '/v1/leader', operationId: 'getLeader', tag: 'reads',
  summary: 'Which manager replica leads, and this replica\'s view of the election',
  ok: [{ status: 200, description: 'the election as this replica sees it', schema: 'LeaderView' }], errors: [],
};

// leadership(): the current elector (src/events/leader-election.js). served(): whether this replica leads and has
// loaded its state, so that it can serve the request itself. view(): what GET /v1/leader answers (the manager adds
// the runner's parts to the elector's view).
// credentials: src/auth/relay-credentials.js (this replica's relay token, and the check of a peer's).
// Where an eviction review goes (src/routes/webhook-routes.js's relayReview): null to answer it here (no election,
// or this replica leads); otherwise send(leaderWebhook, review), the leader's answer (src/webhook-server.js,
// createReviewRelay). No leader now, or no CA to check the leader's certificate with (send null): NO_LEADER.
export function reviewRelayFor({ elector, served, send }) {
  return async (review) => {
    if (!elector().view().enabled) return null;
    const route = relayRoute({ leader: elector().leader(), served: served(), address: 'webhook' });
    if (route.to === 'here') return null;
    if (route.to === 'wait') throw appError('noLeader');
    if (!send) throw appError('noLeaderCa');
    return send(route.target, review);
  };
}

export function createLeaderRelay({
  leadership, view, served, deadlines, clock, logger, credentials, refreshFollowerView = async () => {}, connectTimeoutMs = 1000, shuttingDown = () => false,
}) {
  const log = logger.child({ module: 'leader-relay' });

  // The relay's headers as a proven peer replica sent them ({ relayedBy, deadlineMs }), or null. From anyone else they
  // are removed, so that nothing after this reads them; the token itself is removed from every request.
  async function acceptPeer(req) {
    const claim = await checkRelayClaim(req.headers, credentials.verify);
    delete req.headers[RELAY_HEADERS.credential];
    if (claim.peer || !claim.claimed) return claim.peer;
    log.info({ method: req.method, path: req.path, claimedBy: claim.claimedBy, reason: claim.reason }, 'relay headers from a caller that is not a manager replica ignored');
    delete req.headers[RELAY_HEADERS.relayedBy];
    delete req.headers[RELAY_HEADERS.deadlineMs];
    return null;
  }


  async function relay(req, res, next) {
    const peer = await acceptPeer(req);
    const elector = leadership();
    if (!elector.view().enabled) { next(); return; }
    if (servedByAnyReplica(req)) {
      if (req.path === '/v1/cluster' && !served()) await refreshFollowerView().catch(() => {});
      next();
      return;
    }
    if (peer) {
      if (!served()) { next(appError('relayedToFollower', { identity: elector.identity, relayedBy: peer.relayedBy })); return; }
      if (peer.deadlineMs !== null) req.relayDeadlineMs = peer.deadlineMs;
      next();
      return;
    }
    const expiresAt = clock.now() + relayBudgetMs(req, deadlines);
    let body = null;
    let lastProblem = 'no replica holds the Lease';
    while (clock.now() < expiresAt) {
      const leader = elector.leader();
      const route = relayRoute({ leader, served: served(), bodyRead: body !== null });
      if (route.to === 'here') { next(); return; }
      // A replica shutting down no longer follows the Lease: it cannot relay, and says so at once.
      if (shuttingDown()) { next(appError('relayedWhileShuttingDown', { identity: elector.identity, method: req.method, path: req.path })); return; }
      if (route.to === 'relay') {
        try {
          body ??= await readBody(req);
          const answer = await forward(route.target, req, body, expiresAt - clock.now());
          if (answer.notLeader) {
            lastProblem = `${leader.identity} answered that it does not lead`;
          } else {
            send(res, answer, leader.identity);
            return;
          }
        } catch (err) {
          if (err instanceof AppError) { next(err); return; }
          // Sent, but the answer was lost: the leader may have done it, so it is not sent again.
          if (!err.beforeSending) {
            next(appError('leaderAnswerLost', {
              leader: leader.identity, method: req.method, path: req.path, why: err.code ?? err.message,
            }));
            return;
          }
          lastProblem = `the leader ${leader.identity} at ${route.target} did not answer (${err.cause?.code ?? err.message})`;
          log.warn({ leader: leader.identity, target: route.target, err: lastProblem }, 'relay to the leader failed; waiting for a leader');
        }
      } else if (route.loading) {
        lastProblem = 'this replica has just become the leader and is loading its state';
      }
      await elector.changed(Math.min(250, Math.max(0, expiresAt - clock.now())));
    }
    next(appError('noLeaderInTime', {
      method: req.method, path: req.path, budgetMs: relayBudgetMs(req, deadlines), problem: lastProblem,
    }));
  }

  // Sends the request's path and query (origin form, checked by the app before anything else) to the leader's address
  // and nowhere else. Failures before sending (no token, an address that is not one) are AppErrors: not retried.
  async function forward(target, req, body, remainingMs) {
    const origin = leaderOrigin(target);
    if (origin.problem) throw appError('leaderAddressRefused', { problem: origin.problem });
    const token = await credentials.credential();
    if (!token) throw appError('noRelayToken', { method: req.method, path: req.path, problem: credentials.ownProblem() });
    const headers = {
      [RELAY_HEADERS.relayedBy]: leadership().identity, [RELAY_HEADERS.deadlineMs]: String(Math.max(0, Math.floor(remainingMs))), [RELAY_HEADERS.credential]: token,
    };
    for (const name of ['authorization', 'content-type', 'accept', 'x-request-id']) if (req.headers[name]) headers[name] = req.headers[name];
    if (body.length > 0) headers['content-length'] = String(body.length);
    // A connection of its own (no kept-alive one): a kept-alive connection the leader closes as idle just as this is
    // sent would look like a request taken and an answer lost.
    const answer = await requestReplica({
      hostname: origin.hostname, port: origin.port, path: req.originalUrl, method: req.method, headers, agent: false,
    }, body, { timeoutMs: remainingMs, connectTimeoutMs });
    // Not (or no longer) leading, or giving its Lease up: nothing was done there; wait for the next leader.
    if (answer.status === 503 && (answer.payload.includes('"NOT_LEADER"') || answer.payload.includes('"SHUTTING_DOWN"'))) return { notLeader: true };
    return answer;
  }

  function send(res, answer, leaderIdentity) {
    res.status(answer.status).set(RELAY_HEADERS.servedBy, leaderIdentity);
    if (answer.contentType) res.set('content-type', answer.contentType);
    if (answer.location) res.set('location', answer.location);
    res.end(answer.payload);
  }

  const router = Router();
  mountRoute(router, LEADER_ROUTE, (input, res) => {
    res.json(view());
  });

  return { relay, router };
}

// One HTTP request to another replica. A replica whose pod is gone may not even refuse the connection, so connecting
// has its own short limit; the whole answer has the caller's remaining budget.
function requestReplica(options, body, { timeoutMs, connectTimeoutMs }) {
  return new Promise((resolve, reject) => {
    const req = httpRequest(options, (res) => {
      const chunks = [];
      res.on('data', (chunk) => chunks.push(chunk));
      res.on('end', () => {
        clearTimeout(overall);
        resolve({
          status: res.statusCode, payload: Buffer.concat(chunks), contentType: res.headers['content-type'] ?? null, location: res.headers.location ?? null,
        });
      });
      res.on('error', reject);
    });
    const overall = setTimeout(() => req.destroy(new Error(`no answer within ${Math.round(timeoutMs)} ms`)), Math.max(1, timeoutMs));
    // Until the connection is up, nothing has reached the leader: such a failure may be retried.
    let connected = false;
    req.on('socket', (socket) => {
      if (!socket.connecting) { connected = true; return; }
      const connectTimer = setTimeout(() => req.destroy(new Error(`could not connect within ${connectTimeoutMs} ms`)), connectTimeoutMs);
      socket.once('connect', () => { connected = true; clearTimeout(connectTimer); });
      socket.once('close', () => clearTimeout(connectTimer));
    });
    req.on('error', (err) => { clearTimeout(overall); reject(Object.assign(err, { beforeSending: !connected })); });
    req.end(body.length > 0 ? body : undefined);
  });
}

// The raw body, within the API's body limit (the leader parses and checks it).
function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let size = 0;
    req.on('data', (chunk) => {
      size += chunk.length;
      if (size > bodyLimitBytes) { reject(appError('bodyTooLarge', { limitBytes: bodyLimitBytes })); req.destroy(); return; }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}
