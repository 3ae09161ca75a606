// Authenticates and authorizes every request before any route runs, so a refused call changes nothing.
// The rules are in auth/access-policy.js; this only reads the request and turns verdicts into 401/403.

import { AppError } from '../errors.js';
import { authorize, classifyRequest } from '../auth/access-policy.js';

const BEARER = /^Bearer ([A-Za-z0-9._~+/=-]{1,8192})$/;

export function createAuthMiddleware({ authenticator, protectReads = false, realm = 'rethinkdb-manager' }) {
  return async function authenticateRequest(req, res, next) {
    const kind = classifyRequest(req.method, req.path);
    if (authorize({ kind, identity: null, protectReads }).allow) {
      next();
      return;
    }
    const token = bearerToken(req.headers.authorization, authenticator.mode);
    if (token.error) {
      res.set('WWW-Authenticate', `Bearer realm="${realm}"`);
      throw new AppError('UNAUTHENTICATED', token.error);
    }
    const verdict = await authenticator.authenticate(token.value);
    if (verdict.error) {
      res.set('WWW-Authenticate', `Bearer realm="${realm}", error="invalid_token"`);
      throw new AppError('UNAUTHENTICATED', verdict.error);
    }
    const target = targetOf(req);
    const decision = authorize({ kind, identity: verdict.identity, target, protectReads });
    if (!decision.allow) throw new AppError(decision.code, decision.message);
    req.identity = verdict.identity;
    next();
  };
}

// Every pod and node the request names, wherever it names them: a pod's token passes only if all name itself.
function targetOf(req) {
  const pods = [req.query?.pod, req.body?.pod].filter((p) => p !== undefined);
  const nodes = [req.query?.node, req.body?.node].filter((n) => n !== undefined);
  const pod = new Set(pods.map((p) => JSON.stringify(p))).size > 1 ? pods : pods[0];
  return { pod, node: nodes[0] };
}

function bearerToken(header, mode) {
  if (mode === 'none') return { value: '' };
  if (header === undefined) return { error: 'a bearer token is required (Authorization: Bearer <token>)' };
  const match = BEARER.exec(header);
  return match ? { value: match[1] } : { error: 'the Authorization header must be "Bearer <token>"' };
}
