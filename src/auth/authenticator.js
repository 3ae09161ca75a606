// Turns a bearer token into an identity: a TokenReview against the Kubernetes API (with a short verdict cache)
// or a constant-time comparison with a static token. Knows nothing of HTTP; see routes/auth-middleware.js.

import { createHash, timingSafeEqual } from 'node:crypto';
import { appError } from '../errors.js';
import { identityFromReview, rolesOf } from './access-policy.js';

const MAX_CACHED_VERDICTS = 1000;
// More distinct tokens than this under review at once is a flood; the surplus gets 503 at once.
const MAX_REVIEWS_IN_FLIGHT = 32;
// A service-account token is a JWT: three base64url segments. Anything else is refused without asking.
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const STATIC_TOKEN_SHAPE = /^[A-Za-z0-9._~+/=-]{32,8192}$/;

// auth: the config's auth section. kube: the adapter (tokenreview mode). staticToken: the token (static mode).
export function createAuthenticator({ auth, kube = null, staticToken = null, clock, logger }) {
  const log = logger.child({ module: 'auth' });
  if (auth.mode === 'static' && !(typeof staticToken === 'string' && STATIC_TOKEN_SHAPE.test(staticToken))) {
    throw new TypeError('AUTH_MODE=static needs a token of at least 32 characters in AUTH_STATIC_TOKEN_FILE, of letters, digits and ._~+/=- only (e.g. openssl rand -hex 32)');
  }
  if (auth.mode === 'tokenreview' && !kube?.reviewToken) throw new TypeError('AUTH_MODE=tokenreview needs a Kubernetes API');
  const cache = new Map();
  const inFlight = new Map();
  const staticDigest = staticToken ? digest(staticToken) : null;

  // { identity } or { error } (the token is not good: a 401). Throws KUBERNETES_UNAVAILABLE if it cannot tell.
  async function authenticate(token) {
    if (auth.mode === 'none') return { identity: { username: 'anonymous', groups: [], pod: null, roles: { hook: true, operator: true }, via: 'none' } };
    if (auth.mode === 'static') return checkStatic(token);
    return review(token);
  }

  function checkStatic(token) {
    // Both sides hashed first, so the comparison is constant-time whatever the token's length.
    if (!timingSafeEqual(digest(token), staticDigest)) return { error: 'the bearer token does not match the static token' };
    return { identity: { username: 'static-token', groups: [], pod: null, roles: { hook: true, operator: true }, via: 'static' } };
  }

  async function review(token) {
    if (!JWT_SHAPE.test(token)) return { error: 'the token was not accepted: it is not a service-account token (a JWT)' };
    const key = digest(token).toString('hex');
    const cached = cache.get(key);
    if (cached && cached.expiresAtMs > clock.now()) return cached.verdict;
    cache.delete(key);
    // The same token arriving again while its review runs waits for that review.
    if (inFlight.has(key)) return inFlight.get(key);
    if (inFlight.size >= MAX_REVIEWS_IN_FLIGHT) {
      throw appError('tokenReviewsBusy', { max: MAX_REVIEWS_IN_FLIGHT });
    }
    const pending = askApiServer(token, key).finally(() => inFlight.delete(key));
    inFlight.set(key, pending);
    return pending;
  }

  async function askApiServer(token, key) {
    let result;
    try {
      result = await kube.reviewToken(token, [auth.audience]);
    } catch (err) {
      // The details (RBAC, API server errors) go to the log, not to a caller who may hold no valid token.
      log.warn({ err: err.message }, 'token review failed');
      throw appError('tokenReviewFailed', {}, { cause: err });
    }
    const found = identityFromReview(result, auth);
    const verdict = found.error ? { error: found.error } : { identity: { ...found, roles: rolesOf(found, auth), via: 'tokenreview' } };
    remember(key, verdict);
    return verdict;
  }

  function remember(key, verdict) {
    if (auth.cacheSeconds <= 0) return;
    cache.set(key, { verdict, expiresAtMs: clock.now() + auth.cacheSeconds * 1000 });
    if (cache.size > MAX_CACHED_VERDICTS) cache.delete(cache.keys().next().value);
  }

  return { mode: auth.mode, authenticate };
}

function digest(value) {
  return createHash('sha256').update(String(value)).digest();
}
