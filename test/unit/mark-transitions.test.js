// The marks on a server and how events change them: pure transitions, table-driven.

import {
  NO_MARKS, awaitHealth, endWarning, handedBack, keepsOff, noteDemoted, oweHandBack, release, restored, startDraining, warn,
} from '../../src/state/mark-transitions.js';

const drain = { reason: 'pod stopping', since: '2026-11-21T12:00:00.000Z', origin: { kind: 'prestop', by: 'hook:prestop:rethinkdb-1' } };
const warning = { source: 'operator', long: false };
const restore = { warning, reason: 'perf warning expired', actor: 'manager:expiry' };
const change = (tableId, shard) => ({ tableId, shard, from: 'rethinkdb_1', to: 'rethinkdb_2' });

describe('mark transitions', () => {
  test.each([
    ['no marks', false, NO_MARKS],
    ['draining', true, { ...NO_MARKS, draining: drain }],
    ['under a perf warning', true, { ...NO_MARKS, perfwarning: warning }],
    ['waiting to get its primaries back only', false, { ...NO_MARKS, restore }],
    ['migrating only', false, { ...NO_MARKS, migration: { action: 'add-server' } }],
  ])('when a server is %s, then keepsOff is %s (no primary, no new replica)', (_, off, marks) => {
    expect(keepsOff(marks)).toBe(off);
  });

  test('when a server already draining is drained again, then the first reason, time and origin stay', () => {
    const once = startDraining(NO_MARKS, drain);
    expect(startDraining(once, { ...drain, reason: 'operator', origin: { kind: 'operator', by: 'alice' } })).toBe(once);
    expect(release(once)).toEqual(NO_MARKS);
    expect(release(NO_MARKS)).toBe(NO_MARKS);
  });

  test('when a warning is raised while a restore waits, then the restore is cancelled', () => {
    expect(warn({ ...NO_MARKS, restore }, warning)).toEqual({ ...NO_MARKS, perfwarning: warning });
  });

  test('when a warning ends and the server is not healthy, then a restore waits; once done, nothing is left', () => {
    const ended = awaitHealth(endWarning({ ...NO_MARKS, perfwarning: warning }), restore);
    expect(ended).toEqual({ ...NO_MARKS, restore });
    expect(restored(ended)).toEqual(NO_MARKS);
  });

  test('when demotions are noted, then each shard is kept once, with the mark that caused it', () => {
    const draining = startDraining(NO_MARKS, drain);
    const first = noteDemoted(draining, 'draining', [change('t', 0), change('t', 1)]);
    const again = noteDemoted(first, 'draining', [change('t', 1), change('u', 0)]);
    expect(again.draining.demoted).toEqual([{ tableId: 't', shard: 0 }, { tableId: 't', shard: 1 }, { tableId: 'u', shard: 0 }]);
    expect(noteDemoted(again, 'draining', [change('t', 0)])).toBe(again);
    expect(noteDemoted(NO_MARKS, 'perfwarning', [change('t', 0)])).toBe(NO_MARKS);
  });

  test('when a server comes back twice in one rollout, then it is owed each shard once, from its first debt; once levelled, nothing is owed', () => {
    const first = oweHandBack(NO_MARKS, { demoted: [{ tableId: 't', shard: 0 }], reason: 'rollout', since: '2026-11-26T00:00:01Z' });
    expect(first.handBack).toEqual({ demoted: [{ tableId: 't', shard: 0 }], reason: 'rollout', since: '2026-11-26T00:00:01Z' });
    const second = oweHandBack(first, { demoted: [{ tableId: 't', shard: 0 }, { tableId: 't', shard: 2 }], reason: 'again', since: '2026-11-26T00:00:09Z' });
    expect(second.handBack).toEqual({ demoted: [{ tableId: 't', shard: 0 }, { tableId: 't', shard: 2 }], reason: 'rollout', since: '2026-11-26T00:00:01Z' });
    expect(oweHandBack(second, { demoted: [{ tableId: 't', shard: 2 }] })).toBe(second);
    expect(keepsOff(second)).toBe(false);
    expect(handedBack(second)).toEqual(NO_MARKS);
    expect(handedBack(NO_MARKS)).toBe(NO_MARKS);
  });
});
