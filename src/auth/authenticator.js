// Turns a bearer token into an identity: a TokenReview against the Kubernetes API (with a short verdict cache)
// or a constant-time comparison with a static token. Knows nothing of HTTP; see routes/auth-middleware.js.

import { createHash, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';
import { identityFromReview, rolesOf } from './access-policy.js';

const MAX_CACHED_VERDICTS = 1000;

// auth: the config's auth section. kube: the adapter (tokenreview mode). staticToken: the token (static mode).
export function createAuthenticator({ auth, kube = null, staticToken = null, clock, logger }) {
  const log = logger.child({ module: 'auth' });
  if (auth.mode === 'static' && (typeof staticToken !== 'string' || staticToken.length < 32)) {
    throw new TypeError('AUTH_MODE=static needs a token of at least 32 characters in AUTH_STATIC_TOKEN_FILE');
  }
  if (auth.mode === 'tokenreview' && !kube?.reviewToken) throw new TypeError('AUTH_MODE=tokenreview needs a Kubernetes API');
  const cache = new Map();
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
    const key = digest(token).toString('hex');
    const cached = cache.get(key);
    if (cached && cached.expiresAtMs > clock.now()) return cached.verdict;
    cache.delete(key);
    let result;
    try {
      result = await kube.reviewToken(token, [auth.audience]);
    } catch (err) {
      log.warn({ err: err.message }, 'token review failed');
      throw new AppError('KUBERNETES_UNAVAILABLE', `cannot verify the bearer token: the TokenReview failed (${err.message})`, { cause: err });
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

  return { mode: auth.mode, authenticate, cachedVerdicts: () => cache.size };
}

function digest(value) {
  return createHash('sha256').update(String(value)).digest();
}
