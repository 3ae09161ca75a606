// Wires the manager from its dependencies. Used by src/server.js with real clients and by tests with fakes.

import { createActions } from './actions/actions.js';
import { createAttachmentCheck } from './events/attachment-check.js';
import { createOperationRegistry } from './actions/operations.js';
import { createRaftLeadership } from './actions/raft-leadership.js';
import { createReconfigurer } from './actions/reconfigurer.js';
import { createApp } from './app.js';
import { createAudit } from './audit/audit.js';
import { createQueryHolds } from './actions/query-holds.js';
import { createAuthenticator } from './auth/authenticator.js';
import { createRelayCredentials } from './auth/relay-credentials.js';
import { createEvents } from './events/events.js';
import { FAILOVER_KEY, createFailoverEvents } from './events/failover-events.js';
import { SUSPICION_KEY, createSuspicionEvents } from './events/suspicion-events.js';
import { LOSS_RESTORE_KEY, createLossRestoreEvents } from './events/loss-restore-events.js';
import { LATENCY_KEY, createLatencyTrigger } from './monitor/latency-trigger.js';
import { createProber } from './rethinkdb/prober.js';
import { createExecutor } from './events/executor.js';
import { fenceWrites } from './events/leader-election.js';
import { createLeadership } from './events/leadership.js';
import { createMaintenance } from './events/maintenance.js';
import { createNodeWatch } from './events/node-watch.js';
import { createOperatorCommands } from './events/operator-commands.js';
import { createPeriodicWork } from './events/periodic-work.js';
import { createReadinessGate } from './events/readiness.js';
import { createTargets } from './events/targets.js';
import { createKeyedMutex } from './lib/keyed-mutex.js';
import { startTimers } from './lib/periodic.js';
import { createRunner } from './lib/runner.js';
import { createRetryBook } from './lib/retry.js';
import { createWorkQueue } from './lib/work-queue.js';
import { createWorkTracker } from './lib/work-tracker.js';
import { createGateClient } from './gates/gate-client.js';
import { podEndpoints } from './policy/query-holds.js';
import { createMetrics } from './metrics/metrics.js';
import { createMonitor } from './monitor/monitor.js';
import { createHookRoutes } from './routes/hook-routes.js';
import { createHttpMetrics } from './routes/http-metrics.js';
import { createLeaderRelay, reviewRelayFor } from './routes/leader-relay.js';
import { createHookCounter, createMetricsRoutes } from './routes/metrics-routes.js';
import { createSandboxRoutes } from './routes/sandbox-routes.js';
import { createWebhookApp } from './routes/webhook-routes.js';
import { createStateStore } from './state/state-store.js';
import { reconcileState } from './state/reconcile.js';
import { createReviewRelay } from './webhook-server.js';

// staticToken: the bearer token read from AUTH_STATIC_TOKEN_FILE (AUTH_MODE=static only).
// gates: the query gates' client (src/gates/gate-client.js) for holds around primary handovers; by default made from
// GATE_HOLD_* (null, holds off, without GATE_HOLD_TOKEN_FILE).
// stateLoaded: the caller vouches that there is no persisted state to load (a fresh sandbox), so the manager
// takes work at once; otherwise it takes none until reconcile() has loaded the state.
// timers: the work queue's, for its delayed looks and backoffs, and the prober's rounds.
// probeTargets: what the prober needs of a real RethinkDB (src/rethinkdb/connect.js); null (the sandbox): no probes.
export function createManager({
  config, store: dataStore, kube: kubePort = null, clock, logger, sandboxModel = null, extraRoutes = [], metrics = createMetrics(), staticToken = null, stateLoaded = false,
  gates = gateClientFrom(config, kubePort), timers = { setTimeout, clearTimeout, setInterval, clearInterval }, probeTargets = null,
}) {
  const work = createWorkTracker({ started: stateLoaded });
  // Who leads (src/events/leadership.js): this replica alone until startElection() (src/server.js, with
  // LEADER_ELECTION_ENABLED and a Kubernetes API); then the Lease decides. Every write to RethinkDB and Kubernetes goes
  // through the fence. What it starts and stops (the reconciliation, the runner, the monitor, the marks) is made below:
  // it calls them only once this replica leads.
  const leadership = createLeadership({
    kubePort, work, metrics, config, clock, logger,
    reconcileState: () => reconcileState({ kube, store, marks, actions, executor, operations, clock, logger, retry: config.retry }),
    onLead: () => runner.startLeading(),
    onFollow: () => { monitor.reset(); latencyTrigger?.reset(); return runner.stopLeading(); },
    loadFollowerView: (pods) => marks.load(pods, { replace: true }),
  });
  const elector = () => leadership.elector();
  const { store, kube } = fenceWrites({ store: dataStore, kube: kubePort, fence: (what) => elector().assertLeading(what) });
  const locks = createKeyedMutex();
  const marks = createStateStore({ kube, clock, logger });
  const audit = createAudit({ kube, clock, logger, metrics });
  const authenticator = createAuthenticator({ auth: config.auth, kube, staticToken, clock, logger });
  const operations = createOperationRegistry({ clock, logger });
  const queryHolds = createQueryHolds({
    gates, store, clock, logger, metrics, ttlMs: config.gateHold.ttlMs, drainMs: config.gateHold.drainMs, delayMs: config.gateHold.delayMs,
    until: config.gateHold.until,
  });
  if (config.gateHold.tokenFile && !gates) {
    logger.warn({ tokenFile: config.gateHold.tokenFile }, 'GATE_HOLD_TOKEN_FILE is set, but there is no Kubernetes API to list the gates and no GATE_HOLD_ENDPOINTS: no holds');
  }
  // The one book of backoffs for work retried on later ticks (node signals, owed votes).
  const retries = createRetryBook({ clock, retry: config.retry });
  const reconfigurer = createReconfigurer({
    store, locks, marks, clock, logger, waitPollIntervalMs: config.waitPollIntervalMs, writeConcurrency: config.tableWriteConcurrency, queryHolds,
  });
  const actions = {
    ...createActions({
      store, reconfigurer, marks, operations, clock, logger, config, audit, headroom: () => headroomInputs(),
    }),
    ...createRaftLeadership({ store, reconfigurer, marks, clock, logger, config, audit, retries }),
  };
  // The one writer of marks, shared by the events, the operator's commands and the start-up reconciliation.
  const executor = createExecutor({ store, kube, actions, marks, operations, config, clock, logger });
  const targets = createTargets({ store, kube, config });
  const events = createEvents({
    store, marks, operations, kube, executor, targets, config, clock, logger, audit, metrics,
  });
  const readinessGate = createReadinessGate({
    kube, store, targets, audit, metrics, config, clock, logger,
  });
  const commands = createOperatorCommands({ marks, executor, targets, audit, logger });
  const maintenance = createMaintenance({ marks, kube, executor, targets, audit, config, clock, logger, retries });
  const monitor = createMonitor({ kube, events, marks, config, clock, logger, metrics });
  const periodic = createPeriodicWork({
    work, marks, events, actions, maintenance, readinessGate, monitor, metrics, config, logger,
  });
  const nodeWatch = createNodeWatch({ kube, maintenance, work, config, logger });
  // The work queue (src/lib/work-queue.js): each key is one kind of work reconciled while this replica leads:
  //   `failover`   a look every FAILOVER_CHECK_MS for shards RethinkDB failed over on its own;
  //   `suspicion`  the servers the prober finds silent changed (or a hold is in force): hold or release their tables;
  //   `loss-restore` a look now and then for servers disconnected LOSS_RESTORE_AFTER_SECONDS: recreate their replicas;
  //   `latency`  every LATENCY_WINDOW_MS, the probes' answer times against each server's baseline (the latency trigger).
  const failover = createFailoverEvents({ store, marks, executor, config, clock, logger });
  const prober = probeTargets && config.suspicion.probeIntervalMs > 0 ? createProber({
    ...probeTargets, clock, logger, timers, intervalMs: config.suspicion.probeIntervalMs, suspectAfterMs: config.suspicion.afterMs,
    busyPods: () => monitor.busyPods(), busyAfterMs: config.suspicion.busyAfterMs, latencies: config.latency.enabled,
    ...(config.latency.enabled && config.latency.diskProbeIntervalMs > 0 ? { diskIntervalMs: config.latency.diskProbeIntervalMs } : { probeDisk: null }),
    onChange: () => queue.add(SUSPICION_KEY),
  }) : null;
  const lossRestore = createLossRestoreEvents({ store, marks, executor, config, clock, logger, metrics });
  const suspicion = prober ? createSuspicionEvents({
    prober, store, marks, gates, recentCluster: failover.lastRead, config, clock, logger, metrics,
  }) : null;
  const latencyTrigger = prober && config.latency.enabled ? createLatencyTrigger({
    prober, events, marks, store, recentCluster: failover.lastRead, config, clock, logger, metrics,
  }) : null;
  // Nothing acts before the persisted state is loaded (or while shutting down): the key looks again later.
  const whenStarted = async (fn, laterMs) => (work.started() && !work.shuttingDown() ? work.track(fn) : { requeueAfterMs: laterMs });
  const reconcilers = {
    [FAILOVER_KEY]: async () => ({ ...(await whenStarted(() => failover.reconcileFailover())), requeueAfterMs: config.failover.checkMs }),
    [SUSPICION_KEY]: () => whenStarted(() => suspicion.reconcileSuspicion(), 200),
    [LOSS_RESTORE_KEY]: async () => ({ ...(await whenStarted(() => lossRestore.reconcileLossRestore())), requeueAfterMs: lossRestore.checkMs() }),
    [LATENCY_KEY]: async () => ({ ...(await whenStarted(() => latencyTrigger.reconcile())), requeueAfterMs: config.latency.windowMs }),
  };
  const queue = createWorkQueue({
    name: 'manager', clock, logger, metrics, timers, workers: 2, backoff: { baseMs: config.retry.minMs, maxMs: config.retry.maxMs },
    reconcile: (key) => reconcilers[key](),
  });
  // The parts that start and stop: the timers from start() (src/server.js) to shutdown, the node watch while leading.
  const runner = createRunner({ logger });
  runner.add({ name: 'timers', group: 'always', start: () => startTimers(periodic.timers()) });
  runner.add({
    name: 'work-queue', group: 'leading', start: () => {
      const stop = queue.start();
      queue.add(FAILOVER_KEY);
      queue.add(LOSS_RESTORE_KEY);
      if (latencyTrigger) queue.addAfter(LATENCY_KEY, config.latency.windowMs);
      return stop;
    },
  });
  runner.add({ name: 'prober', group: 'leading', start: () => prober?.start() ?? null });
  runner.add({ name: 'node-watch', group: 'leading', start: () => { const watch = nodeWatch.start(); return watch && (() => watch.stop()); } });
  // The query gates asked once when this replica starts leading (not waited for): a gate that refuses the token shows
  // now, not at the first handover, and that first hold is not the HTTP client's first request.
  runner.add({ name: 'gate-check', group: 'leading', start: () => { queryHolds.check(); return null; } });
  // What the StatefulSet's pods lack that the manager needs, said once this replica leads (src/policy/attachment.js).
  const attachment = createAttachmentCheck({ kube, config, clock, logger, metrics });
  runner.add({ name: 'attachment-check', group: 'leading', start: () => { attachment.run(); return null; } });
  const { served } = leadership;
  // GET /v1/leader and /v1/cluster's leadership: the election as this replica sees it, and the parts it runs now.
  const leaderView = () => ({ ...elector().view(), parts: runner.running() });
  // The proof a replica gives when it relays, and the check of another's (only with a Kubernetes API: the Lease).
  const relayCredentials = createRelayCredentials({ kube: kubePort, tokenFile: config.relay.tokenFile, audience: config.relay.audience, clock, logger });
  const relay = createLeaderRelay({
    leadership: elector, view: leaderView, served, deadlines: config.deadlines, clock, logger, credentials: relayCredentials,
    refreshFollowerView: leadership.refreshFollowerView, shuttingDown: () => work.shuttingDown(),
  });
  const routes = [relay.router, createHookRoutes({ events, work, prestopDeadlineSeconds: config.deadlines.prestopSeconds, clock, logger })];
  routes.push(createMetricsRoutes({ metrics, store, marks, logger }));
  if (sandboxModel) routes.push(createSandboxRoutes({ model: sandboxModel, kube, store }));
  // HEADROOM_TARGETS: what a demotion's targets are scored by (src/planner/headroom.js): the monitor's last poll while
  // recent, the latency trigger's last window.
  const headroomInputs = () => (config.headroom.enabled ? {
    pods: monitor.recentPods(), latency: latencyTrigger?.view().servers ?? [], weights: config.headroom.weights, factor: config.latency.factor,
    minDeltaMs: config.latency.minDeltaMs, tolerance: config.headroom.tolerance,
  } : null);
  // /v1/monitor: the CPU rule's view, and the latency trigger's (null when it is off).
  const monitorView = { view: () => ({ ...monitor.view(), latency: latencyTrigger?.view() ?? null }) };
  const app = createApp({
    store, actions: { ...actions, ...commands }, marks, operations, work, logger, clock, monitor: monitorView, audit, authenticator, protectReads: config.auth.protectReads,
    observers: [createHttpMetrics({ metrics }), createHookCounter({ metrics })], relay: relay.relay, election: () => elector().view(), podServerOverrides: config.podServerOverrides,
    extraRoutes: [...routes, ...extraRoutes],
    status: async () => ({
      perfWarnings: await marks.perfWarnings(), migrations: await marks.migrations(), pendingRestores: await events.pendingRestores(), lostServers: lossRestore.view(), reconciliation: leadership.reconciliation(),
      nodeMaintenance: maintenance.view(), leadership: leaderView(), ...(await targets.podPlacement()),
    }),
  });
  const log = logger.child({ module: 'manager' });
  if (config.latency.enabled && !latencyTrigger) log.warn('LATENCY_TRIGGER_ENABLED is set, but this backend has no probes (the sandbox): the latency trigger is off');
  if (config.headroom.enabled && !monitor.view().enabled && !latencyTrigger) {
    log.warn('HEADROOM_TARGETS is set, but neither the monitor (no metrics API) nor the latency trigger measures the servers: targets go by counts');
  }

  // The eviction webhook's app, served over TLS on its own port by src/webhook-server.js.
  const reviewRelay = config.webhook?.enabled ? createReviewRelay({
    caFile: config.webhook.caFile, certFile: config.webhook.certFile, serverName: config.webhook.serverName, relayedBy: () => elector().identity, credential: relayCredentials.credential,
    timeoutMs: config.webhook.evictionDeadlineSeconds * 1000 + 500,
  }) : null;
  const webhookApp = createWebhookApp({
    maintenance, work, logger, credentials: relayCredentials, relayReview: reviewRelayFor({ elector, served, send: reviewRelay }),
  });

  // Stop taking work, let running actions and operations finish within graceMs, and give the Lease up, so that
  // another replica leads at its next try. Then, for lingerMs (the caller's ports still open, refusing work), keep
  // the store, so that reads are still answered, and close it.
  async function shutdown(graceMs, { lingerMs = 0 } = {}) {
    await runner.stopAlways();
    work.beginShutdown();
    const settled = Promise.all([work.drain(), operations.drain()]).then(() => true);
    const finished = await Promise.race([settled, clock.sleep(graceMs).then(() => false)]);
    await marks.flush();
    // A heartbeat timeout lowered for a departure that no successor can read goes back now (bounded: a RethinkDB that
    // does not answer does not hold the shutdown beyond one query's timeout).
    await Promise.race([
      events.restoreHeartbeatAtShutdown().catch((err) => log.warn({ err: err.message }, 'heartbeat timeout not given back at shutdown')),
      clock.sleep(config.rethinkdb.queryTimeoutMs),
    ]);
    // Holds on the query gates end by themselves at their ttl; ended here, the gates need not wait for it.
    await Promise.race([queryHolds.idle(), clock.sleep(config.gateHold.ttlMs)]);
    const lease = await elector().stop();
    await runner.stopLeading();
    if (lingerMs > 0) {
      log.info({ lingerMs }, 'still refusing work for a retry period, so that the other replicas read the Lease and relay to the next leader');
      await clock.sleep(lingerMs);
    }
    await store.close();
    await runner.stopServing();
    return { finished, inFlight: work.inFlightCount(), runningOperations: operations.runningCount(), leaseReleased: lease.released };
  }

  return {
    app, webhookApp, watchNodes: nodeWatch.start, lead: leadership.lead, startElection: leadership.startElection, leadership: elector, maintenance, actions, commands, events, monitor, latencyTrigger, marks, audit, authenticator, operations, work, store, metrics, reconcile: leadership.reconcile,
    tick: periodic.tick, queue, failover, prober, suspicion, lossRestore, start: runner.start, running: runner.running, shutdown,
    // The ports (src/listeners.js), added by src/server.js to the runner's serving group: tests serve the apps themselves.
    serve: (part) => runner.add({ ...part, group: 'serving' }),
  };
}

// The query gates' client for holds (GATE_HOLD_*): the gates are GATE_HOLD_ENDPOINTS, or the pods of
// GATE_HOLD_POD_SELECTOR that the Kubernetes API lists, at GATE_HOLD_PORT. null without a token file, or with neither.
function gateClientFrom(config, kube) {
  const { tokenFile, endpoints, podSelector, port } = config.gateHold ?? {};
  if (!tokenFile) return null;
  if (endpoints) return createGateClient({ tokenFile, listEndpoints: async () => endpoints });
  if (!kube?.listPodsBySelector) return null;
  return createGateClient({ tokenFile, listEndpoints: async () => podEndpoints(await kube.listPodsBySelector(podSelector), port) });
}
