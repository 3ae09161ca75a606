// Every intent type the executor runs, and what it is, in one place, so that a new type says at once:
// - reconfigures: it writes tables' configurations, so the cluster read a decision was made on is stale after it;
// - dryRun: a dry run runs it (an action that only plans, or a mark changed on a copy that is never persisted, so
//   that a plan after it sees what the real run's would); a dry run skips the others, which write;
// - action: callers see it among a decision's actions; the others only move marks or the manager's connection, or
//   wait (PRESTOP's waits are reported on their own, as majorityWait and settleWait).
// The executor has exactly one step per type (test/unit/executor.test.js).

const type = (reconfigures, dryRun, action) => Object.freeze({ reconfigures, dryRun, action });

export const INTENT_TYPES = Object.freeze({
  'move-connection': type(false, true, false),
  'mark-draining': type(false, true, false),
  'mark-perf-warning': type(false, true, false),
  'mark-perf-warning-long': type(false, true, false),
  release: type(false, true, false),
  'clear-perf-warning': type(false, true, false),
  'wait-for-majority': type(false, true, false),
  demote: type(true, true, true),
  'rebalance-primaries': type(true, true, true),
  'migrate-replicas-off': type(true, true, true),
  'move-raft-leadership': type(true, false, true),
  'add-server': type(true, false, true),
  'replace-server': type(true, false, true),
  'lower-heartbeat': type(false, false, true),
  'set-heartbeat': type(false, false, true),
  'wait-for-replicas-ready': type(false, false, true),
  'end-departure': type(false, false, false),
  'await-health': type(false, false, false),
  'owe-hand-back': type(false, false, false),
  'settle-hand-backs': type(false, false, false),
});

// Whether intents of this type have the property (false for a type not in the registry).
export const intentIs = (intentType, property) => INTENT_TYPES[intentType]?.[property] === true;
