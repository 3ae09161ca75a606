// Probes every server RethinkDB lists, each on a driver connection of its own, so that a server that vanished
// silently (no FIN, no RST) shows as a probe left unanswered long before RethinkDB's heartbeat drops it. Every
// intervalMs each server gets one probe (`r.expr(1)`, answered by the server itself) unless the last is still
// unanswered; a server without a connection gets a connect instead. A probe or connect that fails fast (a refused
// connection, a closed socket: the process is gone, and RethinkDB knows it as fast) is not silence: only waiting is.
// After each round the silent servers (src/policy/suspicion.js, silentServers) are compared with the last round's,
// and onChange() is called when they differ. listServers(): [{ serverId, name, addresses }] (the connection
// manager's, from the last server_status read); connect(address) -> a driver connection; probe(conn) -> a promise.

import { silentServers } from '../policy/suspicion.js';

export function createProber({
  connect, probe, listServers, clock, logger, intervalMs, suspectAfterMs, onChange = () => {}, timers = { setInterval, clearInterval },
}) {
  const log = logger.child({ module: 'prober' });
  const states = new Map(); // serverId -> { serverId, name, conn, waitingSince, busy, next (address index), lastError }
  let suspects = [];
  let interval = null;
  const names = new Map(); // serverId -> name, kept after a server is dropped (the log names it)

  function drop(state) {
    states.delete(state.serverId);
    state.conn?.close({ noreplyWait: false }).catch(() => {});
    state.conn = null;
  }

  function probeOne(state, server) {
    state.busy = true;
    state.waitingSince = clock.now();
    const work = state.conn ? probe(state.conn) : (async () => {
      const address = server.addresses[state.next % server.addresses.length];
      state.next += 1;
      const conn = await connect(address);
      if (!states.has(state.serverId)) { conn.close({ noreplyWait: false }).catch(() => {}); return; }
      state.conn = conn;
      await probe(conn);
    })();
    work.then(() => { state.lastError = null; }, (err) => {
      state.lastError = err?.message ?? String(err);
      state.conn?.close({ noreplyWait: false }).catch(() => {});
      state.conn = null;
    }).finally(() => {
      state.busy = false;
      state.waitingSince = null;
    });
  }

  function round() {
    const listed = listServers().filter((s) => s.addresses.length > 0);
    const ids = new Set(listed.map((s) => s.serverId));
    for (const state of [...states.values()]) if (!ids.has(state.serverId)) drop(state);
    for (const server of listed) {
      let state = states.get(server.serverId);
      if (!state) {
        state = { serverId: server.serverId, name: server.name, conn: null, waitingSince: null, busy: false, next: 0, lastError: null };
        names.set(server.serverId, server.name);
        states.set(server.serverId, state);
      }
      if (!state.busy) probeOne(state, server);
    }
    const now = silentServers([...states.values()], clock.now(), { suspectAfterMs });
    if (now.join() !== suspects.join()) {
      const named = (ids2) => ids2.map((id) => names.get(id) ?? id);
      log.warn({ silent: named(now), before: named(suspects), suspectAfterMs }, 'servers silent to the manager\'s probes changed');
      suspects = now;
      onChange(now);
    }
  }

  return {
    // Starts the rounds; returns the stop function (the runner's part).
    start() {
      interval = timers.setInterval(round, intervalMs);
      interval?.unref?.();
      return () => {
        timers.clearInterval(interval);
        interval = null;
        for (const state of [...states.values()]) drop(state);
        if (suspects.length > 0) { suspects = []; onChange([]); }
      };
    },
    round,
    suspects: () => [...suspects],
    probed: () => states.size,
    listed: (id) => states.has(id),
    nameOf: (id) => names.get(id) ?? id,
    view: () => [...states.values()].map((s) => ({
      server: s.name, connected: s.conn !== null, waitingMs: s.waitingSince === null ? null : clock.now() - s.waitingSince, lastError: s.lastError,
    })),
  };
}
