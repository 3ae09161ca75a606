// How manager replicas prove to each other that a relayed request comes from one of them. A follower that relays a
// request (or an eviction review) to the leader sends its own projected service-account token, made for the relay's
// audience (RELAY_AUDIENCE), in a header of its own. The receiver believes the relay's headers (who relayed it, the
// caller's remaining deadline) only if a TokenReview accepts that token for the audience and names the same user as
// the receiver's own token: the manager's ServiceAccount. Anyone else's relay headers are dropped. Knows nothing of
// HTTP; see routes/leader-relay.js and routes/webhook-routes.js.

import { createHash } from 'node:crypto';
import { readFile as readFileAsync, stat as statAsync } from 'node:fs/promises';

// The relay's headers (src/routes/leader-relay.js, the webhook's review relay).
export const RELAY_HEADERS = Object.freeze({
  // Set on a relayed request: the replica that relayed it. A replica never relays a relayed request again.
  relayedBy: 'x-rethinkdb-manager-relayed-by',
  // The milliseconds left of the caller's budget when relayed: the leader's preStop answers within them.
  deadlineMs: 'x-rethinkdb-manager-deadline-ms',
  // On the answer: the replica that served it.
  servedBy: 'x-rethinkdb-manager-served-by',
  // The relaying replica's own token for the relay's audience: proof that it is a manager replica.
  credential: 'x-rethinkdb-manager-relay-token',
});

// The relay's claim in a request's headers, checked with verify (credentials.verify): { claimed: false } when it
// makes none; { claimed: true, peer: { relayedBy, deadlineMs } } from a proven replica; { claimed: true, peer: null,
// reason, claimedBy } from anyone else, whose relay headers are then not to be believed.
export async function checkRelayClaim(headers, verify) {
  const by = headers[RELAY_HEADERS.relayedBy];
  const deadline = headers[RELAY_HEADERS.deadlineMs];
  const token = headers[RELAY_HEADERS.credential];
  if (by === undefined && deadline === undefined) return { claimed: false, peer: null };
  const verdict = token === undefined ? { ok: false, reason: 'no relay token' } : await verify(token);
  if (!verdict.ok) return { claimed: true, peer: null, reason: verdict.reason, claimedBy: String(by ?? '').slice(0, 100) };
  const left = Number(deadline);
  return { claimed: true, peer: { relayedBy: String(by ?? verdict.username), deadlineMs: Number.isFinite(left) && left > 0 ? left : null } };
}

// A verdict on a peer's token is kept this long (a relayed PRESTOP should not wait for a TokenReview each time).
const VERDICT_CACHE_MS = 60_000;
const MAX_CACHED_VERDICTS = 64;
// The kubelet rewrites a projected token well before it expires; the file is read again at most this often.
const TOKEN_REREAD_MS = 10_000;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
// Peers are one or two replicas: more reviews than this at once are a flood, not believed without asking.
const MAX_REVIEWS_IN_FLIGHT = 8;

// tokenFile: where this replica's own token is (RELAY_TOKEN_FILE). kube: the adapter (reviewToken), null without a
// Kubernetes API, when there is no relay at all. files: { read, mtimeMs } (tests pass their own).
export function createRelayCredentials({
  kube, tokenFile, audience, clock, logger, files = { read: (path) => readFileAsync(path, 'utf8'), mtimeMs: async (path) => (await statAsync(path)).mtimeMs },
}) {
  const log = logger.child({ module: 'relay-credentials' });
  const verdicts = new Map();
  let own = { token: null, readAtMs: -Infinity, mtimeMs: null, problem: 'not read yet' };
  let ownUser = null;
  let inFlight = 0;

  // This replica's token, or null (with ownProblem() saying why) when it cannot be read.
  async function credential() {
    if (clock.now() - own.readAtMs < TOKEN_REREAD_MS) return own.token;
    try {
      const mtimeMs = await files.mtimeMs(tokenFile);
      const token = mtimeMs === own.mtimeMs && own.token ? own.token : (await files.read(tokenFile)).trim();
      if (!JWT_SHAPE.test(token)) throw new Error('it does not hold a service-account token (a JWT)');
      if (token !== own.token) ownUser = null;
      own = { token, readAtMs: clock.now(), mtimeMs, problem: null };
    } catch (err) {
      if (own.problem === null || own.problem === 'not read yet') log.warn({ tokenFile, err: err.message }, 'relay token not readable: this replica can neither relay nor check relays');
      own = { token: null, readAtMs: clock.now(), mtimeMs: null, problem: `the relay token ${tokenFile} cannot be read (${err.message})` };
    }
    return own.token;
  }

  // The user this replica's own token reviews as: the identity a peer must share.
  async function ownIdentity() {
    const token = await credential();
    if (!token) throw new Error(own.problem);
    if (ownUser) return ownUser;
    const review = await kube.reviewToken(token, [audience]);
    if (!review.authenticated || !review.username) throw new Error(`this replica's own relay token was not accepted (${review.error ?? 'not authenticated'})`);
    ownUser = review.username;
    return ownUser;
  }

  // { ok: true, username } when `token` is a peer replica's; { ok: false, reason } otherwise (never throws).
  async function verify(token) {
    if (!kube?.reviewToken) return { ok: false, reason: 'no Kubernetes API to check the relay token with' };
    if (typeof token !== 'string' || !JWT_SHAPE.test(token)) return { ok: false, reason: 'the relay token is not a service-account token' };
    const key = createHash('sha256').update(token).digest('hex');
    const cached = verdicts.get(key);
    if (cached && cached.expiresAtMs > clock.now()) return cached.verdict;
    if (inFlight >= MAX_REVIEWS_IN_FLIGHT) return { ok: false, reason: `${MAX_REVIEWS_IN_FLIGHT} relay tokens are being checked already` };
    inFlight += 1;
    let verdict;
    try {
      const [mine, review] = await Promise.all([ownIdentity(), kube.reviewToken(token, [audience])]);
      if (!review.authenticated) verdict = { ok: false, reason: `the relay token was not accepted (${review.error ?? 'not authenticated'})` };
      else if (!(review.audiences ?? []).includes(audience)) verdict = { ok: false, reason: `the relay token is not for audience ${audience}` };
      else if (review.username !== mine) verdict = { ok: false, reason: `the relay token is ${review.username}'s, not the manager's (${mine})` };
      else verdict = { ok: true, username: review.username };
    } catch (err) {
      // Not cached: the API server may answer next time.
      return { ok: false, reason: `the relay token could not be checked (${err.message})` };
    } finally {
      inFlight -= 1;
    }
    verdicts.set(key, { verdict, expiresAtMs: clock.now() + VERDICT_CACHE_MS });
    if (verdicts.size > MAX_CACHED_VERDICTS) verdicts.delete(verdicts.keys().next().value);
    return verdict;
  }

  return { credential, verify, ownProblem: () => own.problem };
}
