// The CLI's one adapter to the outside: an HTTP request to the manager with the caller's fetch. Every way of not
// getting an answer (refused, DNS, TLS, reset, the timeout) becomes an UnreachableError; any answer is returned.

export class UnreachableError extends Error {
  constructor(message, { cause } = {}) {
    super(message, cause ? { cause } : undefined);
    this.name = 'UnreachableError';
  }
}

export function createManagerClient({ fetch, url, token = null, timeoutMs }) {
  const base = url.replace(/\/+$/, '');

  // Resolves to { status, text, body } (body: the parsed JSON, or null when the answer is not JSON).
  async function request({ method, path, body }) {
    const headers = { accept: 'application/json' };
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const res = await fetch(`${base}${path}`, {
        method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs), redirect: 'manual',
      });
      const text = await res.text();
      return { status: res.status, text, body: parseJson(text) };
    } catch (err) {
      throw new UnreachableError(describeFailure(err, `${base}${path}`, timeoutMs), { cause: err });
    }
  }

  return { request };
}

function describeFailure(err, target, timeoutMs) {
  if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return `the manager did not answer ${target} within ${timeoutMs / 1000} s (--timeout)`;
  const cause = err?.cause;
  const detail = cause?.code ? `${cause.code}${cause.message ? ` (${cause.message})` : ''}` : (cause?.message ?? err?.message ?? String(err));
  return `cannot reach the manager at ${target}: ${detail}`;
}

function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
