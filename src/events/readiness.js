// The readiness gate: the manager sets REPLICAS_READY_CONDITION on every RethinkDB pod that lists it in
// spec.readinessGates, True once the pod's server is connected and every replica it holds is ready
// (decidePodReadiness). Kubernetes counts a pod Ready only when its containers are and this condition is True, so the
// StatefulSet controller (a rollout), a PodDisruptionBudget and `kubectl drain` wait for the backfill.
// Only the leader runs it (from the tick). While no manager runs, the conditions stay as they were: pods that were
// ready stay ready, and a new pod waits (a rollout pauses) until a manager is back.

import { managerActor } from '../audit/actor.js';
import { REPLICAS_READY_CONDITION, decidePodReadiness } from '../policy/rollout.js';

// How often the cluster is read while every gated pod is Ready: often enough to catch a server that restarted in
// its pod (its container restarts, the condition stays True) before the next pod is taken.
const QUIET_CHECK_MS = 5000;

export function createReadinessGate({
  kube, store, targets, audit = null, metrics = null, config, clock, logger,
}) {
  const log = logger.child({ module: 'readiness' });
  // pod uid -> when its connected server was first seen with replicas not ready (ms): the condition is forced True
  // READINESS_MAX_WAIT_SECONDS after that, and stays True while those replicas catch up. A pod whose server has not
  // joined yet has no clock running (a pod stuck in ContainerCreating is not one whose backfill never ends).
  const unreadySince = new Map();
  let lastCheck = -Infinity;
  const actor = managerActor('readiness');

  // One round: returns the conditions it changed ([{ pod, status, reason }]), null when it did nothing.
  async function reconcile() {
    if (!config.readiness.enabled || !kube?.setPodCondition) return null;
    const pods = (await kube.listRethinkDbPods()).filter((p) => p.readinessGates && REPLICAS_READY_CONDITION in p.readinessGates && !p.deleting);
    const settled = pods.every((p) => p.readinessGates[REPLICAS_READY_CONDITION] === 'True' && p.ready);
    if (pods.length === 0 || (settled && clock.now() - lastCheck < QUIET_CHECK_MS)) return null;
    lastCheck = clock.now();
    const cluster = await store.readCluster();
    const serverOf = new Map(targets.serversOf(cluster, pods).map((t) => [t.pod, t.server]));
    const changed = [];
    const readiness = [];
    for (const pod of pods) {
      const key = pod.uid ?? pod.name;
      const decision = decidePodReadiness(cluster, {
        serverId: serverOf.get(pod.name)?.id ?? null, pod: pod.name, unreadySince: unreadySince.get(key) ?? null, now: clock.now(),
        maxUnreadyMs: config.readiness.maxUnreadySeconds * 1000,
      });
      if (decision.waitingFor.length === 0) unreadySince.delete(key);
      else if (!unreadySince.has(key)) unreadySince.set(key, clock.now());
      readiness.push({ pod: pod.name, ready: decision.ready });
      const status = decision.ready ? 'True' : 'False';
      const previous = pod.readinessGates[REPLICAS_READY_CONDITION];
      if (previous === status) continue;
      const forced = decision.ready && decision.waitingFor.length > 0;
      await kube.setPodCondition(pod.name, {
        type: REPLICAS_READY_CONDITION, status, reason: forced ? 'ReadyAfterMaxWait' : (decision.ready ? 'ReplicasReady' : 'ReplicasNotReady'),
        message: decision.reason, previous,
      });
      audit?.record({
        actor, action: 'set-pod-readiness', target: { pod: pod.name, condition: REPLICAS_READY_CONDITION, status }, pod: pod.name, reason: decision.reason,
        outcome: forced ? 'partial' : 'completed', notDone: forced ? decision.waitingFor.map((w) => ({ ...w, reason: w.state })) : [],
      });
      log.info({ pod: pod.name, status, reason: decision.reason }, 'readiness gate set');
      changed.push({ pod: pod.name, status, reason: decision.reason });
    }
    const present = new Set(pods.map((p) => p.uid ?? p.name));
    for (const key of unreadySince.keys()) if (!present.has(key)) unreadySince.delete(key);
    metrics?.setPodReadiness(readiness);
    return changed;
  }

  return { reconcile };
}
