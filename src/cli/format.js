// Pure: the manager's JSON answers as text for a terminal. Each function takes a parsed body and returns lines.

// Columns padded to their widest cell, two spaces apart, no trailing blanks.
export function formatTable(headers, rows) {
  const cells = [headers, ...rows].map((row) => row.map((c) => (c === null || c === undefined || c === '' ? '-' : String(c))));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return cells.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd());
}

export function formatAnswer(parsed, body) {
  switch (parsed.command) {
    case 'status': return formatStatus(body);
    case 'drain': case 'release': case 'plan': return formatReport(body);
    case 'operations': return parsed.id === undefined ? formatOperations(body) : formatOperation(body);
    case 'events': return formatEvents(body);
    default: throw new TypeError(`no format for command ${parsed.command}`);
  }
}

// GET /v1/cluster: the shard map of each table first (what an operator checks before and after a drain), then servers.
export function formatStatus(cluster) {
  const lines = cluster.notice ? [cluster.notice, ''] : [];
  for (const table of cluster.tables) lines.push(...formatShardMap(table), '');
  if (cluster.tables.length === 0) lines.push('no tables', '');
  lines.push(...formatServers(cluster));
  const notes = statusNotes(cluster);
  return notes.length > 0 ? [...lines, '', ...notes] : lines;
}

function formatShardMap(table) {
  const readiness = [
    table.readyForWrites ? 'ready for writes' : 'NOT ready for writes',
    table.readyForReads ? 'ready for reads' : 'NOT ready for reads',
    table.allReplicasReady ? 'all replicas ready' : 'NOT all replicas ready',
  ];
  const rows = table.shards.map((shard) => [
    shard.index,
    shard.primary,
    shard.acting.length > 0 ? shard.acting.join(', ') : 'none',
    shard.replicas.map(replicaLabel).join(', '),
    `${shard.replicas.filter((r) => r.state === 'ready').length}/${shard.replicas.length}`,
  ]);
  return [`${table.table}: ${readiness.join(', ')}`, ...formatTable(['SHARD', 'PRIMARY', 'ACTING', 'REPLICAS', 'READY'], rows)];
}

// A replica's name, with its state when it is not ready and a mark when it does not vote.
function replicaLabel(replica) {
  const marks = [...(replica.state === 'ready' ? [] : [replica.state]), ...(replica.voting ? [] : ['nonvoting'])];
  return marks.length > 0 ? `${replica.server} (${marks.join(', ')})` : replica.server;
}

function formatServers(cluster) {
  const placed = Array.isArray(cluster.pods);
  const headers = ['SERVER', 'CONNECTED', 'ROLE', 'PRIMARIES', 'REPLICAS', ...(placed ? ['POD', 'NODE'] : []), 'DRAINING'];
  const rows = cluster.servers.map((s) => [
    s.name,
    s.connected ? 'yes' : 'NO',
    roleOf(s),
    s.primaries,
    s.replicas,
    ...(placed ? [s.pod, s.node] : []),
    s.draining ? drainingLabel(s.drainingReason, s.drainingSince) : 'no',
  ]);
  return formatTable(headers, rows);
}

function roleOf(server) {
  if (server.primaries > 0) return 'primary';
  return server.replicas > 0 ? 'replica' : 'none';
}

function drainingLabel(reason, since) {
  return `yes${reason ? `: ${reason}` : ''}${since ? ` (since ${time(since)})` : ''}`;
}

// What else needs attention: marks on servers that are gone, perf warnings, backfills, running operations.
function statusNotes(cluster) {
  const notes = [];
  for (const d of cluster.draining ?? []) {
    if (d.present === false) notes.push(`draining mark on ${d.server}, no longer in the cluster: ${drainingLabel(d.reason, d.since)}`);
  }
  for (const w of cluster.perfWarnings ?? []) {
    const what = [w.reason, w.decision].filter(Boolean).join('; ');
    notes.push(`perf warning on ${w.serverName}${w.pod ? ` (pod ${w.pod})` : ''}${what ? `: ${what}` : ''}${w.expiresAt ? `, until ${time(w.expiresAt)}` : ''}`);
  }
  for (const b of cluster.backfills ?? []) {
    notes.push(`backfill of ${b.table} from ${b.from ?? '?'} to ${b.to ?? '?'}${typeof b.progress === 'number' ? `: ${Math.round(b.progress * 100)}%` : ''}`);
  }
  for (const o of cluster.runningOperations ?? []) notes.push(`running operation ${o.id} (${o.kind})`);
  if (cluster.pods === null && cluster.podsError) notes.push(`pods unknown: ${cluster.podsError}`);
  return notes;
}

// An action's report (or a dry run's plan): the outcome, then every change, skip and leftover.
export function formatReport(report) {
  const lines = [reportHeadline(report)];
  if (report.operation) {
    lines.push(`operation ${report.operation.id}: ${report.operation.status} (follow it with: rethinkdb-manager operations ${report.operation.id})`);
  }
  if (Array.isArray(report.changes)) {
    if (report.changes.length === 0) lines.push(report.dryRun ? 'no changes planned' : 'no changes');
    else lines.push(...formatTable(['TABLE', 'SHARD', 'KIND', 'FROM', 'TO'], report.changes.map((c) => [c.table, c.shard, c.kind, c.from, c.to])));
  }
  lines.push(...itemLines('skipped', report.skipped), ...itemLines('not done', report.notDone), ...itemLines('pending', report.pending));
  if (report.unmappedPods?.length > 0) lines.push(...report.unmappedPods.map((p) => `unmapped pod ${p.pod}: ${p.reason}`));
  if (report.rebalance) lines.push('', ...formatReport(report.rebalance));
  return lines;
}

function reportHeadline(report) {
  const target = targetText(report.target);
  const parts = [`${report.action}${target ? ` ${target}` : ''}: ${report.outcome ?? 'started'}`];
  if (report.dryRun) parts.push(' (dry run: nothing changed)');
  else if (typeof report.durationMs === 'number') parts.push(` in ${report.durationMs} ms`);
  if (typeof report.wasDraining === 'boolean') parts.push(report.wasDraining ? ' (was draining)' : ' (was not draining)');
  return parts.join('');
}

function itemLines(label, items) {
  return (items ?? []).map((item) => {
    const where = [item.table ?? item.tableId, item.shard !== undefined && item.shard !== null ? `shard ${item.shard}` : null].filter(Boolean).join(' ');
    return `${label}: ${where ? `${where}: ` : ''}${item.reason ?? ''}`.trimEnd();
  });
}

export function formatOperations({ operations }) {
  if (operations.length === 0) return ['no operations (they are kept in memory: a restart of the manager forgets them)'];
  return formatTable(['ID', 'KIND', 'STATUS', 'CREATED', 'FINISHED'], operations.map((o) => [o.id, o.kind, o.status, time(o.createdAt), time(o.finishedAt)]));
}

export function formatOperation(op) {
  const lines = [
    `operation ${op.id}: ${op.kind}, ${op.status}`,
    `created ${time(op.createdAt)}${op.finishedAt ? `, finished ${time(op.finishedAt)}` : ''}`,
  ];
  if (op.error) lines.push(`error: ${typeof op.error === 'string' ? op.error : op.error.message ?? JSON.stringify(op.error)}`);
  if (op.steps?.length > 0) {
    const rows = op.steps.map((s) => [s.table, s.shard, s.kind, s.from, s.to, s.status, typeof s.progress === 'number' ? `${Math.round(s.progress * 100)}%` : null, s.error]);
    lines.push('', ...formatTable(['TABLE', 'SHARD', 'KIND', 'FROM', 'TO', 'STATUS', 'PROGRESS', 'ERROR'], rows));
  }
  if (op.report) lines.push('', ...formatReport(op.report));
  return lines;
}

export function formatEvents({ events }) {
  if (events.length === 0) return ['no events'];
  const rows = events.map((e) => [time(e.time), e.actorLabel ?? e.actor, e.action, targetText(e.target), e.outcome, e.reason]);
  return formatTable(['TIME', 'ACTOR', 'ACTION', 'TARGET', 'OUTCOME', 'REASON'], rows);
}

function targetText(target) {
  if (!target || typeof target !== 'object') return '';
  return Object.entries(target).map(([key, value]) => `${key}=${Array.isArray(value) ? value.join(',') : value}`).join(' ');
}

// ISO times without milliseconds: a terminal column, not a log.
function time(iso) {
  return typeof iso === 'string' ? iso.replace(/\.\d+Z$/, 'Z') : iso;
}
