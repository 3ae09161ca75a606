// The manager's state that must survive a restart of the manager: which servers are draining, which pods have
// an active perf warning, which ended warnings still wait to give their primaries back, which departing servers
// the heartbeat timeout is lowered for, which data migrations are in flight, which servers the manager made
// nonvoting for a moment to move a table's Raft leadership and owes their vote back, and which servers that came back
// during a rollout are owed their primaries when it ends. It holds these marks and applies
// every change as a pure transition (./mark-transitions.js); the events' executor is the only writer of the
// marks, the actions only of their own journals (migration records, votes owed). Reads come from memory; every change is written
// through to an annotation on the pod concerned (when there is a Kubernetes port), and load() reads them back at
// start-up. A pod that is gone takes its annotations with it.

import {
  NO_MARKS, awaitHealth, clearMigration, depart, departed, endWarning, handedBack, keepsOff, noteDemoted, oweHandBack, owesVote, release,
  restored, setMigration, startDraining, voteGivenBack, warn,
} from './mark-transitions.js';

const STATE_ANNOTATIONS = Object.freeze({
  draining: 'rethinkdb-manager.io/draining',
  perfwarning: 'rethinkdb-manager.io/perfwarning',
  migration: 'rethinkdb-manager.io/migration',
  restore: 'rethinkdb-manager.io/restore',
  departing: 'rethinkdb-manager.io/departing',
  voting: 'rethinkdb-manager.io/voting-restore',
  handBack: 'rethinkdb-manager.io/hand-back',
});
const KINDS = Object.keys(STATE_ANNOTATIONS);

export function createStateStore({ kube = null, clock, logger }) {
  const log = logger.child({ module: 'state' });
  // serverId -> { serverId, serverName, pod, draining, perfwarning, migration, restore, departing, voting, persistence }
  const entries = new Map();
  const queues = new Map();

  function entryFor(serverId, { serverName, pod } = {}) {
    let entry = entries.get(serverId);
    if (!entry) {
      entry = {
        serverId, serverName: serverName ?? serverId, pod: pod ?? null, ...NO_MARKS, persistence: {}, unsaved: new Set(),
      };
      entries.set(serverId, entry);
    }
    if (serverName) entry.serverName = serverName;
    if (pod) entry.pod = pod;
    return entry;
  }

  // Writes are queued per pod so that they reach the API server in the order they were made.
  function persist(entry, kind) {
    if (!kube?.annotatePod) { entry.persistence[kind] = 'memory-only (no Kubernetes API)'; return; }
    if (!entry.pod) { entry.persistence[kind] = 'memory-only (no pod known for this server)'; return; }
    const value = entry[kind] ? JSON.stringify({ ...entry[kind], serverId: entry.serverId, serverName: entry.serverName }) : null;
    entry.persistence[kind] = 'pending';
    const previous = queues.get(entry.pod) ?? Promise.resolve();
    const next = previous.then(() => kube.annotatePod(entry.pod, { [STATE_ANNOTATIONS[kind]]: value }))
      .then(() => { entry.persistence[kind] = 'saved'; entry.unsaved.delete(kind); })
      .catch((err) => {
        entry.persistence[kind] = `failed: ${err.message}`;
        // Written again by retryUnsaved while the API server is down or this replica not leading (503), not for a
        // pod that is gone or a write the API server rejects.
        if (err.statusCode === 503) entry.unsaved.add(kind); else entry.unsaved.delete(kind);
        log.warn({ pod: entry.pod, kind, err: err.message }, 'state not persisted on the pod; kept in memory');
      });
    queues.set(entry.pod, next);
  }

  function set(kind, serverId, value, ref) {
    const entry = entryFor(serverId, ref);
    entry[kind] = value;
    persist(entry, kind);
    return entry;
  }

  function pick(kind) {
    return [...entries.values()].filter((e) => e[kind]).map((e) => ({
      serverId: e.serverId, serverName: e.serverName, pod: e.pod, ...e[kind], persisted: e.persistence[kind] ?? null,
    }));
  }

  // Start-up: the state found on the pods' annotations. Returns what was loaded, and what was unreadable.
  // replace: forget every mark held in memory first (a replica that leads again, or a follower refreshing its view).
  function load(pods, { replace = false } = {}) {
    if (replace) entries.clear();
    const loaded = [];
    const unreadable = [];
    for (const pod of pods) {
      for (const kind of KINDS) {
        const raw = pod.annotations?.[STATE_ANNOTATIONS[kind]];
        if (!raw) continue;
        let value = null;
        try { value = JSON.parse(raw); } catch { /* reported below */ }
        if (!value?.serverId) { unreadable.push({ pod: pod.name, kind }); continue; }
        const { serverId, serverName, ...rest } = value;
        const entry = entryFor(serverId, { serverName, pod: pod.name });
        entry[kind] = rest;
        entry.persistence[kind] = 'saved';
        loaded.push({ pod: pod.name, kind, serverId, serverName });
      }
    }
    return { loaded, unreadable };
  }

  // Applies a pure transition (./mark-transitions.js) to a server's marks and persists the kinds it changed. A mark
  // written again with the same content (a restore that still waits, re-recorded every tick) is no change: the pod
  // is not patched again.
  function apply(serverId, transition, ref) {
    const entry = entryFor(serverId, ref);
    const before = Object.fromEntries(KINDS.map((kind) => [kind, entry[kind]]));
    const after = transition(before);
    for (const kind of KINDS) {
      if (after[kind] !== before[kind] && JSON.stringify(after[kind]) !== JSON.stringify(before[kind])) set(kind, serverId, after[kind]);
    }
    return after;
  }
  const marksOf = (serverId) => {
    const entry = entries.get(serverId);
    return entry ? Object.fromEntries(KINDS.map((kind) => [kind, entry[kind]])) : NO_MARKS;
  };

  return {
    async markDraining(serverId, { reason, origin, serverName, pod }) {
      return apply(serverId, (m) => startDraining(m, { reason, since: new Date(clock.now()).toISOString(), origin }), { serverName, pod }).draining;
    },
    async release(serverId) {
      const had = Boolean(marksOf(serverId).draining);
      if (had) apply(serverId, release);
      return had;
    },
    async noteDemoted(serverId, kind, changes) {
      if (entries.has(serverId)) apply(serverId, (m) => noteDemoted(m, kind, changes));
    },
    getDraining: async (serverId) => marksOf(serverId).draining,
    // The servers the planners keep off: those whose marks say so (keepsOff), and `also` (a drain's own servers, marked
    // or not: a dry run writes no mark), each once.
    drainingIds: async (also = []) => [...new Set([...[...entries.keys()].filter((id) => keepsOff(marksOf(id))), ...also])],
    list: async () => pick('draining'),
    setPerfWarning: async (serverId, warning, ref) => apply(serverId, (m) => warn(m, warning), ref).perfwarning,
    getPerfWarning: async (serverId) => marksOf(serverId).perfwarning,
    getMigration: async (serverId) => marksOf(serverId).migration,
    async clearPerfWarning(serverId) {
      const had = Boolean(marksOf(serverId).perfwarning);
      if (had) apply(serverId, endWarning);
      return had;
    },
    perfWarnings: async () => pick('perfwarning'),
    setMigration: async (serverId, migration, ref) => apply(serverId, (m) => setMigration(m, migration), ref).migration,
    clearMigration: async (serverId) => { if (entries.has(serverId)) apply(serverId, clearMigration); },
    migrations: async () => pick('migration'),
    setRestore: async (serverId, restore, ref) => apply(serverId, (m) => awaitHealth(m, restore), ref).restore,
    clearRestore: async (serverId) => { if (entries.has(serverId)) apply(serverId, restored); },
    restores: async () => pick('restore'),
    setDeparture: async (serverId, departure, ref) => apply(serverId, (m) => depart(m, departure), ref).departing,
    clearDeparture: async (serverId) => { if (entries.has(serverId)) apply(serverId, departed); },
    departures: async () => pick('departing'),
    // The Raft leadership move's own journal (like a migration record): the votes it still owes.
    setVotingRestore: async (serverId, voting, ref) => apply(serverId, (m) => owesVote(m, voting), ref).voting,
    // remaining: what is still owed ([] when everything is back).
    settleVotingRestore: async (serverId, remaining = []) => { if (entries.has(serverId)) apply(serverId, (m) => voteGivenBack(m, remaining)); },
    // Waits for the annotation write: 'saved', 'memory-only (...)' or 'failed: ...'.
    persistedVotingRestore: async (serverId) => { await queues.get(entries.get(serverId)?.pod); return entries.get(serverId)?.persistence.voting ?? null; },
    votingRestores: async () => pick('voting'),
    // The primaries owed to servers that came back during a rollout (decidePoststart, decideRolloutLevelling).
    setHandBack: async (serverId, handBack, ref) => apply(serverId, (m) => oweHandBack(m, handBack), ref).handBack,
    clearHandBack: async (serverId) => { if (entries.has(serverId)) apply(serverId, handedBack); },
    handBacks: async () => pick('handBack'),
    load,
    // Writes that failed for a time (API server down, the fence refusing): each kind's current value is written again, so
    // that the pods do not keep a mark released since (a leader that reloads them would act on it).
    // Returns what was queued again.
    retryUnsaved() {
      const queued = [];
      for (const entry of entries.values()) {
        for (const kind of KINDS) {
          if (!entry.unsaved.has(kind) || entry.persistence[kind] === 'pending') continue;
          persist(entry, kind);
          queued.push({ pod: entry.pod, kind, serverName: entry.serverName });
        }
      }
      return queued;
    },
    // Resolves when every queued annotation write has been attempted (tests, shutdown).
    flush: () => Promise.all([...queues.values()]),
    // A copy of the marks that is never persisted: a dry run changes it as the real run would change the marks, so
    // that what it plans after a mark's change (a release, then a rebalance) is what the real run writes.
    fork() {
      const copy = createStateStore({ kube: null, clock, logger });
      for (const e of entries.values()) {
        copy.seedEntry({ serverId: e.serverId, serverName: e.serverName, pod: e.pod, marks: structuredClone(Object.fromEntries(KINDS.map((kind) => [kind, e[kind]]))) });
      }
      return copy;
    },
    seedEntry({ serverId, serverName, pod, marks }) {
      const entry = entryFor(serverId, { serverName, pod });
      for (const kind of KINDS) { entry[kind] = marks[kind] ?? NO_MARKS[kind]; entry.persistence[kind] = 'dry run'; }
    },
  };
}
