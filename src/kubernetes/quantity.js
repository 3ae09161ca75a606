// Pure: Kubernetes resource quantities ("250m", "212437118n", "1", "1.5", "412344Ki", "2Gi", "1e3") as numbers.

const DECIMAL = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };
const BINARY = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const PATTERN = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$/;

// Returns the quantity in base units (cores for CPU, bytes for memory), or throws on a malformed string.
export function parseQuantity(text) {
  if (typeof text === 'number' && Number.isFinite(text)) return text;
  const match = typeof text === 'string' ? PATTERN.exec(text.trim()) : null;
  if (!match) throw new TypeError(`not a Kubernetes quantity: ${JSON.stringify(text)}`);
  const [, number, exponent, suffix = ''] = match;
  if (exponent) return Number(`${number}${exponent}`);
  return Number(number) * (BINARY[suffix] ?? DECIMAL[suffix]);
}

// null when absent, so that a missing limit is not mistaken for zero.
export function parseOptionalQuantity(text) {
  return text === undefined || text === null || text === '' ? null : parseQuantity(text);
}
