import { parseOptionalQuantity, parseQuantity } from '../../src/kubernetes/quantity.js';
import { loadKubeFixture } from '../helpers/fixtures.js';

describe('parseQuantity', () => {
  test.each([
    ['212437118n', 0.212437118], ['198u', 0.000198], ['240m', 0.24], ['500m', 0.5], ['1', 1], ['1.5', 1.5], ['.5', 0.5],
    ['2k', 2000], ['3M', 3e6], ['1G', 1e9], ['1T', 1e12], ['1P', 1e15], ['1E', 1e18],
    ['412344Ki', 412344 * 1024], ['398Mi', 398 * 2 ** 20], ['1Gi', 2 ** 30], ['2Ti', 2 * 2 ** 40], ['1Pi', 2 ** 50], ['1Ei', 2 ** 60],
    ['1e3', 1000], ['12E-3', 0.012], ['+2', 2],
  ])('when the quantity is %s, then it is %d base units', (text, expected) => {
    expect(parseQuantity(text)).toBeCloseTo(expected, 12);
  });

  test.each(['', 'abc', '1 Gi', '1KiB', '1mi', 'm', null, {}])('when the quantity is %j, then it is refused', (text) => {
    expect(() => parseQuantity(text)).toThrow(/not a Kubernetes quantity/);
  });

  test('when reading the recorded metrics example, then every unit in it parses', () => {
    const items = loadKubeFixture('pod-metrics-list.example.json').body.items;
    for (const item of items) for (const c of item.containers) {
      expect(parseQuantity(c.usage.cpu)).toBeGreaterThan(0);
      expect(parseQuantity(c.usage.memory)).toBeGreaterThan(0);
    }
  });

  test('when a quantity is absent, then it is null rather than zero', () => {
    expect(parseOptionalQuantity(undefined)).toBeNull();
    expect(parseOptionalQuantity('250m')).toBe(0.25);
  });
});
