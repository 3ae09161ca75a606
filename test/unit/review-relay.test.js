// Where a follower's eviction review goes (src/routes/leader-relay.js, reviewRelayFor): answered here, sent to the
// leader's webhook, or refused with NO_LEADER.

import { reviewRelayFor } from '../../src/routes/leader-relay.js';

const review = { request: { uid: 'u1' } };
// An elector as the relay reads it: election on or off, and the leader the Lease names.
const electorOf = ({ enabled = true, leader = null } = {}) => () => ({ view: () => ({ enabled }), leader: () => leader });

describe('reviewRelayFor', () => {
  test.each([
    ['no election (one replica)', { enabled: false }, true],
    ['this replica leads and serves', { leader: { self: true, webhook: 'https://a:8443' } }, true],
  ])('when %s, then the review is answered here', async (_, election, served) => {
    const sent = [];
    const relay = reviewRelayFor({ elector: electorOf(election), served: () => served, send: async (...args) => { sent.push(args); return {}; } });
    expect(await relay(review)).toBeNull();
    expect(sent).toEqual([]);
  });

  test('when another replica leads, then the review goes to its webhook and its answer comes back', async () => {
    const sent = [];
    const relay = reviewRelayFor({
      elector: electorOf({ leader: { webhook: 'https://198.18.0.5:8443' } }), served: () => false, send: async (target, r) => { sent.push([target, r]); return { allowed: true }; },
    });
    expect(await relay(review)).toEqual({ allowed: true });
    expect(sent).toEqual([['https://198.18.0.5:8443', review]]);
  });

  test('when no replica leads, or there is no CA to check the leader with, then NO_LEADER', async () => {
    const none = reviewRelayFor({ elector: electorOf({ leader: null }), served: () => false, send: async () => ({}) });
    await expect(none(review)).rejects.toMatchObject({ code: 'NO_LEADER', message: 'no manager replica leads now' });
    const noCa = reviewRelayFor({ elector: electorOf({ leader: { webhook: 'https://198.18.0.5:8443' } }), served: () => false, send: null });
    await expect(noCa(review)).rejects.toMatchObject({ code: 'NO_LEADER', message: expect.stringContaining('no CA to check') });
  });
});
