// The status page's browser script, inlined into status-page.html. It polls the manager's own JSON read
// endpoints and redraws with createElement, setAttribute and text nodes only, so no server data is ever parsed as HTML.
'use strict';

(function statusPage() {
  const DEFAULT_REFRESH_MS = 2000;
  const MIN_REFRESH_MS = 250;
  const MAX_REFRESH_MS = 60000;
  const FETCH_TIMEOUT_MS = 10000;
  const MAX_DETAILED_OPERATIONS = 10;
  const MAX_FINISHED_OPERATIONS = 5;
  const MAX_EVENTS = 20;

  const refreshMs = refreshIntervalMs(new URLSearchParams(window.location.search).get('refreshMs'));
  // The API's paths relative to where the page was opened, so that the page works behind a path prefix (an ingress
  // or kubectl proxy serving the manager at /some/prefix/): /some/prefix or /some/prefix/ -> /some/prefix/v1/...
  const apiBase = window.location.pathname.endsWith('/') ? window.location.pathname : `${window.location.pathname}/`;
  // The last good answer of each endpoint, kept on screen when a later fetch fails.
  const last = { cluster: null, operations: null, events: null, monitor: null, details: new Map(), at: null };

  function refreshIntervalMs(raw) {
    const n = Number(raw);
    if (raw === null || raw === '' || !Number.isFinite(n)) return DEFAULT_REFRESH_MS;
    return Math.min(MAX_REFRESH_MS, Math.max(MIN_REFRESH_MS, Math.round(n)));
  }

  // One GET: { ok: true, data } or { ok: false, problem } with a sentence for the banner.
  async function getJson(relative) {
    const path = `${apiBase}${relative}`;
    let res;
    try {
      res = await fetch(path, {
        credentials: 'same-origin', cache: 'no-store', headers: { accept: 'application/json' },
        signal: AbortSignal.timeout(FETCH_TIMEOUT_MS),
      });
    } catch (err) {
      return { ok: false, status: 0, problem: `GET ${path}: cannot reach the manager (${err.name === 'TimeoutError' ? `no answer within ${FETCH_TIMEOUT_MS} ms` : err.message})` };
    }
    const body = await res.json().catch(() => null);
    if (res.ok && body !== null) return { ok: true, status: res.status, data: body };
    if (res.status === 401 || res.status === 403) {
      return { ok: false, status: res.status, problem: `read endpoints are protected; GET ${path} answered ${res.status}. This page sends only the browser's own same-origin credentials: open it through something that authenticates you, or allow reads without a token.` };
    }
    const code = body && typeof body.error === 'string' ? ` ${body.error}` : '';
    const message = body && typeof body.message === 'string' ? `: ${body.message}` : (res.ok ? ': the answer is not JSON' : '');
    return { ok: false, status: res.status, problem: `GET ${path} answered ${res.status}${code}${message}` };
  }

  async function refresh() {
    const problems = [];
    const keep = (key, result, { optional404 = false } = {}) => {
      if (result.ok) last[key] = result.data;
      else if (optional404 && result.status === 404) last[key] = null;
      else problems.push(result.problem);
    };
    const [cluster, operations, events, monitor] = await Promise.all([
      getJson('v1/cluster'), getJson('v1/operations'), getJson('v1/events'), getJson('v1/monitor'),
    ]);
    keep('cluster', cluster);
    keep('operations', operations);
    keep('events', events);
    keep('monitor', monitor, { optional404: true }); // a manager without a monitor answers 404 here
    if (operations.ok) await refreshOperationDetails(problems);
    if (problems.length === 0) last.at = new Date();
    render(problems);
  }

  // The running operations' steps and progress come from GET /v1/operations/:id.
  async function refreshOperationDetails(problems) {
    const running = (last.operations.operations || []).filter((o) => o.status === 'running').slice(-MAX_DETAILED_OPERATIONS);
    const results = await Promise.all(running.map((o) => getJson(`v1/operations/${encodeURIComponent(o.id)}`)));
    const details = new Map();
    running.forEach((o, i) => {
      if (results[i].ok) details.set(o.id, results[i].data);
      else if (results[i].status === 404) return; // finished and trimmed since the list was read
      else {
        problems.push(results[i].problem);
        if (last.details.has(o.id)) details.set(o.id, last.details.get(o.id));
      }
    });
    last.details = details;
  }

  // h('td', { class: 'x', 'data-server': name }, 'text', childNode): attributes by setAttribute, text as text nodes.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (/^on/i.test(name) || name === 'style') throw new Error(`status page: refusing attribute ${name}`);
      el.setAttribute(name, value === true ? '' : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const empty = (text) => h('p', { class: 'empty' }, text);
  const flag = (text, kind, title) => h('span', { class: `flag ${kind || ''}`.trim(), title }, text);
  const time = (iso) => (iso ? h('time', { datetime: iso, title: iso }, formatTime(iso)) : '');
  const pct = (x) => (typeof x === 'number' && Number.isFinite(x) ? `${Math.round(x * 100)}%` : '?');

  function formatTime(iso) {
    const d = new Date(iso);
    return Number.isNaN(d.getTime()) ? String(iso) : d.toISOString().replace('T', ' ').slice(0, 19);
  }

  function describeTarget(target) {
    if (target === null || target === undefined) return '';
    if (typeof target !== 'object') return String(target);
    return Object.entries(target).map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : typeof v === 'object' && v !== null ? JSON.stringify(v) : v}`).join(' ');
  }

  function fill(id, ...children) {
    document.getElementById(id).replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  }

  function render(problems) {
    renderBanner(problems);
    renderHeader();
    if (last.cluster) {
      const nodes = nodesByPod();
      fill('servers', serversTable(last.cluster, nodes));
      fill('shard-maps', shardMaps(last.cluster));
      fill('attention', attention(last.cluster));
    }
    if (last.operations) fill('operations', operationsView(last.operations.operations || []));
    if (last.events) fill('events', eventsTable(last.events.events || []));
  }

  function renderBanner(problems) {
    const banner = document.getElementById('banner');
    if (problems.length === 0) {
      banner.hidden = true;
      banner.replaceChildren();
      return;
    }
    const kept = last.at ? `showing the data from ${formatTime(last.at.toISOString())} UTC` : 'nothing loaded yet';
    banner.replaceChildren(
      h('span', {}, `Could not refresh (${kept}); retrying every ${refreshMs} ms.`),
      h('ul', {}, [...new Set(problems)].map((p) => h('li', {}, p))),
    );
    banner.hidden = false;
  }

  function renderHeader() {
    const c = last.cluster;
    // With several replicas: which one leads, and whether this page is served by it.
    const election = c && c.leadership;
    const leaderText = !election || !election.enabled ? '' : election.leading ? `; leader: this replica (${election.identity})` : `; leader: ${election.leader || 'none now'} (this replica follows)`;
    document.getElementById('backend').textContent = c ? `backend: ${c.backend}${leaderText}` : 'backend: unknown';
    document.getElementById('updated').textContent = last.at ? `updated ${formatTime(last.at.toISOString())} UTC` : 'not loaded yet';
    const monitor = c && c.monitor;
    const monitorText = !c ? '' : !monitor ? '; no monitor' : !monitor.enabled ? '; monitor off' : `; monitor polled ${monitor.lastPollAt ? `${formatTime(monitor.lastPollAt)} UTC` : 'not yet'}`;
    document.getElementById('refresh').textContent = `refresh every ${refreshMs} ms${monitorText}`;
    const notice = document.getElementById('notice');
    notice.textContent = c && c.notice ? c.notice : '';
    notice.hidden = !(c && c.notice);
  }

  // hostname -> node: from the cluster view's pods (read from Kubernetes), else from the monitor's last poll.
  function nodesByPod() {
    const fromMonitor = ((last.monitor && last.monitor.pods) || []).map((p) => [p.pod, p.node]);
    const fromCluster = ((last.cluster && last.cluster.pods) || []).map((p) => [p.hostname, p.node]);
    return new Map([...fromMonitor, ...fromCluster]);
  }

  function hotPods(cluster) {
    const hot = (cluster.monitor && cluster.monitor.hot) || [];
    return new Map(hot.map((x) => [x.pod, x]));
  }

  function perfWarnings(cluster) {
    return new Map((cluster.perfWarnings || []).map((w) => [w.serverName, w]));
  }

  function serversTable(cluster, nodes) {
    const servers = cluster.servers || [];
    if (servers.length === 0) return empty('no servers');
    const hot = hotPods(cluster);
    const warnings = perfWarnings(cluster);
    const rows = servers.map((s) => {
      // The view places each server, a disconnected one too (by the StatefulSet's naming); else its hostname.
      const pod = s.pod || s.hostname || null;
      const node = s.node || (pod ? nodes.get(pod) : undefined);
      const podByName = s.podBy === 'name';
      const isHot = pod ? hot.get(pod) : undefined;
      const warning = warnings.get(s.name);
      const flags = [
        s.connected ? flag('connected', 'ok') : flag('disconnected', 'bad'),
        s.draining ? flag('draining', 'draining', s.drainingReason ? `reason: ${s.drainingReason}` : undefined) : null,
        warning ? flag('perf warning', 'hot', warning.reason || warning.decision || undefined) : null,
        isHot ? flag(`hot (${isHot.signal})`, 'hot', isHot.raised ? 'the monitor raised a perf warning' : 'not raised yet') : null,
      ];
      return h('tr', {
        'data-testid': `server-${s.name}`, 'data-server': s.name, 'data-pod': pod, 'data-node': node,
        'data-connected': String(Boolean(s.connected)), 'data-draining': String(Boolean(s.draining)),
        'data-hot': String(Boolean(isHot || warning)),
        class: [s.draining ? 'draining' : '', s.connected ? '' : 'disconnected'].join(' ').trim() || null,
      },
      h('td', { class: 'mono' }, s.name),
      h('td', { class: 'mono', title: podByName ? 'disconnected: its pod by the StatefulSet\'s naming (rethinkdb-N runs rethinkdb_N)' : null }, pod || '—'),
      h('td', { class: 'mono', title: node ? null : 'the Kubernetes API did not say' }, node || '—'),
      h('td', {}, flags),
      h('td', { class: 'num', 'data-testid': 'primaries' }, String(s.primaries)),
      h('td', { class: 'num', 'data-testid': 'replicas' }, String(s.replicas)));
    });
    return h('table', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'server'), h('th', {}, 'pod'), h('th', {}, 'node'), h('th', {}, 'state'),
        h('th', { class: 'num' }, 'primaries'), h('th', { class: 'num' }, 'replicas'))),
      h('tbody', {}, rows));
  }

  // One table per RethinkDB table: a row per shard, a column per server; P = configured primary, R = replica.
  function shardMaps(cluster) {
    const tables = cluster.tables || [];
    if (tables.length === 0) return empty('no managed tables');
    const servers = cluster.servers || [];
    const byName = new Map(servers.map((s) => [s.name, s]));
    return tables.map((t) => {
      const listed = t.shards.flatMap((sh) => [sh.primary, ...sh.replicas.map((r) => r.server)]).filter(Boolean);
      const columns = [...new Set([...servers.map((s) => s.name), ...listed])];
      const readiness = [
        flag(t.readyForWrites ? 'ready for writes' : 'NOT ready for writes', t.readyForWrites ? 'ok' : 'bad'),
        flag(t.readyForReads ? 'ready for reads' : 'NOT ready for reads', t.readyForReads ? 'ok' : 'bad'),
        flag(t.allReplicasReady ? 'all replicas ready' : 'replicas not all ready', t.allReplicasReady ? 'ok' : 'draining'),
      ];
      const head = h('tr', {}, h('th', {}, 'shard'), columns.map((name) => serverColumnHeader(name, byName.get(name))), h('th', {}, 'acting primary'));
      const rows = t.shards.map((sh) => h('tr', { 'data-shard': sh.index, 'data-primary': sh.primary },
        h('th', { scope: 'row' }, String(sh.index)),
        columns.map((name) => shardCell(t, sh, name)),
        h('td', { class: 'mono', 'data-testid': 'acting' }, sh.acting.length ? sh.acting.join(', ') : 'none')));
      return h('div', {},
        h('h3', {}, h('span', { class: 'mono' }, t.table), ' ', readiness),
        h('table', { class: 'shard-map', 'data-testid': 'shard-map', 'data-table': t.table }, h('thead', {}, head), h('tbody', {}, rows)));
    }).concat(
      h('p', { class: 'legend' }, 'P primary (configured), R voting replica, r nonvoting replica; dashed: replica not ready; a pale P is not acting yet.'),
      backfills(cluster.backfills || [], tables),
    );
  }

  function serverColumnHeader(name, server) {
    const draining = Boolean(server && server.draining);
    const disconnected = !server || !server.connected;
    const cls = ['server', 'mono', draining ? 'draining' : '', disconnected ? 'disconnected' : ''].join(' ').trim();
    const note = draining ? 'draining' : !server ? 'not in the cluster' : disconnected ? 'disconnected' : null;
    return h('th', { class: cls, 'data-server': name, 'data-draining': String(draining), title: note }, name, note ? h('div', { class: 'muted' }, note) : null);
  }

  function shardCell(table, shard, name) {
    const replica = shard.replicas.find((r) => r.server === name);
    const isPrimary = shard.primary === name;
    const role = isPrimary ? 'primary' : replica ? 'replica' : 'none';
    const text = isPrimary ? 'P' : replica ? (replica.voting ? 'R' : 'r') : '';
    const notReady = replica && replica.state !== 'ready';
    const notActing = isPrimary && !shard.acting.includes(name);
    const cls = ['cell', role === 'none' ? '' : role, replica && !replica.voting ? 'nonvoting' : '', notReady ? 'not-ready' : '', notActing ? 'not-acting' : ''].join(' ').trim();
    const title = replica ? `${name}: ${isPrimary ? 'primary' : 'replica'}, ${replica.voting ? 'voting' : 'nonvoting'}, ${replica.state}${notActing ? ', not acting as primary yet' : ''}` : null;
    return h('td', {
      class: cls, 'data-server': name, 'data-role': role, 'data-state': replica ? replica.state : null, title,
      'data-testid': `cell-${table.table}-${shard.index}-${name}`,
    }, text);
  }

  // RethinkDB lists a backfill job for a while after its replica is ready, with the last progress it reported
  // (often well short of 100%): such a job is shown as finished, not as a bar that disagrees with the shard map.
  function backfills(list, tables) {
    if (list.length === 0) return null;
    const readyIn = (b) => {
      const table = tables.find((t) => t.table === b.table);
      const replicas = table ? table.shards.flatMap((sh) => sh.replicas.filter((r) => r.server === b.to)) : [];
      return replicas.length > 0 && replicas.every((r) => r.state === 'ready');
    };
    return h('div', {}, h('h3', {}, 'Backfills'), h('ul', { class: 'plain', 'data-testid': 'backfills' }, list.map((b) => h('li', { 'data-ready': String(readyIn(b)) },
      h('span', { class: 'mono' }, `${b.table}: ${b.from || 'unknown source'} → ${b.to || 'unknown destination'} `),
      readyIn(b) ? h('span', { class: 'muted' }, 'replica ready, job closing') : progressBar(b.progress)))));
  }

  function progressBar(progress) {
    if (typeof progress !== 'number' || !Number.isFinite(progress)) return null;
    const clamped = Math.min(1, Math.max(0, progress));
    return h('span', {}, h('progress', { max: '1', value: String(clamped) }), ` ${pct(clamped)}`);
  }

  function attention(cluster) {
    const items = [];
    for (const d of cluster.draining || []) {
      items.push(h('li', { 'data-testid': 'draining-item', 'data-server': d.server },
        flag('draining', 'draining'), h('span', { class: 'mono' }, d.server), ' ', d.reason ? `— ${d.reason}` : '',
        d.since ? h('span', { class: 'muted' }, ' since ', time(d.since)) : null,
        d.present === false ? h('span', { class: 'muted' }, ' (no longer in the cluster)') : null));
    }
    for (const w of cluster.perfWarnings || []) {
      items.push(h('li', { 'data-testid': 'perfwarning-item', 'data-server': w.serverName },
        flag('perf warning', 'hot'), h('span', { class: 'mono' }, `${w.serverName}${w.pod ? ` (pod ${w.pod})` : ''}`), ' ',
        [w.reason, w.decision].filter(Boolean).join('; '), w.source ? h('span', { class: 'muted' }, ` — from ${w.source}`) : null,
        w.expiresAt ? h('span', { class: 'muted' }, ' until ', time(w.expiresAt)) : null));
    }
    for (const x of (cluster.monitor && cluster.monitor.hot) || []) {
      items.push(h('li', { 'data-testid': 'hot-item', 'data-pod': x.pod },
        flag('hot', 'hot'), h('span', { class: 'mono' }, x.pod), ` — signal: ${x.signal}${x.raised ? ', perf warning raised' : ''}`));
    }
    return items.length ? h('ul', { class: 'plain' }, items) : empty('nothing is draining or hot');
  }

  // Operations are the actions that run in the background (data moves); a primary move answers at once and shows only
  // under Recent events, which a new user looking here first did not know.
  const NO_FINISHED_OPERATION = 'none yet (only data moves run as operations; primary moves and hooks answer at once and are in Recent events below)';

  function operationsView(summaries) {
    const running = summaries.filter((o) => o.status === 'running');
    const finished = summaries.filter((o) => o.status !== 'running').slice(-MAX_FINISHED_OPERATIONS).reverse();
    return [
      h('h3', {}, `Running (${running.length})`),
      running.length ? running.map((o) => runningOperation(o, last.details.get(o.id))) : empty('no operation is running'),
      h('h3', {}, 'Recently finished'),
      finished.length ? h('ul', { class: 'plain', 'data-testid': 'finished-operations' }, finished.map((o) => h('li', { 'data-operation': o.id, 'data-status': o.status },
        h('span', { class: 'mono' }, o.kind), ' ', flag(o.status, o.status === 'succeeded' ? 'ok' : 'bad'), ' ',
        h('span', { class: 'muted' }, 'finished ', time(o.finishedAt), ` — ${o.id}`)))) : empty(NO_FINISHED_OPERATION),
    ];
  }

  function runningOperation(summary, op) {
    const steps = (op && op.steps) || [];
    const done = steps.filter((s) => /^done/.test(s.status)).length;
    return h('div', { class: 'op', 'data-testid': 'running-operation', 'data-operation': summary.id, 'data-kind': summary.kind },
      h('div', {}, h('span', { class: 'mono' }, summary.kind), ' ', describeTarget(op && op.params), ' ',
        h('span', { class: 'muted' }, 'started ', time(summary.createdAt))),
      steps.length ? h('div', {}, h('progress', { max: String(steps.length), value: String(done), 'data-testid': 'operation-progress' }), ` ${done} of ${steps.length} steps done`) : null,
      steps.length ? h('ol', {}, steps.map((s) => h('li', { 'data-status': s.status },
        h('span', { class: 'mono' }, stepLabel(s)), ' ', flag(s.status + (s.state && s.state !== s.status ? ` (${s.state})` : '')), ' ',
        /^done/.test(s.status) ? null : progressBar(s.progress), s.error ? h('span', { class: 'muted' }, ` — ${s.error}`) : null,
        s.detail ? h('span', { class: 'muted' }, ` — ${s.detail}`) : null))) : h('p', { class: 'muted' }, op ? 'no steps yet' : 'loading steps…'));
  }

  function stepLabel(step) {
    if (step.step) return step.step;
    if (step.table !== undefined) return `${step.table} shard ${step.shard}: ${step.from || '(new)'} → ${step.to}`;
    return describeTarget(step);
  }

  function eventsTable(events) {
    const shown = events.slice(0, MAX_EVENTS);
    if (shown.length === 0) return empty('no events yet');
    return h('table', {},
      h('thead', {}, h('tr', {}, ['time', 'actor', 'action', 'target', 'outcome', 'changes', 'reason'].map((c) => h('th', {}, c)))),
      h('tbody', {}, shown.map((e) => {
        const plan = e.plan || {};
        const changes = (plan.changes || []).map((c) => `${c.table}#${c.shard} ${c.kind} ${c.from || '∅'}→${c.to || '∅'}`);
        const notDone = (plan.skipped || []).length + (plan.notDone || []).length;
        return h('tr', { 'data-testid': 'event', 'data-action': e.action, 'data-outcome': e.outcome },
          h('td', { class: 'mono' }, time(e.time)),
          h('td', { class: 'mono' }, e.actor),
          h('td', { class: 'mono' }, e.action),
          h('td', { class: 'mono' }, describeTarget(e.target)),
          h('td', {}, flag(e.outcome, ['completed', 'nothing_to_do', 'planned', 'started'].includes(e.outcome) ? 'ok' : 'bad')),
          h('td', { class: 'mono' }, changes.length ? changes.join('; ') : '—', notDone ? h('span', { class: 'muted' }, ` (${notDone} not done)`) : null),
          h('td', {}, e.reason || ''));
      })));
  }

  // Never two refreshes at once: the next one is scheduled when this one has finished.
  async function loop() {
    try {
      await refresh();
    } catch (err) {
      renderBanner([`the page failed to draw the data: ${err.message}`]);
    }
    window.setTimeout(loop, refreshMs);
  }

  loop();
}());
