// Prometheus metrics of one manager, in base units, on a registry of its own (never prom-client's global one,
// so that tests can build many managers). The recorders take the manager's own shapes: an audit record, a
// hook's answer, a monitor poll, a cluster snapshot with the draining marks.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { VERSION } from '../lib/version.js';
import { countPrimaries, countReplicas } from '../planner/eligibility.js';

const DEFAULT_METRICS_PREFIX = 'rethinkdb_manager_';
// Primary moves take milliseconds to seconds; data moves (backfills) take minutes.
const ACTION_DURATION_BUCKETS_SECONDS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const SIGNALS = ['own', 'interference'];
// Reads answer in milliseconds; a PRESTOP or an action waits up to its deadline (20 s and 60 s by default).
const HTTP_DURATION_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60];
// prom-client's default gauges whose names end in _total, which Prometheus reserves for counters.
const LINT_FAILING_DEFAULTS = ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'];

// processMetrics adds prom-client's process metrics (CPU, memory, event-loop lag, GC) under the same prefix.
// They install process-wide observers that are never removed, so only the entry point turns them on.
export function createMetrics({ prefix = DEFAULT_METRICS_PREFIX, processMetrics = false } = {}) {
  const registry = new Registry();
  const registers = [registry];
  const counter = (name, help, labelNames = []) => new Counter({ name: prefix + name, help, labelNames, registers });
  const gauge = (name, help, labelNames = []) => new Gauge({ name: prefix + name, help, labelNames, registers });

  const hookRequests = counter('hook_requests_total', 'Lifecycle-hook and PERFWARNING requests answered, by hook and outcome (the result\'s outcome, or the error code in lower case).', ['hook', 'outcome']);
  const actions = counter('actions_total', 'Actions taken (one per audit record), by action, kind of actor and outcome.', ['action', 'actor', 'outcome']);
  const actionDuration = new Histogram({
    name: `${prefix}action_duration_seconds`, help: 'How long audited actions took, from planning to settled (or the deadline).',
    labelNames: ['action'], buckets: ACTION_DURATION_BUCKETS_SECONDS, registers,
  });
  const monitorPolls = counter('monitor_polls_total', 'Monitor polls that ran, failed ones included (an overlapping poll is skipped, not counted).');
  const monitorPollFailures = counter('monitor_poll_failures_total', 'Monitor polls that failed (metrics API or Kubernetes API errors).');
  const monitorDecisions = counter('monitor_decisions_total', 'Monitor decisions (raise, clear, scale-out, scale-out-suppressed), by whether applying them worked.', ['decision', 'outcome']);
  const hotspotDetections = counter('hotspot_detections_total', 'Polls in which a pod was found hot, by pod and signal (raising needs several in a row).', ['pod', 'signal']);
  const podUtilization = gauge('pod_utilization_ratio', 'Each pod\'s utilization U at the last successful poll: own (CPU use / limit) or interference (node CPU use / allocatable).', ['pod', 'signal']);
  const serverPrimaries = gauge('server_primaries', 'Shards whose configured primary is this server.', ['server']);
  const serverReplicas = gauge('server_replicas', 'Shard replicas (voting or not) configured on this server.', ['server']);
  const serverDraining = gauge('server_draining', '1 if the server has a draining mark, 0 if it is in the cluster without one.', ['server']);
  const drainingServers = gauge('draining_servers', 'Servers with a draining mark (including marked servers no longer in the cluster).');
  const perfWarnings = gauge('perf_warnings', 'Active PERFWARNINGs.');
  const leader = gauge('leader', '1 while this replica leads (or is the only one: LEADER_ELECTION_ENABLED off, or no Kubernetes API), else 0.');
  const leaderTransitions = counter('leader_transitions_total', 'Times this replica started or stopped leading.', ['change']);
  const prestopMajorityWaits = counter('prestop_majority_waits_total', 'PRESTOPs that waited, before demoting, because stopping the server would have left a shard without a ready voting majority, by outcome (waited: the majority came back; gave_up: the budget ran out; unread: the cluster could not be read, so the wait ended).', ['outcome']);
  const prestopMajorityWaitSeconds = counter('prestop_majority_wait_seconds_total', 'Seconds PRESTOPs spent waiting for a ready voting majority, by outcome.', ['outcome']);
  const podReplicasReady = gauge('pod_replicas_ready', 'The readiness gate the manager sets on each RethinkDB pod that has one: 1 when its server is connected and every replica it holds is ready (or it was held past READINESS_MAX_WAIT_SECONDS), else 0.', ['pod']);
  const workQueueDepth = gauge('work_queue_depth', 'Keys waiting in a work queue (not those delayed, nor the one being reconciled).', ['queue']);
  const workQueueAdds = counter('work_queue_adds_total', 'Keys added to a work queue (a key already waiting is not counted again).', ['queue']);
  const workQueueRetries = counter('work_queue_retries_total', 'Keys added back after a failed reconcile, to wait for their backoff.', ['queue']);
  const workQueueWait = new Histogram({
    name: `${prefix}work_queue_wait_seconds`, help: 'How long a key waited in a work queue before its reconcile started.', labelNames: ['queue'], buckets: ACTION_DURATION_BUCKETS_SECONDS, registers,
  });
  const workQueueReconcile = new Histogram({
    name: `${prefix}work_queue_reconcile_seconds`, help: 'How long a work queue\'s reconciles took, by outcome (done, failed).', labelNames: ['queue', 'outcome'], buckets: ACTION_DURATION_BUCKETS_SECONDS, registers,
  });
  const suspectedServers = gauge('suspected_servers', 'Servers whose probe has waited SUSPICION_AFTER_MS or more (silent to the manager), at the last look.');
  const suspicionHolds = counter('suspicion_holds_total', 'Holds of a silent server\'s tables on the query gates, by how they ended (failed_over: other servers act for them; dropped: RethinkDB no longer lists the server, its failover under way; answered: the server answers again; ttl: SUSPICION_HOLD_TTL_MS passed; not_taken: no gate held them).', ['how']);
  const suspicionHoldSeconds = counter('suspicion_hold_seconds_total', 'Seconds the suspicion holds lasted, by how they ended.', ['how']);
  const lostServers = gauge('lost_servers', 'Servers the table configs name that are disconnected, at the last look of the loss-restore key (each restored around after LOSS_RESTORE_AFTER_SECONDS).');
  const probeLatency = gauge('probe_latency_seconds', 'The latency trigger\'s last window: how long each server took to answer the manager\'s probes, by server, signal (reply: r.expr(1); disk: a durable write to a table on it alone) and quantile (0.5, 0.9).', ['server', 'signal', 'quantile']);
  const probeLatencyBaseline = gauge('probe_latency_baseline_seconds', 'Each server\'s learned baseline of its windows\' p90 probe latency, by signal (the latency trigger compares each window with it).', ['server', 'signal']);
  const latencyDecisions = counter('latency_decisions_total', 'The latency trigger\'s decisions (raise, clear), by whether applying them worked.', ['decision', 'outcome']);
  const lossRestores = counter('loss_restores_total', 'Lost servers whose replicas the manager started recreating on the other servers (LOSS_RESTORE_AFTER_SECONDS).');
  const setupFindings = gauge('setup_findings', 'What the manager needs from the RethinkDB StatefulSet\'s pod template and found missing at its last check (docs/existing-statefulset.md), 1 per missing piece, by check.', ['check']);
  const handBacksOwed = gauge('hand_backs_owed', 'Servers that came back during a rollout and are owed their primaries at its end.');
  const queryHolds = counter('query_holds_total', 'Holds taken on the query gates around a table_config write that moved primaries, by how they ended (handed_over: no old primary acted any more; late: taken after the write (GATE_HOLD_DELAY_MS), it found no old primary acting at its first read, so it may have come too late; ttl: GATE_HOLD_TTL_MS passed first; write_failed; not_taken: no gate was held; skipped: the deadline left no time).', ['how']);
  const queryHoldSeconds = counter('query_hold_seconds_total', 'Seconds the query gates held queries for the manager, by how the holds ended.', ['how']);
  const queryGates = gauge('query_gates', 'The query gates as the last hold (or the check when this replica started leading) found them: reached, or failed (refused the token, did not answer, or could not be listed).', ['state']);
  const clusterScrapeSuccess = gauge('cluster_scrape_success', '1 if this scrape read the cluster from the data store in time, else 0 (and no per-server primaries or replicas).');

  const httpRequests = counter('http_requests_total', 'HTTP requests answered, by method, route template (unmatched for no route) and status code (aborted when the caller hung up first).', ['method', 'route', 'code']);
  const httpDuration = new Histogram({
    name: `${prefix}http_request_duration_seconds`, help: 'How long HTTP requests took to answer, by method and route template.',
    labelNames: ['method', 'route'], buckets: HTTP_DURATION_BUCKETS_SECONDS, registers,
  });
  const buildInfo = gauge('build_info', 'Always 1: the manager\'s version and the Node.js version it runs on, as labels.', ['version', 'node_version']);
  buildInfo.set({ version: VERSION, node_version: process.version }, 1);
  if (processMetrics) {
    collectDefaultMetrics({ register: registry, prefix });
    // Gauges named _total break the naming rules (promtool check metrics rejects them); the per-type gauges stay.
    for (const name of LINT_FAILING_DEFAULTS) registry.removeSingleMetric(prefix + name);
  }

  function recordHook({ hook, outcome }) {
    hookRequests.inc({ hook, outcome });
  }

  // actorLabel: the actor's label (src/audit/actor.js), without the pod a hook names.
  function recordAction({ action, actorLabel, outcome, durationMs }) {
    actions.inc({ action, actor: actorLabel ?? 'unknown', outcome });
    if (Number.isFinite(durationMs)) actionDuration.observe({ action }, durationMs / 1000);
  }

  function recordPoll({ evaluation, decisions }) {
    monitorPolls.inc();
    for (const hot of evaluation.hot) hotspotDetections.inc({ pod: hot.pod, signal: hot.signal });
    podUtilization.reset();
    for (const sample of evaluation.samples) {
      for (const signal of SIGNALS) {
        if (Number.isFinite(sample[signal])) podUtilization.set({ pod: sample.pod, signal }, sample[signal]);
      }
    }
    for (const d of decisions) monitorDecisions.inc({ decision: d.type, outcome: d.error ? 'error' : 'ok' });
  }

  function recordPollFailure() {
    monitorPolls.inc();
    monitorPollFailures.inc();
  }

  // Reset first, so that a server that left the cluster (or a mark that was released) leaves no series behind.
  // cluster is null when it could not be read: the marks (kept in memory) are still reported.
  function setClusterState({ cluster, draining, perfWarnings: warnings }) {
    for (const g of [serverPrimaries, serverReplicas, serverDraining]) g.reset();
    drainingServers.set(draining.length);
    perfWarnings.set(warnings.length);
    clusterScrapeSuccess.set(cluster ? 1 : 0);
    for (const mark of draining) serverDraining.set({ server: mark.serverName }, 1);
    if (!cluster) return;
    const primaries = countPrimaries(cluster.tables);
    const replicas = countReplicas(cluster.tables);
    const marked = new Set(draining.map((d) => d.serverId));
    for (const s of cluster.servers) {
      serverPrimaries.set({ server: s.name }, primaries.get(s.id) ?? 0);
      serverReplicas.set({ server: s.name }, replicas.get(s.id) ?? 0);
      if (!marked.has(s.id)) serverDraining.set({ server: s.name }, 0);
    }
  }

  return {
    registry,
    contentType: registry.contentType,
    render: () => registry.metrics(),
    recordHook, recordAction, recordPoll, recordPollFailure, setClusterState,
    recordPrestopWait({ outcome, seconds }) {
      prestopMajorityWaits.inc({ outcome });
      prestopMajorityWaitSeconds.inc({ outcome }, seconds);
    },
    // readiness: [{ pod, ready }] for every gated pod (reset first: a pod gone leaves no series).
    setPodReadiness(readiness) {
      podReplicasReady.reset();
      for (const { pod, ready } of readiness) podReplicasReady.set({ pod }, ready ? 1 : 0);
    },
    setHandBacksOwed(count) { handBacksOwed.set(count); },
    setSuspectedServers(count) { suspectedServers.set(count); },
    // servers: the latency trigger's view rows (reset first: a server gone leaves no series); decisions: as applied.
    recordLatencyWindow({ servers, decisions }) {
      for (const g of [probeLatency, probeLatencyBaseline]) g.reset();
      for (const s of servers) {
        const { server, signal } = s;
        if (s.p50Ms !== null) probeLatency.set({ server, signal, quantile: '0.5' }, s.p50Ms / 1000);
        if (s.p90Ms !== null) probeLatency.set({ server, signal, quantile: '0.9' }, s.p90Ms / 1000);
        if (s.baselineMs !== null) probeLatencyBaseline.set({ server, signal }, s.baselineMs / 1000);
      }
      for (const d of decisions) latencyDecisions.inc({ decision: d.type, outcome: d.error ? 'error' : 'ok' });
    },
    setLostServers(count) { lostServers.set(count); },
    // findings: src/policy/attachment.js's (reset first: a piece added since leaves no series).
    setSetupFindings(findings) {
      setupFindings.reset();
      for (const { check } of findings) setupFindings.set({ check }, 1);
    },
    countLossRestore() { lossRestores.inc(); },
    suspicionHoldEnded(how, ms) {
      suspicionHolds.inc({ how });
      suspicionHoldSeconds.inc({ how }, ms / 1000);
    },
    workQueueDepth(queue, depth) { workQueueDepth.set({ queue }, depth); },
    workQueueAdded(queue) { workQueueAdds.inc({ queue }); },
    workQueueRetried(queue) { workQueueRetries.inc({ queue }); },
    workQueueReconciled(queue, outcome, waitedSeconds, tookSeconds) {
      workQueueWait.observe({ queue }, Math.max(0, waitedSeconds));
      workQueueReconcile.observe({ queue, outcome }, Math.max(0, tookSeconds));
    },
    queryHoldEnded(how, ms) {
      queryHolds.inc({ how });
      queryHoldSeconds.inc({ how }, ms / 1000);
    },
    queryGatesSeen(reached, failed) {
      queryGates.set({ state: 'reached' }, reached);
      queryGates.set({ state: 'failed' }, failed);
    },
    setLeading(leading) { leader.set(leading ? 1 : 0); },
    recordLeaderChange(change) { leaderTransitions.inc({ change }); },
    recordHttpRequest({ method, route, code, seconds }) {
      httpRequests.inc({ method, route, code });
      httpDuration.observe({ method, route }, seconds);
    },
  };
}

// A hook request's outcome: the error code (lower case) when it failed, 'aborted' when the caller went away
// before the answer, else what the hook did.
export function hookOutcome(hook, statusCode, body) {
  if (statusCode === null) return 'aborted';
  if (statusCode >= 400) return typeof body?.error === 'string' ? body.error.toLowerCase() : `http_${statusCode}`;
  if (hook === 'poststart') return body?.repeated ? 'repeated' : 'accepted';
  if (hook === 'perfwarning') return (body?.pods ?? []).some((p) => p.server) ? 'raised' : 'nothing_to_do';
  if (hook === 'perfwarning_end') return 'ended';
  return typeof body?.outcome === 'string' ? body.outcome : 'ok';
}
