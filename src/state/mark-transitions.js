// Pure: the marks a server carries and how events change them. A server's marks are
// { draining, perfwarning, restore, migration, departing, voting, handBack } (each null or an object); every transition takes the marks and
// returns the new ones, the same object when nothing changes. The state store applies them and persists
// exactly the kinds that changed.

export const NO_MARKS = Object.freeze({
  draining: null, perfwarning: null, restore: null, migration: null, departing: null, voting: null, handBack: null,
});

// A drain already under way keeps its first reason, time and origin (a repeat PRESTOP changes nothing).
// origin: what drained it and who asked, { kind: 'prestop' | 'operator', by }.
export function startDraining(marks, { reason, since, origin }) {
  return marks.draining ? marks : { ...marks, draining: { reason, since, origin } };
}

export function release(marks) {
  return marks.draining ? { ...marks, draining: null } : marks;
}

// A new warning replaces the old one and cancels a restore that was waiting to give primaries back.
export function warn(marks, warning) {
  return { ...marks, perfwarning: warning, restore: null };
}

export function endWarning(marks) {
  return marks.perfwarning ? { ...marks, perfwarning: null } : marks;
}

// An ended warning whose primaries return once the server is healthy: { warning, reason, actor }.
export function awaitHealth(marks, restore) {
  return { ...marks, restore };
}

export function restored(marks) {
  return marks.restore ? { ...marks, restore: null } : marks;
}

export function setMigration(marks, migration) {
  return { ...marks, migration };
}

export function clearMigration(marks) {
  return marks.migration ? { ...marks, migration: null } : marks;
}

// A server about to leave (PRESTOP) while the cluster's heartbeat timeout is lowered for it:
// { originalSecs, loweredSecs, until }. originalSecs is what the heartbeat goes back to.
export function depart(marks, departure) {
  return { ...marks, departing: departure };
}

export function departed(marks) {
  return marks.departing ? { ...marks, departing: null } : marks;
}

// Which primaries a demotion took from the server, kept with the mark that caused it (kind: 'draining' or
// 'perfwarning') so that they can be given back; each shard once.
export function noteDemoted(marks, kind, changes) {
  const mark = marks[kind];
  if (!mark || changes.length === 0) return marks;
  const seen = new Set((mark.demoted ?? []).map((d) => `${d.tableId}:${d.shard}`));
  const added = changes.map((c) => ({ tableId: c.tableId, shard: c.shard })).filter((d) => !seen.has(`${d.tableId}:${d.shard}`));
  return added.length === 0 ? marks : { ...marks, [kind]: { ...mark, demoted: [...(mark.demoted ?? []), ...added] } };
}

// The planners keep primaries and new replicas off a server that is draining or under a perf warning.
export function keepsOff(marks) {
  return Boolean(marks.draining || marks.perfwarning);
}

// A server that came back during a rollout is owed its primaries: { demoted: [{ tableId, shard }], reason, since },
// given back in one levelling once the rollout has ended (decideRolloutLevelling). A second debt in the same rollout
// (the server restarted twice) adds the shards it lost since.
export function oweHandBack(marks, handBack) {
  if (!marks.handBack) return { ...marks, handBack };
  const seen = new Set(marks.handBack.demoted.map((d) => `${d.tableId}:${d.shard}`));
  const added = handBack.demoted.filter((d) => !seen.has(`${d.tableId}:${d.shard}`));
  return added.length === 0 ? marks : { ...marks, handBack: { ...marks.handBack, demoted: [...marks.handBack.demoted, ...added] } };
}

export function handedBack(marks) {
  return marks.handBack ? { ...marks, handBack: null } : marks;
}

// Shards where the manager made the server nonvoting to move a table's Raft leadership off it, and owes it its vote
// back: { tables: [{ tableId, shards: [index] }], since, reason }. Kept until the vote is back, so that a manager
// restarted in between still gives it back.
// A new debt adds to what is owed already (shards merged per table).
export function owesVote(marks, voting) {
  return { ...marks, voting: { ...voting, tables: mergeOwed(marks.voting?.tables ?? [], voting.tables) } };
}

// `remaining`: what is still owed after a give-back ([] or null: nothing).
export function voteGivenBack(marks, remaining = []) {
  if (!marks.voting) return marks;
  const tables = (remaining ?? []).filter((t) => t.shards.length > 0);
  return { ...marks, voting: tables.length > 0 ? { ...marks.voting, tables } : null };
}

function mergeOwed(owed, added) {
  const byTable = new Map(owed.map((t) => [t.tableId, new Set(t.shards)]));
  for (const t of added) byTable.set(t.tableId, new Set([...(byTable.get(t.tableId) ?? []), ...t.shards]));
  return [...byTable].map(([tableId, shards]) => ({ tableId, shards: [...shards].sort((a, b) => a - b) }));
}
