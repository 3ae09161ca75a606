// Pure: the manager's holds on the query gates (docs/query-gate.md). Before a table_config write that moves
// primaries, the manager asks every gate to keep the table's new queries back; RethinkDB answers a query still in
// flight when an old primary's execution ends OP_INDETERMINATE ("lost contact with primary replica"), which the gate
// may not send again, even for a read, or a write the old primary refused. The hold ends (by default) once no old
// primary acts for its shard any more: from then on the shard answers what reaches it with OP_FAILED ("primary
// replica ... not available") until the new primary acts, and the gate sends that again; but see HOLD_UNTIL below.

import { tableLabel } from '../cluster/cluster-model.js';

// The shards whose primary the write changes: [{ shard, from, to }], `from` the servers whose primary execution may end
// (the configured primary before, unless it is disconnected, and whoever acts now, if not the new one). before: the
// table as read; shards: the shards as written; isConnected(id): whether the read saw the server connected. A write
// that names the server already acting for a disconnected primary (after a failover) hands nothing over.
export function handoversOf(before, shards, { isConnected = () => true } = {}) {
  return shards.flatMap((shard, index) => {
    const was = before.shards[index];
    if (!was || shard.primary === was.primary) return [];
    const configured = was.primary && isConnected(was.primary) ? [was.primary] : [];
    const from = [...new Set([...configured, ...(was.acting ?? [])])].filter((id) => id && id !== shard.primary);
    return from.length > 0 ? [{ shard: index, from, to: shard.primary }] : [];
  });
}

// Whether to hold the gates around a write: { hold, skipped }. Not when the write moves no primary (skipped null);
// not when the deadline leaves less than twice what a hold may take (skipped says so): the writes need that time more
// than a hold does. remainingMs: what the action's deadline leaves, null without one; holdLimitMs: the longest a hold
// may take (the gate client's time limit and the drain).
export function decideHold({ handovers, remainingMs, holdLimitMs }) {
  if (handovers.length === 0) return { hold: false, skipped: null };
  if (remainingMs !== null && remainingMs < 2 * holdLimitMs) {
    return { hold: false, skipped: `the deadline leaves ${Math.round(remainingMs)} ms, too little for a hold` };
  }
  return { hold: true, skipped: null };
}

// The names a hold gives the gates for a table: 'db.table', as queries name it.
export const holdTables = (table) => [tableLabel(table)];

// When a hold ends (GATE_HOLD_UNTIL): 'old-gone', once no old primary acts for its shard; 'new-acts', once besides every
// new primary acts for its shard. Why the second: a query the gate releases goes through a proxy, which routes it by
// the primaries its own copy of RethinkDB's directory lists. On the Kubernetes lab, writes released when the manager's
// read showed the old primary gone were answered "lost contact with primary replica" 0.03-0.3 s later, all at once
// (what that looks like: the proxy still routed to the old primary's ended query server, and learnt it only when its
// directory caught up). The config's default is 'new-acts' since it failed less there (docs/query-gate.md); the
// functions below default to 'old-gone', the first half of the rule (holdCameLate names it).
export const HOLD_UNTIL = ['old-gone', 'new-acts'];

// Whether a hold taken for `handovers` may end, on a fresh read of the table's acting primaries (per shard: server
// ids; null: the table is gone): { end, reason }. It ends once none of the old primaries acts for its shard (and, with
// until 'new-acts', each new primary acts for its shard), or when the table is gone (nothing left to protect).
export function holdMayEnd(acting, handovers, { until = 'old-gone' } = {}) {
  if (!acting) return { end: true, reason: 'the table is gone' };
  const still = handovers.filter(({ shard, from }) => (acting[shard] ?? []).some((id) => from.includes(id)));
  if (still.length > 0) return { end: false, reason: `${still.length} of ${handovers.length} old primaries still act` };
  if (until !== 'new-acts') return { end: true, reason: 'no old primary acts any more' };
  const waiting = handovers.filter(({ shard, to }) => !(acting[shard] ?? []).includes(to));
  if (waiting.length > 0) return { end: false, reason: `no old primary acts; ${waiting.length} of ${handovers.length} new primaries do not act yet` };
  return { end: true, reason: 'no old primary acts any more, and every new one does' };
}

// Whether a hold taken after the write (GATE_HOLD_DELAY_MS) came too late: its first read (read 0 since the hold
// answered) already finds no old primary acting, so it cannot be sure that nothing was in flight at the old primary's
// end. Whatever GATE_HOLD_UNTIL says: with 'new-acts' such a hold still holds on until the new primary acts, and is
// counted late when it ends.
export function holdCameLate(acting, handovers, { afterWrite = false, read }) {
  return afterWrite && read === 0 && holdMayEnd(acting, handovers, { until: 'old-gone' }).end;
}

// How a hold ends on a read of the acting primaries (holdMayEnd): { how, reason }, or null while it holds on. until: as
// holdMayEnd; late: the hold came too late (holdCameLate at its first read): it ends 'late' rather than 'handed_over'.
export function holdEnding(acting, handovers, { until = 'old-gone', late = false }) {
  const verdict = holdMayEnd(acting, handovers, { until });
  if (!verdict.end) return null;
  if (late) {
    return { how: 'late', reason: `${verdict.reason} by the time the hold had answered: it came too late to be sure no write was in flight then (GATE_HOLD_DELAY_MS)` };
  }
  return { how: 'handed_over', reason: verdict.reason };
}

// Which gates a hold goes to, from the gate pods the Kubernetes API lists: those running with an IP, at `port`. A pod
// being deleted is one: its gate still relays the queries of its open connections while it drains.
export function podEndpoints(pods, port) {
  return pods.filter((p) => p.phase === 'Running' && p.podIp)
    .map((p) => `${p.podIp.includes(':') ? `[${p.podIp}]` : p.podIp}:${port}`);
}
