// Pure, seeded key choosers that draw YCSB's zipfian request distribution, so evaluation runs are repeatable.

// YCSB's ScrambledZipfianGenerator draws ranks from a zipfian over 10^10 items (with this precomputed zeta for
// theta 0.99) and folds them onto the key range with FNV-1a, so the hottest keys land on different shards.
export const YCSB_ITEM_SPACE = 10_000_000_000;
export const YCSB_ZETAN_099 = 26.46902820178302;
export const DEFAULT_THETA = 0.99;

const FNV_OFFSET_BASIS_64 = 0xcbf29ce484222325n;
const FNV_PRIME_64 = 1099511628211n;

// mulberry32: a tiny 32-bit PRNG, good enough for workload generation and identical on every machine.
export function createSeededRandom(seed) {
  let state = (Number(seed) >>> 0) || 0x9e3779b9;
  return function random() {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// YCSB's Utils.fnvhash64: FNV-1a over the 8 little-endian bytes of a Java long, then Math.abs.
export function fnvHash64(value) {
  let rest = BigInt.asIntN(64, BigInt(value));
  let hash = FNV_OFFSET_BASIS_64;
  for (let i = 0; i < 8; i += 1) {
    hash ^= rest & 0xffn;
    rest >>= 8n;
    hash = BigInt.asIntN(64, hash * FNV_PRIME_64);
  }
  return hash < 0n ? -hash : hash;
}

// zeta(n, theta) = sum over i = 1..n of 1 / i^theta. Exact below 10,000 terms; above, the first terms are
// summed and the tail is Euler-Maclaurin (error below 1e-9 for theta in (0, 1)), so 10^10 items cost nothing.
export function zeta(n, theta) {
  const exactTerms = 10_000;
  let sum = 0;
  const stop = Math.min(n, exactTerms - 1);
  for (let i = 1; i <= stop; i += 1) sum += i ** -theta;
  if (n <= stop) return sum;
  const m = exactTerms;
  const f = (x) => x ** -theta;
  const f1 = (x) => -theta * x ** (-theta - 1);
  const f3 = (x) => -theta * (-theta - 1) * (-theta - 2) * x ** (-theta - 3);
  const integral = theta === 1 ? Math.log(n / m) : (n ** (1 - theta) - m ** (1 - theta)) / (1 - theta);
  return sum + integral + (f(m) + f(n)) / 2 + (f1(n) - f1(m)) / 12 - (f3(n) - f3(m)) / 720;
}

// YCSB's ZipfianGenerator (Gray et al., SIGMOD 1994): rank 0 is the most popular of itemCount items.
export function createZipfian({ itemCount, theta = DEFAULT_THETA, random, zetan = zeta(itemCount, theta) }) {
  if (!(itemCount >= 2)) throw new RangeError(`itemCount must be at least 2, got ${itemCount}`);
  if (!(theta > 0 && theta < 1)) throw new RangeError(`theta must be in (0, 1), got ${theta}`);
  const alpha = 1 / (1 - theta);
  const eta = (1 - (2 / itemCount) ** (1 - theta)) / (1 - zeta(2, theta) / zetan);
  const secondThreshold = 1 + 0.5 ** theta;
  return function nextRank() {
    const u = random();
    const uz = u * zetan;
    if (uz < 1) return 0;
    if (uz < secondThreshold) return 1;
    return Math.min(itemCount - 1, Math.floor(itemCount * (eta * u - eta + 1) ** alpha));
  };
}

// YCSB's ScrambledZipfianGenerator: a key number in [0, keyCount). Hot keys are spread by the hash, and since
// 10^10 ranks fold onto keyCount keys, the skew is milder than a zipfian over keyCount items (as in YCSB).
export function createScrambledZipfian({ keyCount, theta = DEFAULT_THETA, random }) {
  if (!(Number.isInteger(keyCount) && keyCount >= 1)) throw new RangeError(`keyCount must be a positive integer, got ${keyCount}`);
  // YCSB builds ZipfianGenerator(0, ITEM_COUNT), which holds ITEM_COUNT + 1 items.
  const itemCount = YCSB_ITEM_SPACE + 1;
  const zetan = theta === DEFAULT_THETA ? YCSB_ZETAN_099 : zeta(itemCount, theta);
  const nextRank = createZipfian({ itemCount, theta, random, zetan });
  const modulus = BigInt(keyCount);
  return function nextKeyNumber() {
    return Number(fnvHash64(nextRank()) % modulus);
  };
}

// YCSB names records "user" + number; `load` inserts user0 .. user(keyCount - 1).
export function keyName(keyNumber) {
  return `user${keyNumber}`;
}

// The chooser the load generator uses: next() returns a key name such as "user42".
export function createKeyChooser({ keyCount, seed, theta = DEFAULT_THETA, random = createSeededRandom(seed) }) {
  const nextKeyNumber = createScrambledZipfian({ keyCount, theta, random });
  return { next: () => keyName(nextKeyNumber()) };
}
