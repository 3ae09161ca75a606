// Probes every server RethinkDB lists, so that a server that vanished silently (no FIN, no RST), or that the other
// servers can no longer reach, shows as probes left unanswered long before RethinkDB's heartbeat drops it. Two kinds:
// - direct: every intervalMs, `r.expr(1)` on a driver connection of the prober's own to the server (answered by the
//   server itself), unless the last is still unanswered; a server without a connection gets a connect instead;
// - through the cluster: the server's row of `rethinkdb.stats`, read through the direct connections of up to VIAS
//   other servers (the next ones in the listed order). Each asks the server over the cluster's own links
//   (stats_backend.cc, fetch_stats_from_server), so a server cut off from the others but not from the manager (a
//   partition) leaves these waiting while its direct probe answers.
// A direct probe or connect that fails fast (a refused connection, a closed socket: the process is gone, and RethinkDB
// knows it as fast) is not silence: only waiting is. A read through another server that comes back without the row
// means that server does not reach it: it counts as the read waiting would. After each round the silent servers (src/policy/suspicion.js,
// silentServers) are compared with the last round's, and onChange() is called when they differ. listServers():
// [{ serverId, name, hostname, addresses }] (the connection manager's, from the last server_status read); connect(address) -> a
// driver connection; probe(conn) and probeVia(conn, serverId) -> promises. busyPods() -> the pods the monitor last
// found busy (their servers are silent only after busyAfterMs: silentServers), matched to servers by hostname.
// With latencies on, the time each direct probe on an open connection took to be answered is kept until
// takeLatencies() takes it (the latency trigger, src/monitor/latency-trigger.js); a connect is not a probe's time.
// probeDisk(conn, serverName) (with diskIntervalMs): the disk probe, a durable write to a table on that server alone
// (src/policy/disk-probe.js), sent on the same connection at most every diskIntervalMs, one in flight per server; its
// times are kept the same way (one that fails, a table not there yet, is no time).

import { silentServers } from '../policy/suspicion.js';

// How many other servers each server is probed through: a majority of them waiting makes it silent, so that one
// partitioned server does not make the others look silent.
export const VIAS = 3;
// The most answer times kept for a server between two takeLatencies() (at 20 ms, 50 s of them).
const MAX_SAMPLES = 2500;

export function createProber({
  connect, probe, probeVia = null, listServers, clock, logger, intervalMs, suspectAfterMs, onChange = () => {},
  busyPods = () => [], busyAfterMs = suspectAfterMs, timers = { setInterval, clearInterval }, latencies = false,
  probeDisk = null, diskIntervalMs = 0,
}) {
  const log = logger.child({ module: 'prober' });
  // serverId -> { serverId, name, conn, waitingSince, busy, next (address index), lastError, vias: Map viaId -> { waitingSince, busy } }
  const states = new Map();
  const names = new Map(); // serverId -> name, kept after a server is dropped (the log names it)
  let suspects = [];
  let interval = null;

  function drop(state) {
    states.delete(state.serverId);
    state.conn?.close({ noreplyWait: false }).catch(() => {});
    state.conn = null;
  }

  function probeOne(state, server) {
    state.busy = true;
    const sentAt = clock.now();
    state.waitingSince = sentAt;
    state.timed = latencies && state.conn !== null;
    const work = state.conn ? probe(state.conn) : (async () => {
      const address = server.addresses[state.next % server.addresses.length];
      state.next += 1;
      const conn = await connect(address);
      // A driver connection emits 'error' when its socket breaks (EPIPE, ECONNRESET: the server went away), which
      // without a listener is an uncaught exception that ends the manager. The connection is forgotten then.
      const broken = (err) => {
        if (state.conn !== conn) return;
        state.conn = null;
        state.lastError = err?.message ?? 'connection closed';
      };
      conn.on?.('error', broken);
      conn.on?.('close', () => broken(null));
      // Dropped (or dropped and listed again, a new state) while connecting: this connection is nobody's.
      if (states.get(state.serverId) !== state) { conn.close({ noreplyWait: false }).catch(() => {}); return; }
      state.conn = conn;
      await probe(conn);
    })();
    work.then(() => {
      state.lastError = null;
      if (state.timed && state.samples.length < MAX_SAMPLES) state.samples.push(clock.now() - sentAt);
    }, (err) => {
      state.lastError = err?.message ?? String(err);
      state.conn?.close({ noreplyWait: false }).catch(() => {});
      state.conn = null;
    }).finally(() => {
      state.busy = false;
      state.waitingSince = null;
      state.timed = false;
    });
  }

  function probeDiskOf(state) {
    const { disk } = state;
    const sentAt = clock.now();
    disk.sentAt = sentAt;
    disk.lastAt = sentAt;
    probeDisk(state.conn, state.name).then(() => {
      disk.lastError = null;
      if (disk.samples.length < MAX_SAMPLES) disk.samples.push(clock.now() - sentAt);
    }, (err) => {
      disk.lastError = `${err?.name ?? 'Error'}: ${err?.msg ?? err?.message ?? err}`.slice(0, 200);
    }).finally(() => {
      disk.sentAt = null;
    });
  }

  // The server's row of rethinkdb.stats through each of its vias' connections, one in flight per via.
  function probeThroughCluster(state, vias) {
    for (const viaId of [...state.vias.keys()]) if (!vias.some((v) => v.serverId === viaId)) state.vias.delete(viaId);
    for (const via of vias) {
      let entry = state.vias.get(via.serverId);
      if (!entry) {
        entry = {
          waitingSince: null, busy: false, unreachable: false, reachable: false,
        };
        state.vias.set(via.serverId, entry);
      }
      if (entry.busy || !via.conn) continue;
      entry.busy = true;
      entry.waitingSince = clock.now();
      // No row, a row with an error, or an error the via server answered: it does not reach this one (stats_backend.cc
      // answers no row for a peer out of its directory). A driver's error is the via's own connection, which says
      // nothing of this server.
      probeVia(via.conn, state.serverId).then((row) => {
        // A row with `error` ("Timed out. Unable to retrieve stats.", stats/request.cc): the server did not answer in time
        // or its link died meanwhile.
        entry.unreachable = row === null || row === undefined || row.error !== undefined;
        entry.reachable = !entry.unreachable;
        entry.last = row === null || row === undefined ? 'no row' : (row.error ?? 'row');
      }, (err) => {
        entry.unreachable = !/^Reql(Driver|Timeout)Error$/.test(err?.name ?? '') && err?.name?.startsWith('Reql') === true;
        entry.reachable = false;
        entry.last = `${err?.name}: ${err?.message}`.slice(0, 200);
      }).finally(() => {
        entry.busy = false;
        entry.waitingSince = null;
      });
    }
  }

  function round() {
    const listed = listServers().filter((s) => s.addresses.length > 0);
    const ids = new Set(listed.map((s) => s.serverId));
    for (const state of [...states.values()]) if (!ids.has(state.serverId)) drop(state);
    for (const server of listed) {
      let state = states.get(server.serverId);
      if (!state) {
        state = {
          serverId: server.serverId, name: server.name, conn: null, waitingSince: null, busy: false, next: 0, lastError: null, vias: new Map(),
          hostname: server.hostname ?? null, samples: [], timed: false, disk: { samples: [], sentAt: null, lastAt: null, lastError: null },
        };
        states.set(server.serverId, state);
        names.set(server.serverId, server.name);
      }
      if (!state.busy) probeOne(state, server);
      if (probeDisk && state.conn && state.disk.sentAt === null && (state.disk.lastAt === null || clock.now() - state.disk.lastAt >= diskIntervalMs)) probeDiskOf(state);
    }
    if (probeVia) {
      // By id, not server_status's order, which need not be the same at every read: each server keeps its vias.
      const order = listed.map((s) => states.get(s.serverId)).sort((a, b) => (a.serverId < b.serverId ? -1 : Number(a.serverId > b.serverId)));
      order.forEach((state, i) => {
        const vias = [];
        for (let k = 1; k < order.length && vias.length < VIAS; k += 1) vias.push(order[(i + k) % order.length]);
        probeThroughCluster(state, vias);
      });
    }
    const probes = [...states.values()].map((s) => ({
      serverId: s.serverId,
      waitingSince: s.waitingSince,
      vias: [...s.vias.entries()].map(([viaId, v]) => ({
        viaId, waitingSince: v.waitingSince, unreachable: v.unreachable, reachable: v.reachable,
      })),
    }));
    const pods = new Set(busyPods());
    const busy = new Set(listed.filter((s) => pods.has(s.hostname)).map((s) => s.serverId));
    const now = silentServers(probes, clock.now(), { suspectAfterMs, busyAfterMs, busy });
    if (now.join() !== suspects.join()) {
      const named = (list) => list.map((id) => names.get(id) ?? id);
      log.warn({
        silent: named(now), before: named(suspects), suspectAfterMs, busy: named([...busy]), busyAfterMs,
      }, 'servers silent to the manager\'s probes changed');
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
    // The answer times of each probed server's direct probes since the last call (taken: the next call starts afresh),
    // and how long the probe still unanswered has waited (null if none waits, or if what waits is a connect).
    // With the disk probe, a second entry per server (signal 'disk'), its unanswered write's wait likewise.
    takeLatencies() {
      const now = clock.now();
      return [...states.values()].flatMap((s) => [
        {
          serverId: s.serverId, name: s.name, pod: s.hostname, signal: 'reply', samples: s.samples.splice(0), waitingMs: s.timed && s.waitingSince !== null ? now - s.waitingSince : null,
        },
        ...(probeDisk ? [{
          serverId: s.serverId, name: s.name, pod: s.hostname, signal: 'disk', samples: s.disk.samples.splice(0), waitingMs: s.disk.sentAt === null ? null : now - s.disk.sentAt,
        }] : []),
      ]);
    },
    suspects: () => [...suspects],
    probed: () => states.size,
    listed: (id) => states.has(id),
    nameOf: (id) => names.get(id) ?? id,
    view: () => [...states.values()].map((s) => ({
      server: s.name,
      connected: s.conn !== null,
      waitingMs: s.waitingSince === null ? null : clock.now() - s.waitingSince,
      viasWaiting: [...s.vias.values()].filter((v) => v.waitingSince !== null).length,
      viasUnreachable: [...s.vias.values()].filter((v) => v.unreachable).length,
      viasLast: [...s.vias.values()].map((v) => v.last ?? null),
      lastError: s.lastError,
      ...(probeDisk ? { diskLastError: s.disk.lastError } : {}),
    })),
  };
}
