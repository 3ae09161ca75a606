// The manager's state that must survive a restart of the manager: which servers are draining, which pods have
// an active perf warning, which ended warnings still wait to give their primaries back, and which data
// migrations are in flight. Reads come from memory; every change is
// written through to an annotation on the pod concerned (when there is a Kubernetes port), and load() reads
// them back at start-up. A pod that is gone takes its annotations with it.

const STATE_ANNOTATIONS = Object.freeze({
  draining: 'rethinkdb-manager.io/draining',
  perfwarning: 'rethinkdb-manager.io/perfwarning',
  migration: 'rethinkdb-manager.io/migration',
  restore: 'rethinkdb-manager.io/restore',
});
const KINDS = Object.keys(STATE_ANNOTATIONS);

export function createStateStore({ kube = null, clock, logger }) {
  const log = logger.child({ module: 'state' });
  // serverId -> { serverId, serverName, pod, draining, perfwarning, migration, restore, persistence }
  const entries = new Map();
  const queues = new Map();

  function entryFor(serverId, { serverName, pod } = {}) {
    let entry = entries.get(serverId);
    if (!entry) {
      entry = {
        serverId, serverName: serverName ?? serverId, pod: pod ?? null, draining: null, perfwarning: null, migration: null, restore: null, persistence: {},
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
      .then(() => { entry.persistence[kind] = 'saved'; })
      .catch((err) => {
        entry.persistence[kind] = `failed: ${err.message}`;
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
  function load(pods) {
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

  return {
    // by: who asked; via: why ('prestop' may be undone by the pod's own POSTSTART, an operator's 'action' may not).
    async markDraining(serverId, { reason, serverName, pod, by = null, via = 'action' }) {
      const entry = entryFor(serverId, { serverName, pod });
      if (!entry.draining) set('draining', serverId, { reason, since: new Date(clock.now()).toISOString(), by, via });
      return entry.draining;
    },
    async release(serverId) {
      const had = Boolean(entries.get(serverId)?.draining);
      if (had) set('draining', serverId, null);
      return had;
    },
    isDraining: async (serverId) => Boolean(entries.get(serverId)?.draining),
    // Which primaries a demotion took from the server, kept with its mark so that they can be given back.
    async noteDemoted(serverId, kind, changes) {
      const mark = entries.get(serverId)?.[kind];
      if (!mark || changes.length === 0) return;
      const seen = new Set((mark.demoted ?? []).map((d) => `${d.tableId}:${d.shard}`));
      const added = changes.map((c) => ({ tableId: c.tableId, shard: c.shard })).filter((d) => !seen.has(`${d.tableId}:${d.shard}`));
      set(kind, serverId, { ...mark, demoted: [...(mark.demoted ?? []), ...added] });
    },
    getDraining: async (serverId) => entries.get(serverId)?.draining ?? null,
    // Servers the planners keep primaries and new replicas away from: draining or under a perf warning.
    drainingIds: async () => [...entries.values()].filter((e) => e.draining || e.perfwarning).map((e) => e.serverId),
    list: async () => pick('draining'),
    setPerfWarning: async (serverId, warning, ref) => set('perfwarning', serverId, warning, ref).perfwarning,
    getPerfWarning: async (serverId) => entries.get(serverId)?.perfwarning ?? null,
    async clearPerfWarning(serverId) {
      const had = Boolean(entries.get(serverId)?.perfwarning);
      if (had) set('perfwarning', serverId, null);
      return had;
    },
    perfWarnings: async () => pick('perfwarning'),
    setMigration: async (serverId, migration, ref) => set('migration', serverId, migration, ref).migration,
    clearMigration: async (serverId) => { if (entries.get(serverId)?.migration) set('migration', serverId, null); },
    migrations: async () => pick('migration'),
    // An ended warning whose primaries return once the server is healthy: { warning, reason, actor }.
    setRestore: async (serverId, restore, ref) => set('restore', serverId, restore, ref).restore,
    clearRestore: async (serverId) => { if (entries.get(serverId)?.restore) set('restore', serverId, null); },
    restores: async () => pick('restore'),
    load,
    // Resolves when every queued annotation write has been attempted (tests, shutdown).
    flush: () => Promise.all([...queues.values()]),
  };
}
