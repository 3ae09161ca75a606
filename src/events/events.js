// The use-cases of infrastructure events, in two families: a pod's lifecycle (./lifecycle-events.js: PRESTOP,
// POSTSTART, the levelling after a rollout, the heartbeat's restore) and PERFWARNING (./perf-warning-events.js: a
// warning, its end and expiry, the monitor's raise, clear, escalation and scale-out). Routes, the monitor and the
// periodic work call these, and nothing else decides what an event means.
// requester (POSTSTART, PERFWARNING and its end): who asks, { kind: 'pod' | 'operator' | 'monitor' }
// (src/policy/requesters.js); a pod may undo only what it did itself. actor: who acted, for the audit trail.

import { createLifecycleEvents } from './lifecycle-events.js';
import { createPerfWarningEvents } from './perf-warning-events.js';

export function createEvents(deps) {
  const { marks, operations } = deps;
  return {
    ...createLifecycleEvents(deps),
    ...createPerfWarningEvents(deps),
    pendingRestores: async () => (await marks.restores()).map(({ serverId, pod, reason, persisted }) => ({ serverId, pod, reason, persisted })),
    poststartRunning: () => operations.list().some((op) => op.kind === 'poststart' && op.status === 'running'),
  };
}
