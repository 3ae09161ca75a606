// The follower's relay (src/routes/leader-relay.js) on loopback HTTP: a leader that refuses because it is shutting
// down is not the end, the next leader answers; a replica that is itself shutting down says so at once instead of
// waiting for a leader it no longer follows. And the relay trusts no one: a corpus of request-target forms sends
// nothing anywhere but to the leader's address, and relay headers are believed only from a proven peer replica.

import { once } from 'node:events';
import { connect } from 'node:net';
import express from 'express';
import { requireOriginForm } from '../../src/app.js';
import { toAppError } from '../../src/errors.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { RELAY_HEADERS, createLeaderRelay, leaderOrigin } from '../../src/routes/leader-relay.js';

const logger = createLogger({ level: 'silent' });
const clock = createSystemClock();
const servers = [];

afterEach(async () => {
  for (const s of servers.splice(0)) { s.closeAllConnections(); s.close(); }
});

async function listen(app) {
  const server = app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  servers.push(server);
  return `http://127.0.0.1:${server.address().port}`;
}

// A replica that answers every request with (status, body), counting them (and keeping what it was sent).
async function replica(status, body) {
  const seen = [];
  const requests = [];
  const url = await listen(express().use((req, res) => {
    seen.push(req.path);
    requests.push({ url: req.originalUrl, headers: req.headers });
    res.status(status).json(body);
  }));
  return { url, seen, requests };
}

// The relay's proof, as src/auth/relay-credentials.js gives it: PEER_TOKEN is a replica's, any other token is not.
const PEER_TOKEN = 'peer.relay.token';
const credentials = {
  credential: async () => PEER_TOKEN,
  verify: async (token) => (token === PEER_TOKEN ? { ok: true, username: 'system:serviceaccount:rethinkdb:rethinkdb-manager' } : { ok: false, reason: 'not a replica\'s token' }),
  ownProblem: () => null,
};

// An elector as the relay sees it: who leads comes from `leaders`, one per round; changed() counts the waits.
function electorOf(leaders) {
  let round = 0;
  const waits = [];
  return {
    identity: 'follower-a',
    view: () => ({ enabled: true }),
    leader: () => leaders[Math.min(round, leaders.length - 1)],
    changed: async (ms) => { waits.push(ms); round += 1; await clock.sleep(Math.min(ms, 5)); },
    waits,
  };
}

// The follower: the relay, then a handler that would serve the request here, then the error model's answer.
// The request-target check runs first, as in createApp.
async function follower({ elector, shuttingDown = () => false, budgetSeconds = 1, creds = credentials }) {
  const relay = createLeaderRelay({
    leadership: () => elector, served: () => false, deadlines: { prestopSeconds: budgetSeconds, actionSeconds: budgetSeconds }, clock, logger, shuttingDown, credentials: creds,
  });
  const app = express().use(requireOriginForm).use(relay.relay).use((req, res) => res.json({ servedHere: true }));
  app.use((err, req, res, _next) => { const e = toAppError(err); res.status(e.statusCode).json({ error: e.code, message: e.message }); });
  return listen(app);
}

const post = async (base, path) => {
  const res = await fetch(`${base}${path}`, { method: 'POST' });
  return { status: res.status, servedBy: res.headers.get('x-rethinkdb-manager-served-by'), body: await res.json() };
};

describe('the follower\'s relay to the leader', () => {
  test('when the leader answers 503 SHUTTING_DOWN, then the request goes to the next leader, whose answer is the answer', async () => {
    const old = await replica(503, { error: 'SHUTTING_DOWN', message: 'the manager is shutting down and takes no new work' });
    const next = await replica(200, { event: 'PRESTOP', primariesOff: true });
    const elector = electorOf([{ identity: 'old', http: old.url }, { identity: 'old', http: old.url }, { identity: 'next', http: next.url }]);
    const answer = await post(await follower({ elector }), '/v1/hooks/prestop?pod=rethinkdb-2');
    expect(answer).toEqual({ status: 200, servedBy: 'next', body: { event: 'PRESTOP', primariesOff: true } });
    expect(old.seen).toEqual(['/v1/hooks/prestop', '/v1/hooks/prestop']);
    expect(next.seen).toEqual(['/v1/hooks/prestop']);
  });

  test('when the leader answers another 503, then that is the answer: it may have acted', async () => {
    const leader = await replica(503, { error: 'DATA_STORE_UNAVAILABLE', message: 'not connected to RethinkDB' });
    const elector = electorOf([{ identity: 'leader', http: leader.url }]);
    const answer = await post(await follower({ elector }), '/v1/actions/rebalance-primaries');
    expect(answer).toMatchObject({ status: 503, servedBy: 'leader', body: { error: 'DATA_STORE_UNAVAILABLE' } });
    expect(leader.seen).toHaveLength(1);
  });

  test('when nobody leads, then a replica that is not shutting down waits out the budget, and one that is says so at once', async () => {
    const waiting = electorOf([null]);
    const waited = await post(await follower({ elector: waiting }), '/v1/hooks/prestop?pod=rethinkdb-2');
    expect(waited).toMatchObject({ status: 503, body: { error: 'NO_LEADER' } });
    expect(waiting.waits.length).toBeGreaterThan(1);

    const stopping = electorOf([null]);
    const refused = await post(await follower({ elector: stopping, shuttingDown: () => true }), '/v1/hooks/prestop?pod=rethinkdb-2');
    expect(refused).toEqual({
      status: 503, servedBy: null,
      body: { error: 'SHUTTING_DOWN', message: 'this manager replica (follower-a) is shutting down and does not lead; send POST /v1/hooks/prestop to another replica' },
    });
    expect(stopping.waits).toEqual([]);
  });

  test('when a replica shutting down still leads and serves, then the request is served there (its work tracker refuses new work)', async () => {
    const elector = electorOf([{ identity: 'follower-a', http: 'http://127.0.0.1:1', self: true }]);
    const relay = createLeaderRelay({
      leadership: () => elector, served: () => true, deadlines: { prestopSeconds: 1, actionSeconds: 1 }, clock, logger, shuttingDown: () => true, credentials,
    });
    const base = await listen(express().use(relay.relay).use((req, res) => res.json({ servedHere: true })));
    expect(await post(base, '/v1/hooks/prestop?pod=rethinkdb-2')).toEqual({ status: 200, servedBy: null, body: { servedHere: true } });
  });
});


// One raw HTTP/1.1 exchange: the request's bytes as given, the answer's status line (or null when the connection
// closed without one).
function rawRequest(base, text) {
  return new Promise((resolve, reject) => {
    const { port } = new URL(base);
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(text));
    let answer = '';
    socket.on('data', (chunk) => { answer += chunk; });
    socket.on('error', (err) => (err.code === 'ECONNRESET' ? resolve({ status: null, text: answer }) : reject(err)));
    socket.on('close', () => {
      const status = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      resolve({ status: status ? Number(status[1]) : null, text: answer });
    });
  });
}

// A leader as the relay sees it on the leader's side: it leads and serves; the handler shows what the relay left.
async function leaderApp({ budgetSeconds = 20 } = {}) {
  const elector = electorOf([{ identity: 'leader', http: 'http://127.0.0.1:1', self: true }]);
  const relay = createLeaderRelay({
    leadership: () => elector, served: () => true, deadlines: { prestopSeconds: budgetSeconds, actionSeconds: budgetSeconds }, clock, logger, credentials,
  });
  const app = express().use(requireOriginForm).use(relay.relay).use((req, res) => res.json({
    relayDeadlineMs: req.relayDeadlineMs ?? null,
    relayHeaders: Object.keys(req.headers).filter((h) => h.startsWith('x-rethinkdb-manager-')),
  }));
  app.use((err, req, res, _next) => { const e = toAppError(err); res.status(e.statusCode).json({ error: e.code, message: e.message }); });
  return listen(app);
}

describe('the relay trusts no one', () => {
  // Each request-target form at the follower: what the follower answers, and where anything was sent.
  const FORMS = [
    ['absolute form', (internal) => `GET ${internal}/latest/meta-data/ HTTP/1.1`, 400],
    ['absolute form, POST with a body', (internal) => `POST ${internal}/v1/hooks/prestop HTTP/1.1`, 400],
    ['a path starting with //', (internal) => `GET //${new URL(internal).host}/latest/meta-data/ HTTP/1.1`, 400],
    ['a path with a backslash', (internal) => `GET /\\${new URL(internal).host}/latest HTTP/1.1`, 400],
    ['authority form', (internal) => `GET ${new URL(internal).host} HTTP/1.1`, 400],
    ['asterisk form', () => 'OPTIONS * HTTP/1.1', 400],
    ['CONNECT', (internal) => `CONNECT ${new URL(internal).host} HTTP/1.1`, null],
  ];

  test.each(FORMS)('when a follower is sent a request in %s, then it refuses it and nothing reaches any server', async (name, line, expected) => {
    const internal = await replica(200, { secret: 'internal service' });
    const leader = await replica(200, { servedBy: 'leader' });
    const elector = electorOf([{ identity: 'leader', http: leader.url }]);
    const base = await follower({ elector });
    const body = '{"pod":"rethinkdb-0"}';
    const answer = await rawRequest(base, `${line(internal.url)}\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    expect(answer.status).toBe(expected);
    expect(answer.text).not.toContain('internal service');
    expect(internal.seen).toEqual([]);
    expect(leader.seen).toEqual([]);
  });

  test('when a path holds an encoded //host, then it goes to the leader\'s address only, as the path it is', async () => {
    const internal = await replica(200, { secret: 'internal service' });
    const leader = await replica(200, { servedBy: 'leader' });
    const elector = electorOf([{ identity: 'leader', http: leader.url }]);
    const base = await follower({ elector });
    const path = `/%2F%2F${new URL(internal.url).host}/latest?x=1`;
    const answer = await rawRequest(base, `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
    expect(answer.status).toBe(200);
    expect(internal.seen).toEqual([]);
    expect(leader.requests.map((r) => r.url)).toEqual([path]);
  });

  test('when the Lease names an address that is not http://host:port, then nothing is relayed there', async () => {
    const internal = await replica(200, { secret: 'internal service' });
    for (const address of [`${internal.url}/latest/meta-data`, `http://user:pw@${new URL(internal.url).host}`, `https://${new URL(internal.url).host}`, 'not a url']) {
      const elector = electorOf([{ identity: 'leader', http: address }]);
      const answer = await post(await follower({ elector }), '/v1/hooks/prestop?pod=rethinkdb-0');
      expect(answer).toMatchObject({ status: 503, body: { error: 'NO_LEADER' } });
      expect(answer.body.message).toContain('not relayed to');
    }
    expect(internal.seen).toEqual([]);
    expect(leaderOrigin('http://127.0.0.1:8080')).toEqual({ hostname: '127.0.0.1', port: 8080 });
    expect(leaderOrigin('http://[::1]:8080/')).toEqual({ hostname: '::1', port: 8080 });
  });

  test('when a follower relays, then the leader gets its proof and the caller\'s own headers, never a caller\'s relay token', async () => {
    const leader = await replica(200, { ok: true });
    const base = await follower({ elector: electorOf([{ identity: 'leader', http: leader.url }]) });
    await fetch(`${base}/v1/hooks/prestop?pod=rethinkdb-0`, {
      method: 'POST', headers: { authorization: 'Bearer caller-token', [RELAY_HEADERS.credential]: 'forged.relay.token', 'x-forwarded-for': '198.18.0.9' },
    });
    const [sent] = leader.requests;
    expect(sent.headers[RELAY_HEADERS.credential]).toBe(PEER_TOKEN);
    expect(sent.headers[RELAY_HEADERS.relayedBy]).toBe('follower-a');
    expect(sent.headers.authorization).toBe('Bearer caller-token');
    expect(sent.headers['x-forwarded-for']).toBeUndefined();
  });

  test('when the leader takes the request and its answer is lost, then the follower answers 502 LEADER_ANSWER_LOST, not a 503 a hook would send again, and sends it nowhere else', async () => {
    const seen = [];
    const leaderUrl = await listen(express().use((req, res) => { seen.push(req.path); res.socket.destroy(); }));
    const next = await replica(200, { ok: true });
    const base = await follower({ elector: electorOf([{ identity: 'leader', http: leaderUrl }, { identity: 'next', http: next.url }]) });
    const answer = await post(base, '/v1/hooks/prestop?pod=rethinkdb-0');
    expect(answer).toMatchObject({ status: 502, body: { error: 'LEADER_ANSWER_LOST' } });
    expect(answer.body.message).toMatch(/took POST \/v1\/hooks\/prestop but its answer was lost/);
    expect(seen).toEqual(['/v1/hooks/prestop']);
    expect(next.seen).toEqual([]);
  });

  test('when a follower has no relay token, then it relays nothing and says why at once', async () => {
    const leader = await replica(200, { ok: true });
    const creds = { ...credentials, credential: async () => null, ownProblem: () => 'the relay token /x cannot be read (ENOENT)' };
    const answer = await post(await follower({ elector: electorOf([{ identity: 'leader', http: leader.url }]), creds }), '/v1/hooks/prestop?pod=rethinkdb-0');
    expect(answer).toMatchObject({ status: 503, body: { error: 'NO_LEADER' } });
    expect(answer.body.message).toContain('cannot be read');
    expect(leader.seen).toEqual([]);
  });

  const SPOOFS = [
    ['no token', {}],
    ['a token that is not a replica\'s', { [RELAY_HEADERS.credential]: 'someone.elses.token' }],
    ['an empty token', { [RELAY_HEADERS.credential]: '' }],
  ];

  test.each(SPOOFS)('when a caller sends relay headers with %s to the leader, then they are dropped: its own deadline holds', async (name, extra) => {
    const base = await leaderApp();
    const res = await fetch(`${base}/v1/hooks/prestop?pod=rethinkdb-0`, {
      method: 'POST', headers: { [RELAY_HEADERS.relayedBy]: 'forged', [RELAY_HEADERS.deadlineMs]: '1', ...extra },
    });
    expect(await res.json()).toEqual({ relayDeadlineMs: null, relayHeaders: [] });
  });

  test('when a peer replica relays with its token, then the leader takes the deadline it sends, and the token goes no further', async () => {
    const base = await leaderApp();
    const res = await fetch(`${base}/v1/hooks/prestop?pod=rethinkdb-0`, {
      method: 'POST', headers: { [RELAY_HEADERS.relayedBy]: 'follower-a', [RELAY_HEADERS.deadlineMs]: '7000', [RELAY_HEADERS.credential]: PEER_TOKEN },
    });
    expect(await res.json()).toEqual({ relayDeadlineMs: 7000, relayHeaders: [RELAY_HEADERS.relayedBy, RELAY_HEADERS.deadlineMs] });
  });

  test('when a caller forges relay headers at a follower, then the follower still relays (it does not answer NOT_LEADER for it)', async () => {
    const leader = await replica(200, { servedBy: 'leader' });
    const base = await follower({ elector: electorOf([{ identity: 'leader', http: leader.url }]) });
    const res = await fetch(`${base}/v1/actions/rebalance-primaries`, { method: 'POST', headers: { [RELAY_HEADERS.relayedBy]: 'forged', [RELAY_HEADERS.deadlineMs]: '1' } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ servedBy: 'leader' });
    expect(Number(leader.requests[0].headers[RELAY_HEADERS.deadlineMs])).toBeGreaterThan(100);
  });
});
