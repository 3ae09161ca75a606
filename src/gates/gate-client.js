// The query gates' adapter (gate/src/admin.js's /v1/holds, over HTTP): takes and ends a hold at every gate at once.
// It never throws: a gate that cannot be listed, reached or that refuses is reported in `failed`, and the manager
// writes anyway (a hold only spares clients an error; it is never what makes a write safe). Every call has a time
// limit. The gates are listed at each hold (their pods come and go): GATE_HOLD_ENDPOINTS, or the pods of
// GATE_HOLD_POD_SELECTOR in the manager's namespace, at GATE_HOLD_PORT, as the Kubernetes API lists them.

import { readFile as readFileAsync } from 'node:fs/promises';

// listEndpoints(): a promise of ['host:port'], kept for listTtlMs (a drain writes many tables in a few seconds; a
// gate that appears meanwhile is held from the next listing); request: fetch's signature.
export function createGateClient({
  listEndpoints, tokenFile, readFile = readFileAsync, request = fetch, timeoutMs = 500, clock = { now: () => Date.now() }, listTtlMs = 5000, listTimeoutMs = 2000,
}) {
  let listed = null; // { at, endpoints }

  async function endpoints() {
    if (listed && clock.now() - listed.at < listTtlMs) return listed.endpoints;
    let timer;
    const limit = new Promise((resolve, reject) => { timer = setTimeout(() => reject(new Error(`the gates were not listed within ${listTimeoutMs} ms`)), listTimeoutMs); });
    try {
      const found = await Promise.race([listEndpoints(), limit]);
      listed = { at: clock.now(), endpoints: found };
      return found;
    } finally {
      clearTimeout(timer);
    }
  }

  // The shared token; null while its file does not exist (the Secret, optional in the manifests, not created: holds
  // are off until it is, and nothing is reported as failed).
  async function token() {
    let text;
    try {
      text = (await readFile(tokenFile, 'utf8')).trim();
    } catch (err) {
      if (err.code === 'ENOENT') return null;
      throw err;
    }
    if (!text) throw new Error(`${tokenFile} is empty`);
    return text;
  }

  async function call(endpoint, method, path, secret, body, limitMs) {
    const res = await request(`http://${endpoint}${path}`, {
      method,
      headers: { authorization: `Bearer ${secret}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(limitMs),
    });
    const text = await res.text();
    let json = null;
    try { json = JSON.parse(text); } catch { /* reported as text */ }
    if (!res.ok) throw new Error(`${res.status}: ${json?.error ?? text.slice(0, 200)}`);
    return json;
  }

  // The token and the gates, read now for a hold asked later (a hold taken after the write must not spend its time
  // listing pods): { secret, list }, or the answer hold() gives without asking ({ off } or { failed }).
  async function prepare() {
    try {
      const secret = await token();
      if (secret === null) return { answer: { held: [], failed: [], off: `no token at ${tokenFile}` } };
      return { secret, list: await endpoints() };
    } catch (err) {
      return { answer: { held: [], failed: [{ endpoint: null, error: err.message }] } };
    }
  }

  // -> { held: [{ endpoint, id, inFlight }], failed: [{ endpoint, error }], off }: off (a reason) when there is no
  // token file, and then nothing was asked. prepared: what prepare() read (else it is read now).
  async function hold(tables, { ttlMs, drainMs }, prepared = null) {
    const { secret, list, answer } = prepared ?? await prepare();
    if (answer) return answer;
    const outcomes = await Promise.all(list.map(async (endpoint) => {
      try {
        const answer = await call(endpoint, 'POST', '/v1/holds', secret, { tables, ttlMs, drainMs }, drainMs + timeoutMs);
        return { held: { endpoint, id: answer.id, inFlight: answer.inFlight ?? 0 } };
      } catch (err) {
        return { failed: { endpoint, error: failureText(err, drainMs + timeoutMs) } };
      }
    }));
    return { held: outcomes.filter((o) => o.held).map((o) => o.held), failed: outcomes.filter((o) => o.failed).map((o) => o.failed) };
  }

  // Ends the holds; -> [{ endpoint, error }] for those not ended here (a gate that expired one answers 404: its hold
  // is over all the same).
  async function release(held) {
    if (held.length === 0) return [];
    let secret;
    try {
      secret = await token();
      if (secret === null) throw new Error(`no token at ${tokenFile}`);
    } catch (err) {
      return held.map(({ endpoint }) => ({ endpoint, error: err.message }));
    }
    const outcomes = await Promise.all(held.map(async ({ endpoint, id }) => {
      try {
        await call(endpoint, 'DELETE', `/v1/holds/${id}`, secret, null, timeoutMs);
        return null;
      } catch (err) {
        return /^404:/.test(err.message) ? null : { endpoint, error: failureText(err, timeoutMs) };
      }
    }));
    return outcomes.filter(Boolean);
  }

  // Asks every gate for its holds (GET /v1/holds, which changes nothing), so that a gate that refuses the token or
  // cannot be reached shows when the manager starts leading, not at its first handover; it also makes the first hold
  // cheaper (the HTTP client is loaded, the gates listed). -> { reached: [endpoint], failed: [{ endpoint, error }],
  // off }: off (a reason) when there is no token file, and then nothing was asked.
  async function check() {
    const { secret, list, answer } = await prepare();
    if (answer) return { reached: [], failed: answer.failed, ...(answer.off ? { off: answer.off } : {}) };
    const outcomes = await Promise.all(list.map(async (endpoint) => {
      try {
        await call(endpoint, 'GET', '/v1/holds', secret, null, timeoutMs);
        return { endpoint };
      } catch (err) {
        return { endpoint, error: failureText(err, timeoutMs) };
      }
    }));
    return { reached: outcomes.filter((o) => !o.error).map((o) => o.endpoint), failed: outcomes.filter((o) => o.error) };
  }

  // The longest a hold request may take: the gate's drain, then the client's own limit.
  return {
    prepare, hold, release, check, holdLimitMs: (drainMs) => drainMs + timeoutMs,
  };
}

// What a gate's failed call is reported as: its time limit when that is what ended it, else its error.
const failureText = (err, limitMs) => (err.name === 'TimeoutError' ? `no answer within ${limitMs} ms` : err.message);
