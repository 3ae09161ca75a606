// The follower's relay (src/routes/leader-relay.js) on loopback HTTP: a leader that refuses because it is shutting
// down is not the end, the next leader answers; a replica that is itself shutting down says so at once instead of
// waiting for a leader it no longer follows.

import { once } from 'node:events';
import express from 'express';
import { toAppError } from '../../src/errors.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';
import { createLeaderRelay } from '../../src/routes/leader-relay.js';

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

// A replica that answers every request with (status, body), counting them.
async function replica(status, body) {
  const seen = [];
  const url = await listen(express().use((req, res) => { seen.push(req.path); res.status(status).json(body); }));
  return { url, seen };
}

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
async function follower({ elector, shuttingDown = () => false, budgetSeconds = 1 }) {
  const relay = createLeaderRelay({
    leadership: () => elector, served: () => false, deadlines: { prestopSeconds: budgetSeconds, actionSeconds: budgetSeconds }, clock, logger, shuttingDown,
  });
  const app = express().use(relay.relay).use((req, res) => res.json({ servedHere: true }));
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
      leadership: () => elector, served: () => true, deadlines: { prestopSeconds: 1, actionSeconds: 1 }, clock, logger, shuttingDown: () => true,
    });
    const base = await listen(express().use(relay.relay).use((req, res) => res.json({ servedHere: true })));
    expect(await post(base, '/v1/hooks/prestop?pod=rethinkdb-2')).toEqual({ status: 200, servedBy: null, body: { servedHere: true } });
  });
});

