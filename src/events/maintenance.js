// The use-cases of Kubernetes' node maintenance, the notice it gives before any preStop:
//   a node's cordon or drain taint   drain that node's servers in one plan (the node informer calls observeNode);
//   its end (uncordon)               release them and level the primaries again;
//   an eviction of a RethinkDB pod   demote its primaries before the eviction is admitted, or refuse it while that
//                                    cannot be done safely (the eviction webhook calls reviewEviction).
// Each reads the cluster, asks the pure policy (src/policy/maintenance.js) and has the executor run the intents.
// Each signal and each eviction decision is audited (a log line, a Kubernetes Event on each pod concerned, and the
// actions metric).

import { hookActor, managerActor } from '../audit/actor.js';
import { createDeadline, withinMs } from '../lib/clock.js';
import { createKeyedMutex } from '../lib/keyed-mutex.js';
import { createRetryBook } from '../lib/retry.js';
import { findServerForPod } from '../cluster/cluster-model.js';
import {
  decideEviction, decideEvictionHoldExpiry, decideNodeMaintenance, evictionAfterDeadline, evictionDemotionDone, evictionReviewMayAct, expiredEvictionDrains, nodeDrainSignal,
} from '../policy/maintenance.js';
import {
  UNHANDLED, handledNode, nodeForRound, nodeNeedsHandling, nodeRoundDue, signalledNodes,
} from '../policy/node-watch.js';
import { resultOf } from './executor.js';

const NODE_ACTOR = managerActor('node-watch');

// retries: the manager's retry book (src/lib/retry.js), shared with the other work retried on later rounds.
export function createMaintenance({
  marks, kube, executor, targets, audit, config, clock, logger, retries = createRetryBook({ clock, retry: config.retry }),
}) {
  const log = logger.child({ module: 'maintenance' });
  const { taints } = config.maintenance;
  const nodeLocks = createKeyedMutex();
  const reviews = createKeyedMutex();
  // node name -> { node: as last seen, state: its named state (src/policy/node-watch.js) }. A failed handling's
  // backoff is in the retry book, under 'node:<name>'.
  const nodes = new Map();
  // Evictions admitted, pod -> when: their servers count as leaving for WEBHOOK_EVICTION_HOLD_SECONDS (the API server
  // marks the pod deleted only after the PodDisruptionBudget check that follows the webhook).
  const admitted = new Map();
  const holdMs = config.webhook.evictionHoldSeconds * 1000;
  const signalOf = (node) => nodeDrainSignal(node, { taints });
  const retryKey = (name) => `node:${name}`;

  // A node as listed or changed. Acts only when its drain signal differs from the one last acted on; a handling
  // already running looks at the node again when it ends (handleNode), so a change during a drain is not lost.
  function observeNode(node) {
    const entry = nodes.get(node.name) ?? { state: UNHANDLED };
    entry.node = node;
    nodes.set(node.name, entry);
    if (!nodeNeedsHandling(entry.state, signalOf(node))) return Promise.resolve(null);
    return handleNode(node.name);
  }

  // A node deleted (the autoscaler's scale-down): forgotten. Its drains end with its pods' POSTSTARTs elsewhere.
  function forgetNode(name) {
    nodes.delete(name);
    retries.succeeded(retryKey(name));
  }

  // Called periodically: nodes whose last handling failed, once their backoff has passed; and every node that still
  // carries a drain signal, every RETRY_MAX_MS (nodeRoundDue).
  async function retryDueNodes() {
    const now = clock.now();
    const due = [...nodes.entries()]
      .map(([name, entry]) => ({
        entry, due: nodeRoundDue(entry.state, { failing: retries.failing(retryKey(name)), backoffPassed: retries.due(retryKey(name)), now, recheckMs: config.retry.maxMs }),
      }))
      .filter((x) => x.due);
    const results = [];
    for (const { entry, due: why } of due) {
      entry.state = nodeForRound(entry.state, why);
      results.push(await handleNode(entry.node.name));
    }
    return results.filter((r) => r && r.outcome !== 'nothing_to_do');
  }

  // Under the node's lock, until what was acted on is the node as last seen: a change that arrives while a drain
  // runs is handled right after it.
  function handleNode(name) {
    return nodeLocks.runExclusive(`node:${name}`, async () => {
      const entry = nodes.get(name);
      let result = null;
      while (entry && nodes.get(name) === entry && nodeNeedsHandling(entry.state, signalOf(entry.node))) {
        result = await handleOnce(name, entry);
        if (result.outcome === 'failed') break;
      }
      return result;
    });
  }

  async function handleOnce(name, entry) {
    const { node } = entry;
    const signal = signalOf(node);
    try {
      const drains = await marks.list();
      const { cluster, targets: found } = signal ? await targets.serversOnNode(name) : { cluster: null, targets: [] };
      const ours = drains.filter((d) => d.origin?.kind === 'node' && d.origin.node === name);
      const deleting = !signal && ours.length > 0 ? new Set((await kube.listRethinkDbPods()).filter((p) => p.deleting).map((p) => p.name)) : new Set();
      const decision = decideNodeMaintenance({
        node, targets: found, drains, taints, giveBack: config.poststart.giveBack, leaving: ours.filter((d) => deleting.has(d.pod)).map((d) => d.serverId),
      });
      const result = decision.intents.length === 0 ? null : await act(node, decision, cluster);
      entry.state = handledNode(signal, clock.now());
      retries.succeeded(retryKey(name));
      if (result) log.info({ node: name, action: decision.action, outcome: result.outcome, reason: decision.reason }, 'node maintenance signal handled');
      return { node: name, action: decision.action, reason: decision.reason, ...(result ?? { outcome: 'nothing_to_do' }) };
    } catch (err) {
      // Whatever the node does next, it is looked at again (a quick uncordon must still release what was marked).
      entry.state = UNHANDLED;
      // A node forgotten meanwhile (deleted) books no backoff: one of the same name later starts afresh.
      const { retryInMs } = nodes.get(name) === entry ? retries.failed(retryKey(name)) : { retryInMs: null };
      log.warn({ node: name, err: err.message, retryInMs }, 'node maintenance signal not handled; retried');
      audit.record({
        actor: NODE_ACTOR, action: 'node-signal', target: { node: name }, reason: `${signal?.text ?? `node ${name} is schedulable`}: ${err.message}`,
        outcome: 'failed', notDone: [{ reason: err.message }],
      });
      return { node: name, action: 'failed', outcome: 'failed', reason: err.message, retryInMs };
    }
  }

  async function act(node, decision, cluster) {
    const startedAt = clock.now();
    const done = await executor.run(decision.intents, { actor: NODE_ACTOR, pod: null, snapshot: cluster, deadline: createDeadline(clock, config.deadlines.actionSeconds * 1000) });
    const report = resultOf(done, 'demote') ?? resultOf(done, 'rebalance-primaries');
    const outcome = report?.outcome ?? 'completed';
    for (const server of decision.servers) {
      audit.record({
        actor: NODE_ACTOR, action: decision.action, target: { node: node.name, server: server.name, signal: decision.signal?.key ?? decision.signal?.kind ?? null },
        pod: server.pod, reason: decision.reason, outcome,
        changes: (report?.changes ?? []).filter((c) => c.from === server.name || c.to === server.name),
        skipped: report?.skipped ?? [], notDone: report?.notDone ?? [], durationMs: clock.now() - startedAt,
      });
    }
    return { outcome, servers: decision.servers.map((s) => s.name), report };
  }

  // request: what the webhook read of the AdmissionReview: { pod, namespace, dryRun, user }.
  // Answers within config.webhook.evictionDeadlineSeconds: { allowed, code, message, warnings, decision }.
  // A dependency that does not answer in time leaves the eviction allowed with a warning (as the webhook's
  // failurePolicy Ignore does when the manager itself is down); a demotion still running at the deadline refuses
  // it for now (429: kubectl drain retries, and the retry finds the demotion done).
  async function reviewEviction({ pod, namespace, dryRun = false, user = null }) {
    const actor = hookActor('eviction', pod, user ? { kind: 'caller', name: user, pod: null } : null);
    if (namespace !== config.kubernetes.namespace) return allow(`pod ${namespace}/${pod} is not in the RethinkDB namespace`);
    const deadlineMs = config.webhook.evictionDeadlineSeconds * 1000;
    const startedAt = clock.now();
    // The review's state (evictionAfterDeadline): 'deciding', 'demoting', then 'answered'.
    const review = { phase: 'deciding' };
    // Another pod is let through without waiting for the reviews of RethinkDB pods. One review of a RethinkDB pod at a
    // time, so that two evictions decided together cannot both count the other's server as staying.
    // A real timer: the API server waits in real time, whatever clock the manager plans with.
    const decided = kube.listRethinkDbPods()
      .then((pods) => (pods.some((p) => p.name === pod)
        ? reviews.runExclusive('eviction', () => decideAndAct({ pod, dryRun, actor, startedAt, deadlineMs, review }))
        : allow(`pod ${pod} is not a RethinkDB pod (selector ${config.kubernetes.podLabelSelector})`)));
    const answer = await withinMs(decided, deadlineMs, () => new Error(`no decision within ${config.webhook.evictionDeadlineSeconds} s`))
      .catch((err) => ({ error: err }));
    const phaseAtAnswer = review.phase;
    review.phase = 'answered';
    if (answer.error) {
      const why = answer.error.message;
      if (evictionAfterDeadline(phaseAtAnswer) === 'refuse') {
        return refuse(pod, actor, startedAt, `the primaries of pod ${pod} are still being demoted (${why}); retry`, 'timeout');
      }
      const message = `the manager could not check pod ${pod} (${why}): the eviction goes ahead without demoting its primaries first`;
      log.warn({ pod, err: why }, 'eviction allowed without a decision');
      audit.record({ actor, action: 'eviction-review', target: { pod }, pod, reason: message, outcome: 'failed', notDone: [{ reason: why }], durationMs: clock.now() - startedAt });
      return { allowed: true, message, warnings: [message], decision: null };
    }
    return answer;
  }

  // The servers of pods being deleted, or whose eviction was admitted within the hold while their server is still
  // drained (its POSTSTART, once the pod is back, releases it and ends this too).
  function stoppingServers(cluster, pods, drains) {
    const now = clock.now();
    for (const [name, at] of admitted) if (now - at > holdMs) admitted.delete(name);
    const drainedPods = new Set(drains.map((d) => d.pod));
    return pods.filter((p) => p.deleting || (admitted.has(p.name) && drainedPods.has(p.name)))
      .map((p) => findServerForPod(cluster, { podName: p.name, podIp: p.podIp, overrides: config.podServerOverrides })?.id)
      .filter(Boolean);
  }

  async function decideAndAct({ pod, dryRun, actor, startedAt, deadlineMs, review }) {
    const pods = await kube.listRethinkDbPods();
    const { cluster, targets: [{ server }] } = await targets.serversForPods([pod]);
    const drains = await marks.list();
    const decision = decideEviction(cluster, {
      pod, server, drains, keptOff: await marks.drainingIds(), stopping: stoppingServers(cluster, pods, drains),
    });
    // The API server has its answer already (allowed without a decision): act on nothing now.
    if (!evictionReviewMayAct(review.phase)) return allow('answered already');
    if (!decision.allowed) return refuse(pod, actor, startedAt, decision.reason, 'refused', decision);
    if (dryRun || decision.intents.length === 0) {
      const answer = allow(dryRun ? `dry run: ${decision.reason}` : decision.reason, decision);
      if (!dryRun) audit.record({ actor, action: 'eviction-review', target: { pod }, pod, reason: decision.reason, outcome: 'allowed', durationMs: clock.now() - startedAt });
      return answer;
    }
    review.phase = 'demoting';
    // What is left of the deadline, less a margin for the answer itself.
    const deadline = createDeadline(clock, Math.max(500, deadlineMs - (clock.now() - startedAt) - 500));
    const done = await executor.run(decision.intents, { actor, pod, snapshot: cluster, deadline });
    const report = resultOf(done, 'demote');
    const { done: off, left } = evictionDemotionDone(decision, report);
    if (!off) {
      const why = left.map((x) => x.reason ?? JSON.stringify(x)).slice(0, 3).join('; ');
      return refuse(pod, actor, startedAt, `the primaries of ${server.name} are not all off yet (${why || 'the new primaries are not acting yet'}); retry`, 'partial', decision, report);
    }
    admitted.set(pod, clock.now());
    audit.record({
      actor, action: 'eviction-review', target: { pod, server: server.name }, pod, reason: decision.reason, outcome: 'allowed',
      changes: report.changes, durationMs: clock.now() - startedAt,
    });
    log.info({ pod, server: server.name, changes: report.changes.length }, 'eviction allowed: primaries off');
    return {
      allowed: true, message: `primaries of ${server.name} moved off (${report.changes.length} shard(s)); the eviction may go ahead`,
      warnings: decision.unavoidable.slice(0, 3), decision: { reason: decision.reason, changes: report.changes },
    };
  }

  function allow(message, decision = null) {
    return { allowed: true, message, warnings: decision?.unavoidable?.slice(0, 3) ?? [], decision: decision && { reason: decision.reason } };
  }

  // 429, as a PodDisruptionBudget answers: kubectl drain and the cluster autoscaler retry it.
  function refuse(pod, actor, startedAt, message, outcome, decision = null, report = null) {
    log.info({ pod, message }, 'eviction refused');
    audit.record({
      actor, action: 'eviction-review', target: { pod }, pod, reason: message, outcome: `denied_${outcome}`,
      changes: report?.changes ?? [], notDone: (decision?.refusals ?? []).map((reason) => ({ reason })), durationMs: clock.now() - startedAt,
    });
    return { allowed: false, code: 429, message: `rethinkdb-k8s-manager: ${message}`, warnings: [], decision: decision && { reason: decision.reason, refusals: decision.refusals } };
  }

  // Called periodically: eviction drains whose pod was not evicted within the hold are released (the eviction was
  // refused after its demotion began, or by the PodDisruptionBudget after the webhook, and nobody retried), and the
  // primaries levelled again. Reads the pods only while such a drain exists.
  async function expireEvictionHolds() {
    const drains = (await marks.list()).filter((d) => d.origin?.kind === 'eviction');
    if (drains.length === 0 || !kube) return [];
    const expired = expiredEvictionDrains({ drains, pods: await kube.listRethinkDbPods(), now: clock.now(), holdSeconds: config.webhook.evictionHoldSeconds });
    if (expired.length === 0) return [];
    const { reason, intents } = decideEvictionHoldExpiry(expired, { holdSeconds: config.webhook.evictionHoldSeconds });
    const done = await executor.run(intents, { actor: managerActor('eviction-hold'), pod: null });
    const report = resultOf(done, 'rebalance-primaries');
    for (const d of expired) {
      admitted.delete(d.pod);
      audit.record({ actor: managerActor('eviction-hold'), action: 'eviction-hold-expired', target: { pod: d.pod, server: d.serverName }, pod: d.pod, reason, outcome: report.outcome });
    }
    log.info({ pods: expired.map((d) => d.pod) }, 'eviction drains released: the pods were not evicted');
    return expired.map((d) => ({ pod: d.pod, server: d.serverName, outcome: report.outcome }));
  }

  return {
    observeNode, forgetNode, retryDueNodes, expireEvictionHolds, reviewEviction,
    // The nodes whose drain signal was last acted on, for GET /v1/cluster (nodeMaintenance).
    view: () => signalledNodes([...nodes].map(([name, { state }]) => ({ name, state }))),
  };
}
