// Authentication and authorization before any route runs, so a refused call changes nothing. Authentication
// comes before the body is even read (no token: 401, whatever the body); authorization needs the parsed body
// (the pod or node a request names), so it runs after parsing. The rules are in auth/access-policy.js.

import { AppError } from '../errors.js';
import { authorize, classifyRequest } from '../auth/access-policy.js';

// RFC 7235: the scheme is case-insensitive. The token: RFC 6750's b64token, bounded.
const BEARER = /^bearer ([A-Za-z0-9._~+/=-]{1,8192})$/i;

export function createAuthMiddleware({ authenticator, protectReads = false, realm = 'rethinkdb-manager' }) {
  const needsIdentity = (req) => !authorize({ kind: classifyRequest(req.method, req.path), identity: null, protectReads }).allow;

  async function authenticateRequest(req, res, next) {
    if (!needsIdentity(req)) {
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
    req.identity = verdict.identity;
    next();
  }

  function authorizeRequest(req, res, next) {
    if (!needsIdentity(req)) {
      next();
      return;
    }
    const decision = authorize({ kind: classifyRequest(req.method, req.path), identity: req.identity, target: targetOf(req), protectReads });
    if (!decision.allow) throw new AppError(decision.code, decision.message);
    next();
  }

  return { authenticateRequest, authorizeRequest };
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
