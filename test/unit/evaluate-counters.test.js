// The evaluation's counted writes (bench/evaluate/load-generator.js checkCounters): every update adds 1 to its
// record's counter; read back, the counters must hold every acknowledged increment and nothing beyond the
// acknowledged and the unknown ones.

import { checkCounters } from '../../bench/evaluate/load-generator.js';
import { formatCounters } from '../../bench/evaluate/report.js';

const ok = (key) => ({ key, ok: true });
const failed = (key) => ({ key, ok: false, errorType: 'ReqlOpFailedError' });
const indeterminate = (key) => ({ key, ok: false, errorType: 'ReqlOpIndeterminateError' });
const timedOut = (key) => ({ key, ok: false });

describe('counted writes', () => {
  test('when each acknowledged increment is there and nothing else, then the check holds', () => {
    const c = checkCounters([ok('a'), ok('a'), failed('a'), ok('b')], new Map([['a', 2], ['b', 1]]));
    expect(c).toMatchObject({
      ok: true, keys: 2, acked: 3, failed: 1, unknown: 0, missing: 0, beyond: 0,
    });
    expect(formatCounters(c)).toBe('ok, 0/0 unknown applied');
  });

  test('when a write answered OP_FAILED was applied (a retry of a committed write), then it is beyond', () => {
    expect(checkCounters([ok('a'), failed('a')], new Map([['a', 2]]))).toMatchObject({ ok: false, beyond: 1, missing: 0 });
  });

  test('when an acknowledged increment is missing, then it is counted missing', () => {
    const c = checkCounters([ok('a'), ok('a')], new Map([['a', 1]]));
    expect(c).toMatchObject({ ok: false, missing: 1 });
    expect(formatCounters(c)).toBe('1 acknowledged missing, 0 beyond, 0/0 unknown applied');
  });

  test('when writes were indeterminate or timed out, then each may or may not be there, and those there are counted', () => {
    const updates = [ok('a'), indeterminate('a'), timedOut('a'), indeterminate('b')];
    expect(checkCounters(updates, new Map([['a', 2], ['b', 0]]))).toMatchObject({
      ok: true, unknown: 3, unknownApplied: 1, missing: 0, beyond: 0,
    });
    expect(checkCounters(updates, new Map([['a', 4]]))).toMatchObject({ ok: false, beyond: 1 });
  });

  test('a counter never read (the record is gone) counts as 0', () => {
    expect(checkCounters([ok('gone')], new Map())).toMatchObject({ ok: false, missing: 1 });
    expect(formatCounters({ error: 'no open connection' })).toBe('not read (no open connection)');
    expect(formatCounters(null)).toBe('-');
  });
});
