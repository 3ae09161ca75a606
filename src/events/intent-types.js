// Every intent type the executor runs, and what it is, in one place, so that a new type says at once:
// - reconfigures: it writes tables' configurations, so the cluster read a decision was made on is stale after it;
// - dryRun: a dry run runs it (an action that only plans, or a mark changed on a copy that is never persisted, so
//   that a plan after it sees what the real run's would); a dry run skips the others, which write;
// - action: callers see it among a decision's actions; the others only move marks or the manager's connection, or
//   wait (PRESTOP's waits are reported on their own, as majorityWait and settleWait).
// The executor has exactly one step per type (test/unit/executor.test.js).

const type = ({ reconfigures = false, dryRun = false, action = false } = {}) => Object.freeze({ reconfigures, dryRun, action });

export const INTENT_TYPES = Object.freeze({
  'move-connection': type({ dryRun: true }),
  'mark-draining': type({ dryRun: true }),
  'mark-perf-warning': type({ dryRun: true }),
  'mark-perf-warning-long': type({ dryRun: true }),
  release: type({ dryRun: true }),
  'clear-perf-warning': type({ dryRun: true }),
  'wait-for-majority': type({ dryRun: true }),
  demote: type({ reconfigures: true, dryRun: true, action: true }),
  'rebalance-primaries': type({ reconfigures: true, dryRun: true, action: true }),
  'migrate-replicas-off': type({ reconfigures: true, dryRun: true, action: true }),
  'move-raft-leadership': type({ reconfigures: true, action: true }),
  'add-server': type({ reconfigures: true, action: true }),
  'replace-server': type({ reconfigures: true, action: true }),
  'lower-heartbeat': type({ action: true }),
  'set-heartbeat': type({ action: true }),
  'wait-for-replicas-ready': type({ action: true }),
  'end-departure': type(),
  'await-health': type(),
  'owe-hand-back': type(),
  'settle-hand-backs': type(),
  'scale-statefulset': type({ action: true }),
});

// Whether intents of this type have the property (false for a type not in the registry).
export const intentIs = (intentType, property) => INTENT_TYPES[intentType]?.[property] === true;

// A decision as callers see it: the reason and the actions it leads to (the intents that are actions), without the
// intents' internals.
export function describeDecision(decision) {
  const { intents, ...rest } = decision;
  const names = intents.filter((i) => intentIs(i.type, 'action'))
    .map((i) => (i.type === 'demote' ? `move-primaries-from-${i.node ? 'node' : 'server'}` : i.type));
  return { ...rest, actions: [...new Set(names)] };
}
