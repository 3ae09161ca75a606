// The gate's hold book (gate/src/holds.js), on a clock that moves by 1 ms at every read: what a hold reports is
// what was asked, however many times the book reads the clock.

import { createHolds } from '../../gate/src/holds.js';

function ticking() {
  let t = 1000;
  return { now: () => { t += 1; return t; } };
}

function book(clock) {
  const set = [];
  const timers = { setTimeout: (fn, ms) => { set.push({ fn, ms }); return { unref() {} }; }, clearTimeout: () => {} };
  return { holds: createHolds({ maxMs: 5000, clock, timers }), set };
}

describe('createHolds', () => {
  test('when a hold is added, then its ttlMs is the one asked, and its timer is set for exactly that', () => {
    const { holds, set } = book(ticking());
    const held = holds.add({ tables: ['ycsb.usertable'], ttlMs: 2000 });
    expect(held.ttlMs).toBe(2000);
    expect(set.map((s) => s.ms)).toEqual([2000]);
    expect(held.remainingMs).toBeLessThanOrEqual(2000);
  });

  test('when a hold expires, then it is reported expired with the ttl asked', () => {
    const ended = [];
    const clock = ticking();
    const timers = { setTimeout: (fn) => { timers.fire = fn; return {}; }, clearTimeout: () => {} };
    const holds = createHolds({ maxMs: 5000, clock, timers, onChange: (e) => ended.push(e) });
    holds.add({ tables: ['ycsb.usertable'], ttlMs: 300 });
    timers.fire();
    expect(ended).toEqual([expect.objectContaining({ how: 'expired', ttlMs: 300, tables: ['ycsb.usertable'] })]);
  });
});
