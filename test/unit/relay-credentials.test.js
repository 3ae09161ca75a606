// The proof manager replicas relay with (src/auth/relay-credentials.js): a peer's token is believed only when the API
// server accepts it for the relay's audience and names the same user as this replica's own token.

import { createRelayCredentials } from '../../src/auth/relay-credentials.js';
import { createVirtualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';

const logger = createLogger({ level: 'silent' });
const AUDIENCE = 'rethinkdb-manager-relay';
const MANAGER = 'system:serviceaccount:rethinkdb:rethinkdb-manager';
const OWN = 'own.relay.token';

// The API server's TokenReview as the adapter returns it, from a table of tokens; counts the reviews.
function kubeWith(tokens) {
  const reviews = [];
  return {
    reviews,
    reviewToken: async (token, audiences) => {
      reviews.push(token);
      const known = tokens[token];
      if (!known) return { authenticated: false, username: null, audiences: [], error: 'invalid bearer token' };
      if (known === 'down') throw new Error('connect ECONNREFUSED');
      const ok = audiences.every((a) => known.audiences.includes(a));
      return ok ? { authenticated: true, username: known.username, audiences, error: null } : { authenticated: false, username: null, audiences: [], error: 'token audiences is invalid for the target audiences' };
    },
  };
}

function credentialsWith(kube, { file = OWN, clock = createVirtualClock() } = {}) {
  let content = file;
  let mtimeMs = 1;
  const files = {
    read: async () => { if (content === null) throw new Error('ENOENT: no such file'); return `${content}\n`; },
    mtimeMs: async () => { if (content === null) throw new Error('ENOENT: no such file'); return mtimeMs; },
  };
  const credentials = createRelayCredentials({ kube, tokenFile: '/run/relay/token', audience: AUDIENCE, clock, logger, files });
  return { credentials, clock, rewrite: (next) => { content = next; mtimeMs += 1; } };
}

const TOKENS = {
  [OWN]: { username: MANAGER, audiences: [AUDIENCE] },
  'peer.relay.token': { username: MANAGER, audiences: [AUDIENCE] },
  'hook.pod.token': { username: 'system:serviceaccount:rethinkdb:rethinkdb', audiences: [AUDIENCE] },
  'api.server.token': { username: MANAGER, audiences: ['https://kubernetes.default.svc'] },
  'flaky.api.token': 'down',
};

describe('relay credentials', () => {
  test.each([
    ['a peer replica\'s token', 'peer.relay.token', { ok: true, username: MANAGER }],
    ['another service account\'s token', 'hook.pod.token', { ok: false }],
    ['the manager\'s token for another audience', 'api.server.token', { ok: false }],
    ['a token the API server does not know', 'made.up.token', { ok: false }],
    ['something that is not a JWT', 'not-a-jwt', { ok: false }],
  ])('when the token is %s, then the verdict follows', async (name, token, expected) => {
    const { credentials } = credentialsWith(kubeWith(TOKENS));
    expect(await credentials.verify(token)).toMatchObject(expected);
  });

  test('when a verdict was given, then the same token is not reviewed again within a minute, and is after it', async () => {
    const kube = kubeWith(TOKENS);
    const { credentials, clock } = credentialsWith(kube);
    await credentials.verify('peer.relay.token');
    const reviewed = kube.reviews.length;
    await credentials.verify('peer.relay.token');
    expect(kube.reviews.length).toBe(reviewed);
    clock.advance(61_000);
    await credentials.verify('peer.relay.token');
    expect(kube.reviews.length).toBeGreaterThan(reviewed);
  });

  test('when the API server cannot be asked, then the token is not believed, and it is asked again next time', async () => {
    const kube = kubeWith(TOKENS);
    const { credentials } = credentialsWith(kube);
    expect(await credentials.verify('flaky.api.token')).toMatchObject({ ok: false, reason: expect.stringContaining('could not be checked') });
    const before = kube.reviews.filter((t) => t === 'flaky.api.token').length;
    await credentials.verify('flaky.api.token');
    expect(kube.reviews.filter((t) => t === 'flaky.api.token').length).toBe(before + 1);
  });

  test('when the replica\'s own token file is missing, then it has no credential, says why, and believes no peer', async () => {
    const { credentials } = credentialsWith(kubeWith(TOKENS), { file: null });
    expect(await credentials.credential()).toBeNull();
    expect(credentials.ownProblem()).toContain('/run/relay/token cannot be read');
    expect(await credentials.verify('peer.relay.token')).toMatchObject({ ok: false });
  });

  test('when the kubelet rewrites the token, then the new one is sent after the re-read interval', async () => {
    const { credentials, clock, rewrite } = credentialsWith(kubeWith(TOKENS));
    expect(await credentials.credential()).toBe(OWN);
    rewrite('renewed.relay.token');
    expect(await credentials.credential()).toBe(OWN);
    clock.advance(10_000);
    expect(await credentials.credential()).toBe('renewed.relay.token');
  });

  test('without a Kubernetes API, then no peer is believed', async () => {
    const { credentials } = credentialsWith(null);
    expect(await credentials.verify('peer.relay.token')).toMatchObject({ ok: false, reason: expect.stringContaining('no Kubernetes API') });
  });
});
