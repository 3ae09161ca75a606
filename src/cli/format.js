// Pure: the manager's JSON answers as text for a terminal. Each function takes a parsed body and returns lines.

// Columns padded to their widest cell, two spaces apart, no trailing blanks.
export function formatTable(headers, rows) {
  const cells = [headers, ...rows].map((row) => row.map((c) => (c === null || c === undefined || c === '' ? '-' : String(c))));
  const widths = headers.map((_, i) => Math.max(...cells.map((row) => row[i].length)));
  return cells.map((row) => row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  ').trimEnd());
}

export function formatAnswer(parsed, body) {
  if (parsed.action) return formatReport(body);
  switch (parsed.command) {
    case 'status': return formatStatus(body);
    case 'perf-warning': return parsed.perfWarning.step === 'raise' ? formatPerfWarning(body) : formatPerfWarningEnd(body);
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

// An action's report (or a dry run's plan): the outcome, then every change, skip and leftover, then the reports it
// contains (a release's rebalance, a migration's demotion first, the primaries an add-server plans after its moves).
export function formatReport(report) {
  const lines = [reportHeadline(report)];
  if (report.decision?.reason) lines.push(`decision: ${report.decision.reason}`);
  if (report.operation) lines.push(operationLine(report.operation.id, report.operation.status));
  if (typeof report.operationId === 'string') lines.push(`the work ran as operation ${report.operationId} (show it with: rethinkdb-manager operations ${report.operationId})`);
  if (Array.isArray(report.changes)) {
    if (report.changes.length === 0) lines.push(report.dryRun ? 'no changes planned' : 'no changes');
    else lines.push(...formatTable(['TABLE', 'SHARD', 'KIND', 'FROM', 'TO'], report.changes.map((c) => [c.table, c.shard, c.kind, c.from, c.to])));
  }
  lines.push(...itemLines('skipped', report.skipped), ...itemLines('not done', report.notDone), ...itemLines('pending', report.pending));
  if (report.unmappedPods?.length > 0) lines.push(...report.unmappedPods.map((p) => `unmapped pod ${p.pod}: ${p.reason}`));
  if (report.draining?.length > 0) {
    lines.push(`${report.dryRun ? 'would mark' : 'marked'} draining: ${report.draining.join(', ')} (no primary goes to ${report.draining.length > 1 ? 'them' : 'it'} until: rethinkdb-manager release-server SERVER)`);
  }
  for (const inner of [report.demotion, report.rebalance, report.primaries]) {
    if (inner && typeof inner === 'object') lines.push('', ...formatReport(inner));
  }
  return lines;
}

// An operation that runs on in the manager, and how to follow it.
function operationLine(id, status) {
  return `operation ${id}: ${status} (follow it with: rethinkdb-manager operations ${id} --wait)`;
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

// GET /v1/operations lists them as they were started; the newest come first here.
export function formatOperations({ operations }) {
  if (operations.length === 0) return ['no operations (they are kept in memory: a restart of the manager forgets them)'];
  const newestFirst = operations.map((o, i) => ({ o, i }))
    .sort((a, b) => String(b.o.createdAt ?? '').localeCompare(String(a.o.createdAt ?? '')) || b.i - a.i)
    .map(({ o }) => o);
  return formatTable(['ID', 'KIND', 'STATUS', 'CREATED', 'FINISHED'], newestFirst.map((o) => [o.id, o.kind, o.status, time(o.createdAt), time(o.finishedAt)]));
}

// GET /v1/operations/ID: what the operation is (its kind and what it was started on), its steps, then its report.
export function formatOperation(op) {
  const target = targetText(op.params);
  const lines = [
    `operation ${op.id}: ${op.kind}${target ? ` ${target}` : ''}, ${op.status}`,
    `created ${time(op.createdAt)}${op.finishedAt ? `, finished ${time(op.finishedAt)}` : ''}`,
  ];
  if (op.error) lines.push(`error: ${typeof op.error === 'string' ? op.error : op.error.message ?? JSON.stringify(op.error)}`);
  if (op.steps?.length > 0) lines.push('', ...formatSteps(op.steps));
  if (op.report) lines.push('', ...formatReport(operationReport(op)));
  return lines;
}

// A replica move's steps (per shard), or a POSTSTART's (named steps).
function formatSteps(steps) {
  if (steps.every((s) => typeof s.step === 'string')) return formatTable(['STEP', 'STATUS', 'DETAIL'], steps.map((s) => [s.step, s.status, s.detail]));
  const rows = steps.map((s) => [s.step ?? s.table, s.shard, s.kind, s.from, s.to, s.status, typeof s.progress === 'number' ? `${Math.round(s.progress * 100)}%` : null, s.error]);
  return formatTable(['TABLE', 'SHARD', 'KIND', 'FROM', 'TO', 'STATUS', 'PROGRESS', 'ERROR'], rows);
}

// An operation's report names its action and target; a POSTSTART's result names neither (it has the event, the pod
// and the server), so the operation's kind and parameters stand in, and the lists it repeats from its rebalance are
// shown once, under the rebalance.
function operationReport(op) {
  const { report } = op;
  const target = report.target ?? (report.pod ? { pod: report.pod, ...(report.server ? { server: report.server } : {}) } : op.params);
  const repeated = report.rebalance ? { changes: undefined, skipped: undefined, notDone: undefined } : {};
  return { ...report, action: report.action ?? op.kind, target, ...repeated };
}

// POST /v1/hooks/perfwarning: the decision, each warned pod, then the demotion (one plan for all of them), the Raft
// leadership moves and the migrations a long warning starts.
export function formatPerfWarning(result) {
  const lines = [`perf warning raised on ${targetText(result.target)}${result.source ? ` by ${result.source}` : ''}: ${result.decision?.reason ?? ''}`.trimEnd()];
  if (result.decision?.actions?.length > 0) lines.push(`actions: ${result.decision.actions.join(', ')}`);
  const pods = result.pods ?? [];
  if (pods.length === 0) return [...lines, 'no RethinkDB pod warned'];
  lines.push(...formatTable(['POD', 'SERVER', 'OUTCOME', 'UNTIL', 'MIGRATION'], pods.map((p) => [p.pod, p.server, p.outcome, time(p.expiresAt), p.migration?.id])));
  const demotions = [...new Set(pods.map((p) => p.demotion).filter(Boolean))];
  for (const report of [...demotions, ...pods.map((p) => p.raftLeadership).filter(Boolean)]) lines.push('', ...formatReport(report));
  const migrations = pods.filter((p) => p.migration);
  if (migrations.length > 0) lines.push('', ...migrations.map((p) => operationLine(p.migration.id, p.migration.status)));
  for (const p of pods.filter((x) => x.reason && !x.demotion)) lines.push(`${p.pod}: ${p.reason}`);
  return lines;
}

// DELETE /v1/hooks/perfwarning: the warning of one pod (or of each pod on a node) ended, and how primaries come back.
export function formatPerfWarningEnd(result) {
  if (Array.isArray(result.pods)) {
    const lines = [`perf warnings ended on node ${result.node}: ${result.reason ?? ''}`.trimEnd()];
    for (const ended of result.pods) lines.push('', ...formatPerfWarningEnd(ended));
    return lines;
  }
  const lines = [`perf warning ended on pod ${result.pod}: ${result.reason ?? ''}`.trimEnd()];
  const { restore } = result;
  if (!restore) return lines;
  lines.push(`restore: ${restore.action}${restore.outcome ? `, ${restore.outcome}` : ''}${restore.reason ? ` (${restore.reason})` : ''}`);
  if (restore.operation) lines.push(operationLine(restore.operation.id, restore.operation.status));
  if (restore.changes?.length > 0) lines.push(...formatTable(['TABLE', 'SHARD', 'KIND', 'FROM', 'TO'], restore.changes.map((c) => [c.table, c.shard, c.kind, c.from, c.to])));
  return lines;
}

export function formatEvents({ events }) {
  if (events.length === 0) return ['no events'];
  const rows = events.map((e) => [time(e.time), e.actorLabel ?? e.actor, e.action, targetText(e.target), e.outcome, e.reason]);
  return formatTable(['TIME', 'ACTOR', 'ACTION', 'TARGET', 'OUTCOME', 'REASON'], rows);
}

function targetText(target) {
  if (!target || typeof target !== 'object') return '';
  return Object.entries(target).filter(([, value]) => value !== null && value !== undefined)
    .map(([key, value]) => `${key}=${Array.isArray(value) ? value.join(',') : value}`).join(' ');
}

// ISO times without milliseconds: a terminal column, not a log.
function time(iso) {
  return typeof iso === 'string' ? iso.replace(/\.\d+Z$/, 'Z') : iso;
}
