// The evaluation's key chooser: YCSB's scrambled zipfian, seeded, with every key in range.

import fc from 'fast-check';
import {
  createKeyChooser, createScrambledZipfian, createSeededRandom, createZipfian, fnvHash64, keyName, zeta,
  YCSB_ITEM_SPACE, YCSB_ZETAN_099,
} from '../../bench/evaluate/zipf.js';

function countDraws(next, draws) {
  const counts = new Map();
  for (let i = 0; i < draws; i += 1) {
    const value = next();
    counts.set(value, (counts.get(value) ?? 0) + 1);
  }
  return counts;
}

function shareOfTop(counts, topCount, draws) {
  const sorted = [...counts.values()].sort((a, b) => b - a);
  return sorted.slice(0, topCount).reduce((sum, n) => sum + n, 0) / draws;
}

describe('createSeededRandom', () => {
  test('when seeded alike, then it repeats the same sequence in [0, 1)', () => {
    const a = createSeededRandom(7);
    const b = createSeededRandom(7);
    const values = Array.from({ length: 1000 }, () => a());
    expect(Array.from({ length: 1000 }, () => b())).toEqual(values);
    expect(values.every((v) => v >= 0 && v < 1)).toBe(true);
  });

  test('when seeded differently, then the sequences differ', () => {
    const a = createSeededRandom(1);
    const b = createSeededRandom(2);
    expect(Array.from({ length: 5 }, () => a())).not.toEqual(Array.from({ length: 5 }, () => b()));
  });

  test('when drawn many times, then the mean is near 1/2', () => {
    const random = createSeededRandom(3);
    let sum = 0;
    for (let i = 0; i < 100_000; i += 1) sum += random();
    expect(sum / 100_000).toBeCloseTo(0.5, 2);
  });
});

describe('fnvHash64', () => {
  // Values computed with Java long semantics (signed 64-bit wrap, arithmetic shift, Math.abs), as YCSB does.
  test.each([
    [0, 6284781860667377211n],
    [1, 8517097267634966620n],
    [-1, 8289690350564177859n],
  ])('when hashing %d, then it matches YCSB\'s Utils.fnvhash64', (value, expected) => {
    expect(fnvHash64(value)).toBe(expected);
  });
});

describe('zeta', () => {
  test('when n is small, then it is the exact sum', () => {
    expect(zeta(2, 0.99)).toBeCloseTo(1 + 2 ** -0.99, 12);
    let sum = 0;
    for (let i = 1; i <= 50_000; i += 1) sum += i ** -0.99;
    expect(zeta(50_000, 0.99)).toBeCloseTo(sum, 9);
  });

  test('when n is YCSB\'s 10^10 items, then it reproduces YCSB\'s precomputed constant', () => {
    expect(zeta(YCSB_ITEM_SPACE, 0.99)).toBeCloseTo(YCSB_ZETAN_099, 8);
  });
});

describe('createZipfian', () => {
  test('when drawing over N items, then rank 0 gets 1/zeta(N) of the draws and rank 1 the next most', () => {
    const itemCount = 1000;
    const draws = 200_000;
    const counts = countDraws(createZipfian({ itemCount, random: createSeededRandom(11) }), draws);
    expect(counts.get(0) / draws).toBeCloseTo(1 / zeta(itemCount, 0.99), 2);
    expect(counts.get(1)).toBeLessThan(counts.get(0));
    expect(counts.get(1)).toBeGreaterThan(counts.get(10));
  });

  test('when theta is out of (0, 1), then it refuses', () => {
    expect(() => createZipfian({ itemCount: 10, theta: 1.2, random: Math.random })).toThrow(/theta/);
  });
});

describe('createScrambledZipfian', () => {
  test('when drawing, then every key number is an integer within [0, keyCount)', () => {
    fc.assert(fc.property(fc.integer({ min: 1, max: 100_000 }), fc.integer(), (keyCount, seed) => {
      const next = createScrambledZipfian({ keyCount, random: createSeededRandom(seed) });
      for (let i = 0; i < 200; i += 1) {
        const k = next();
        if (!Number.isInteger(k) || k < 0 || k >= keyCount) return false;
      }
      return true;
    }));
  });

  test('when drawing 10,000 keys, then the top 1% of keys get over 15% of requests (uniform: 1%)', () => {
    const draws = 200_000;
    const counts = countDraws(createScrambledZipfian({ keyCount: 10_000, random: createSeededRandom(5) }), draws);
    expect(shareOfTop(counts, 100, draws)).toBeGreaterThan(0.15);
  });

  test('when drawing 1,000 keys, then the hottest key gets about 1/zeta(10^10) and sits where YCSB puts it', () => {
    const draws = 200_000;
    const counts = countDraws(createScrambledZipfian({ keyCount: 1000, random: createSeededRandom(9) }), draws);
    const [hottest, hits] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
    expect(hottest).toBe(Number(fnvHash64(0) % 1000n));
    expect(hits / draws).toBeGreaterThan(1 / YCSB_ZETAN_099);
    expect(hits / draws).toBeLessThan(1 / YCSB_ZETAN_099 + 0.01);
  });

  test('when the hottest keys are listed, then they are spread over the key range rather than clustered', () => {
    const draws = 100_000;
    const counts = countDraws(createScrambledZipfian({ keyCount: 10_000, random: createSeededRandom(4) }), draws);
    const hot = [...counts.entries()].sort((a, b) => b[1] - a[1]).slice(0, 20).map(([k]) => k);
    const quarters = new Set(hot.map((k) => Math.floor(k / 2500)));
    expect(quarters.size).toBe(4);
  });
});

describe('createKeyChooser', () => {
  test('when seeded alike, then it chooses the same keys, named like YCSB', () => {
    const a = createKeyChooser({ keyCount: 500, seed: 42 });
    const b = createKeyChooser({ keyCount: 500, seed: 42 });
    const keys = Array.from({ length: 1000 }, () => a.next());
    expect(Array.from({ length: 1000 }, () => b.next())).toEqual(keys);
    expect(keys.every((k) => /^user(\d|[1-9]\d{1,2})$/.test(k) && Number(k.slice(4)) < 500)).toBe(true);
    expect(keyName(7)).toBe('user7');
  });
});
