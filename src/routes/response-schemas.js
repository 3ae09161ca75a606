// JSON Schemas of the success bodies, for /openapi.json's components (src/routes/openapi.js). Each follows the code that
// builds the body (named next to it); the route tables refer to them by name. test/routes/responses.test.js drives the
// sandbox manager through every documented route and checks each answer against them.
// Objects built in one place are closed (additionalProperties false); those that spread a result of varying shape
// stay open, with the fields every answer has required.

const string = { type: 'string' };
const integer = { type: 'integer' };
const number = { type: 'number' };
const boolean = { type: 'boolean' };
const dateTime = { type: 'string', format: 'date-time' };
const object = { type: 'object' };
const nullable = (schema) => ({ anyOf: [schema, { type: 'null' }] });
const arrayOf = (items) => ({ type: 'array', items });
const ref = (name) => ({ $ref: `#/components/schemas/${name}` });

// required: the listed names, or every property when true.
function closed(properties, required = true) {
  return { type: 'object', required: required === true ? Object.keys(properties) : required, additionalProperties: false, properties };
}

function open(properties, required = []) {
  return { type: 'object', required, properties };
}

// src/actions/report.js outcomeOf, and 'planned' for a dry run.
const ACTION_OUTCOMES = ['planned', 'completed', 'nothing_to_do', 'partial', 'failed', 'timed_out'];
// src/actions/operations.js: 'running' until the work settles, then 'succeeded' (completed or nothing to do), 'failed',
// or the report's outcome.
const OPERATION_STATUSES = ['running', 'succeeded', 'failed', 'partial', 'timed_out'];
// The kinds of operation: the data-moving actions, a restart's half-done move, and POSTSTART.
const OPERATION_KINDS = ['add-server', 'create-replica', 'migrate-replicas-off', 'replace-server', 'finish-move', 'poststart'];
// src/actions/operations.js's steps of a replica move (src/actions/replica-actions.js runReplicaMoves, moveOneReplica).
const MOVE_STEP_STATUSES = ['pending', 'waiting', 'staging', 'backfilling', 'finalizing', 'done', 'done_unsettled', 'failed', 'timed_out', 'not_started'];
// The enums and small shapes several bodies share, defined once.
const outcome = { type: 'string', enum: ACTION_OUTCOMES };
const operationStatus = { type: 'string', enum: OPERATION_STATUSES };
const operationKind = { type: 'string', enum: OPERATION_KINDS };
const hotSignal = { enum: ['own', 'interference', null] };
const averages = nullable(closed({ own: nullable(number), interference: nullable(number) }));

// An operation as an answer refers to it: src/routes/hook-routes.js withHref, src/routes/action-routes.js.
const OperationRef = closed({ id: string, status: operationStatus, href: { type: 'string', description: 'GET it to follow the operation' } });

// src/lib/trace.js summarize: where one request's time went, in milliseconds.
const Timings = closed({
  totalMs: number, readMs: number, planMs: number, writeMs: number, meanWriteMs: nullable(number), waitMs: number, otherMs: number,
  queries: closed({ reads: integer, writes: integer, readsWhileWaiting: integer }),
});

// src/actions/report.js describeShard: a shard's configuration, by server name.
const ShardConfig = closed({ primary: string, replicas: arrayOf(string), nonvoting: arrayOf(string) });

// src/actions/report.js primaryChanges and plannedReplicaMoves, and the replica moves done (replica-actions.js moveOneReplica).
const Change = closed({
  table: string, tableId: string, shard: integer, kind: { type: 'string', enum: ['primary', 'replica'] }, from: nullable(string), to: string,
  before: nullable(ref('ShardConfig')), after: ref('ShardConfig'),
  // src/planner/headroom.js: with HEADROOM_TARGETS, the chosen target's headroom score and parts, and every candidate's.
  headroom: closed({
    score: number, parts: closed({ cpu: number, node: number, latency: number }, []), among: arrayOf(closed({ server: string, score: number })),
  }),
  // src/actions/query-holds.js: the hold taken on the query gates around the table's write (GATE_HOLD_TOKEN_FILE):
  // afterWriteMs after it returned (GATE_HOLD_DELAY_MS; absent when taken before it), or why none was taken.
  queryHold: {
    oneOf: [
      closed({
        gates: integer, inFlight: integer, tookMs: number, unreachable: arrayOf(closed({ endpoint: nullable(string), error: string })), afterWriteMs: integer,
      }, ['gates', 'inFlight', 'tookMs', 'unreachable']),
      closed({ skipped: string }),
    ],
  },
}, ['table', 'tableId', 'shard', 'kind', 'from', 'to']);

// src/actions/report.js namedItems: what was skipped, not done or is still pending, and why. A failure that concerns no
// table (a failed read) has a reason only.
const NamedItem = closed({ table: string, shard: integer, reason: string }, ['reason']);

// src/actions/primary-actions.js runPrimaryPlan, replica-actions.js startReplicaMoves (dry run) and runReplicaMoves;
// the operator's move-primaries-from-node adds unmappedPods (src/events/operator-commands.js).
const ActionReport = open({
  action: { type: 'string', enum: ['move-primaries-from-server', 'move-primaries-from-node', 'rebalance-primaries', 'add-server', 'create-replica', 'migrate-replicas-off', 'replace-server', 'finish-move'] },
  target: { type: 'object', description: 'what the action was asked to act on (server, node and pods, table and shard...)' },
  dryRun: boolean,
  reason: nullable(string),
  outcome,
  changes: arrayOf(ref('Change')),
  skipped: arrayOf(ref('NamedItem')),
  notDone: arrayOf(ref('NamedItem')),
  settled: nullable(boolean),
  pending: arrayOf(ref('NamedItem')),
  primaries: { ...nullable(ref('ActionReport')), description: 'after replica moves: the primaries given to the server' },
  demotion: { ...ref('ActionReport'), description: 'migrate-replicas-off: the demotion of the server\'s primaries that came first' },
  durationMs: number,
  unmappedPods: arrayOf(closed({ pod: string, reason: string })),
  draining: { ...arrayOf(string), description: 'move-primaries-from-server and -node: the servers now marked draining (a dry run: would be); they take no primary until release-server, also when nothing moved' },
}, ['action', 'target', 'dryRun', 'outcome', 'changes', 'skipped', 'notDone']);

// The 200 of an action (src/routes/action-routes.js): the report and where its time went.
const ActionResult = { allOf: [ref('ActionReport'), { type: 'object', required: ['timings'], properties: { timings: ref('Timings') } }] };

// src/events/operator-commands.js releaseServer.
const ReleaseResult = closed({
  action: { const: 'release-server' }, target: closed({ server: string }), dryRun: boolean, wasDraining: boolean,
  rebalance: nullable(ref('ActionReport')), outcome, timings: ref('Timings'),
});

// The 202 of a data-moving action (src/actions/replica-actions.js startReplicaMoves, src/routes/action-routes.js).
const DataMoveStarted = closed({
  action: string, target: object, dryRun: { const: false }, operation: ref('OperationRef'),
  demotion: { ...ref('ActionReport'), description: 'migrate-replicas-off: the demotion of the server\'s primaries that came first' },
}, ['action', 'target', 'dryRun', 'operation']);

// src/events/intent-types.js describeDecision: the policy's reason and the actions it leads to; the rest depends on the event.
const Decision = open({ reason: string, actions: arrayOf(string) }, ['reason', 'actions']);

// src/events/lifecycle-events.js prestop, answered with its timings (src/routes/hook-routes.js).
// A PRESTOP's wait for a ready voting majority without its server (before its demotion, and after it).
const prestopWait = closed({
  outcome: { type: 'string', enum: ['none', 'waited', 'gave_up', 'unread', 'would_wait', 'off'] },
  waitedMs: number,
  short: arrayOf(closed({ tableId: string, table: string, shard: integer })),
  reason: string,
});

const PrestopResult = closed({
  event: { const: 'PRESTOP' }, pod: string, server: nullable(string), decision: ref('Decision'), outcome,
  primariesOff: { type: 'boolean', description: 'whether every primary left the pod (false: some are still on it)' },
  report: ref('ActionReport'), reason: string,
  heartbeat: open({ lowered: boolean, reason: string, from: nullable(number), to: number, until: dateTime }, ['lowered']),
  raftLeadership: open({ action: { const: 'move-raft-leadership' }, outcome }, ['action', 'outcome']),
  majorityWait: {
    ...prestopWait,
    description: 'the wait before the demotion while stopping the server would have left a shard without a ready voting majority (PRESTOP_MAJORITY_WAIT_SECONDS)',
  },
  settleWait: {
    ...prestopWait,
    description: 'the same wait after the demotion: the secondaries catching up with their new primaries before the server stops (PRESTOP_MAJORITY_WAIT_SECONDS)',
  },
  timings: ref('Timings'),
}, ['event', 'pod', 'server', 'decision', 'outcome', 'primariesOff', 'timings']);

// src/events/lifecycle-events.js poststart: the operation that runs it (or the one already running for the pod).
const PoststartStarted = closed({ event: { const: 'POSTSTART' }, pod: string, operation: ref('OperationRef'), repeated: boolean });

// src/events/perf-warning-events.js perfwarning: one entry per pod the warning names.
const PerfWarningResult = closed({
  event: { const: 'PERFWARNING' },
  target: { oneOf: [closed({ pod: string }), closed({ node: string })] },
  source: { type: 'string', description: 'who raised it, who alone may withdraw it' },
  decision: ref('Decision'),
  pods: arrayOf(closed({
    pod: string, server: nullable(string), outcome, reason: string, demotion: ref('ActionReport'),
    raftLeadership: nullable(open({ action: { const: 'move-raft-leadership' }, outcome }, ['action', 'outcome'])),
    migration: nullable(ref('OperationRef')), expiresAt: nullable(dateTime),
  }, ['pod', 'server', 'outcome'])),
  timings: ref('Timings'),
});

// src/events/perf-warning-events.js endPerfWarning and restoreResult.
const PerfWarningEnded = closed({
  event: { const: 'PERFWARNING_END' }, pod: string, ended: { const: true }, reason: string,
  restore: closed({
    action: { type: 'string', enum: ['wait', 'add-server', 'rebalance-primaries'] }, reason: string, outcome,
    changes: arrayOf(ref('Change')), operation: ref('OperationRef'),
  }, ['action', 'reason']),
});

// src/events/perf-warning-events.js endPerfWarningsOnNode: the warnings of a node's pods, each as one pod's end.
const PerfWarningEndedOnNode = closed({
  event: { const: 'PERFWARNING_END' }, node: string, ended: { const: true }, reason: string, pods: arrayOf(ref('PerfWarningEnded')),
});
const PerfWarningEndResult = { oneOf: [ref('PerfWarningEnded'), ref('PerfWarningEndedOnNode')] };

// src/actions/operations.js: a replica move's step, or a POSTSTART's (src/events/events.js runPoststart).
const OperationStep = {
  anyOf: [
    closed({
      table: string, tableId: string, shard: integer, kind: { const: 'replica' }, from: nullable(string), to: string,
      headroom: { type: 'number', description: 'HEADROOM_TARGETS: the target\'s headroom score' },
      status: { type: 'string', enum: MOVE_STEP_STATUSES }, state: nullable(string), progress: nullable(number), error: nullable(string),
      startedAt: nullable(dateTime), finishedAt: nullable(dateTime),
    }, ['table', 'shard', 'kind', 'to', 'status', 'state', 'progress', 'error']),
    closed({ step: string, status: { type: 'string', enum: ['running', 'done'] }, detail: nullable(string), kind: string }, ['step', 'status', 'detail']),
  ],
};

// src/actions/operations.js start: the whole record.
const Operation = closed({
  id: string, kind: operationKind, params: { type: 'object', description: 'what the operation was started with' },
  status: operationStatus, createdAt: dateTime, finishedAt: nullable(dateTime),
  steps: arrayOf(ref('OperationStep')),
  report: { ...nullable(open({ outcome: string }, ['outcome'])), description: 'once finished: the action report (or the POSTSTART result)' },
  error: nullable(closed({ error: string, message: string })),
});

// src/routes/read-routes.js summary.
const OperationList = closed({
  operations: arrayOf(closed({
    id: string, kind: operationKind, status: operationStatus, createdAt: dateTime, finishedAt: nullable(dateTime), href: string,
  })),
});

// src/audit/audit.js record.
const AuditRecord = closed({
  id: { type: 'integer', minimum: 1 }, time: dateTime, actor: { type: 'string', description: 'who acted, as people read it' },
  actorLabel: { type: 'string', description: 'who acted, as the metrics label it' }, action: string, target: object, pod: nullable(string), reason: nullable(string),
  outcome: { type: 'string', description: "an action's outcome (completed, nothing_to_do, partial, failed, timed_out), or a review's (allowed, refused...)" },
  plan: closed({
    changes: arrayOf(closed({
      table: string, shard: integer, kind: { type: 'string', enum: ['primary', 'replica', 'raft-leader', 'vote'] }, from: nullable(string), to: nullable(string),
      headroom: { type: 'number', description: 'HEADROOM_TARGETS: the chosen target\'s headroom score' },
    }, ['kind'])),
    skipped: arrayOf(object), notDone: arrayOf(object),
  }),
  durationMs: nullable(number), operation: nullable(string),
  event: { type: 'string', description: "the Kubernetes Event on the pod: none, pending, created, or 'failed: ...'", pattern: '^(none|pending|created|failed: .*)$' },
});
const AuditList = closed({ events: arrayOf(ref('AuditRecord')) });

// src/monitor/monitor.js view.
const MonitorView = closed({
  enabled: boolean, pollIntervalMs: integer,
  thresholds: closed({
    hotUtilization: number, hotSkew: number, consecutivePolls: integer, immediateUtilization: number, clearCooldownSeconds: number,
  }),
  polls: integer, failures: integer, skippedOverlaps: integer, lastPollAt: nullable(dateTime), lastError: nullable(closed({ time: dateTime, message: string })),
  averages, uniform: boolean,
  pods: arrayOf(closed({
    pod: string, node: nullable(string), own: nullable(number), ownBasis: { enum: ['limit', 'request', null] }, interference: nullable(number),
    hot: hotSignal, hotStreak: integer, raised: boolean, clearSince: nullable(number), signal: hotSignal,
  }, ['pod', 'node', 'own', 'ownBasis', 'interference', 'hot'])),
  lastDecisions: arrayOf(open({ time: dateTime, type: { type: 'string', enum: ['raise', 'escalate', 'clear', 'scale-out', 'scale-out-suppressed'] }, pod: string, reason: string, error: string }, ['time', 'type', 'reason'])),
  scaleOut: ref('ScaleOutState'),
  latency: nullable(ref('LatencyView')),
});

// src/monitor/latency-trigger.js view (null in MonitorView when LATENCY_TRIGGER_ENABLED is off).
const LatencyView = closed({
  enabled: boolean, windowMs: integer,
  thresholds: closed({
    factor: number, minDeltaMs: integer, consecutiveWindows: integer, warmupWindows: integer, clearCooldownSeconds: integer,
  }),
  diskProbe: nullable(closed({ db: string, intervalMs: integer, lastTables: nullable(integer), lastError: nullable(string) })),
  windows: integer, lastWindowAt: nullable(dateTime), held: nullable(string),
  servers: arrayOf(closed({
    server: string, pod: nullable(string), signal: { enum: ['reply', 'disk'] }, probes: integer, valueMs: nullable(number), p50Ms: nullable(number), p90Ms: nullable(number), baselineMs: nullable(number),
    anomalous: nullable(boolean), streak: integer, raised: boolean,
  })),
  lastDecisions: arrayOf(open({ time: dateTime, type: { type: 'string', enum: ['raise', 'clear'] }, pod: string, reason: string, error: string }, ['time', 'type', 'pod', 'reason'])),
});

// src/monitor/monitor.js scaleOut: lastAt is the clock's milliseconds.
const ScaleOutState = closed({ inFlight: nullable(closed({ to: integer, since: dateTime })), lastAt: nullable(number) });

// src/routes/read-routes.js monitorSummary.
const MonitorSummary = closed({
  enabled: boolean, lastPollAt: nullable(dateTime), polls: integer, failures: integer,
  averages, uniform: boolean,
  hot: arrayOf(closed({ pod: string, signal: hotSignal, raised: boolean })), scaleOut: ref('ScaleOutState'),
});

// src/events/leader-election.js view: disabled (one replica, it leads), or the election as this replica sees it.
// parts: the long-lived parts this replica runs now (src/lib/runner.js): the ports, the timers, and the node watch
// only while it leads.
const runnerParts = { ...arrayOf(string), description: 'the parts this replica runs now: http, webhook, timers; node-watch only while it leads' };
const LeaderView = {
  oneOf: [
    closed({ enabled: { const: false }, leading: { const: true }, parts: runnerParts }),
    closed({
      enabled: { const: true }, identity: string, leading: boolean, leader: nullable(string), lease: string, leaderAddress: nullable(string),
      timings: closed({ leaseDurationMs: integer, renewDeadlineMs: integer, retryPeriodMs: integer }), transitions: integer, lastError: nullable(string),
      parts: runnerParts,
    }),
  ],
};

// src/cluster/cluster-view.js describeCluster, with what the manager adds (src/manager.js status) and the monitor.
const ClusterView = closed({
  backend: { type: 'string', enum: ['rethinkdb', 'sandbox'] },
  notice: string,
  servers: arrayOf(closed({
    name: string, id: string, connected: boolean, draining: boolean, drainingReason: nullable(string), drainingSince: nullable(dateTime),
    primaries: { type: 'integer', minimum: 0 }, replicas: { type: 'integer', minimum: 0 }, hostname: nullable(string),
    pod: nullable(string), node: nullable(string), podBy: { type: 'string', enum: ['hostname', 'name'] }, tags: arrayOf(string),
  }, ['name', 'id', 'connected', 'draining', 'primaries', 'replicas'])),
  tables: arrayOf(closed({
    table: { type: 'string', description: 'db.table' }, id: string, readyForWrites: boolean, readyForReads: boolean, allReplicasReady: boolean,
    error: { type: 'string', description: 'RethinkDB\'s word for a table it cannot describe (none of its replicas reachable); such a table is listed with no shards' },
    shards: arrayOf(closed({
      index: integer, primary: nullable(string), acting: arrayOf(string),
      replicas: arrayOf(closed({ server: string, state: string, voting: boolean })),
    })),
  }, ['table', 'id', 'readyForWrites', 'readyForReads', 'allReplicasReady', 'shards'])),
  backfills: arrayOf(closed({ table: string, from: nullable(string), to: nullable(string), progress: nullable(number) })),
  draining: arrayOf(closed({ server: nullable(string), id: string, reason: nullable(string), since: nullable(dateTime), present: boolean })),
  runningOperations: arrayOf(closed({ id: string, kind: operationKind, href: string })),
  perfWarnings: arrayOf(open({ serverId: string, pod: nullable(string) }, ['serverId'])),
  migrations: arrayOf(open({ serverId: string, action: string, operationId: string }, ['serverId', 'action'])),
  pendingRestores: arrayOf(open({ serverId: string, pod: nullable(string), reason: nullable(string) }, ['serverId'])),
  lostServers: {
    ...arrayOf(closed({
      serverId: string, server: string, since: dateTime, restoreAt: nullable(dateTime), reason: string,
    }, ['serverId', 'server', 'since', 'restoreAt', 'reason'])),
    description: 'servers the table configs name that are disconnected, since when (as this leader saw it first), and when their replicas are recreated elsewhere (LOSS_RESTORE_AFTER_SECONDS), or why not yet',
  },
  reconciliation: { ...nullable(object), description: 'what start-up reconciled; null until it has' },
  nodeMaintenance: arrayOf(closed({ node: string, signal: object })),
  leadership: ref('LeaderView'),
  pods: nullable(arrayOf(closed({ pod: string, node: nullable(string), hostname: nullable(string), phase: nullable(string), ready: boolean }))),
  podsError: { type: 'string', description: 'why Kubernetes did not list the pods (pods is null then)' },
  monitor: nullable(ref('MonitorSummary')),
}, ['backend', 'servers', 'tables', 'backfills', 'draining', 'runningOperations', 'perfWarnings', 'migrations', 'pendingRestores', 'lostServers', 'reconciliation', 'nodeMaintenance', 'leadership', 'pods', 'monitor']);

// src/sandbox/sandbox-kube.js publicPod, and src/sandbox/sandbox-cluster.js's servers.
const SandboxPod = closed({
  name: string, uid: string, nodeName: string, podIp: string, hostname: string, phase: string, ready: boolean,
  annotations: { type: 'object', additionalProperties: string }, cpuRequestCores: nullable(number), cpuLimitCores: nullable(number),
  revision: { ...string, description: 'the StatefulSet revision the pod was made from' },
  readinessGates: { type: 'object', additionalProperties: nullable(string), description: "each readiness gate's condition status (null: not set yet)" },
});
const sandboxSnapshot = { pods: arrayOf(ref('SandboxPod')), cluster: arrayOf(closed({ name: string, connected: boolean })) };

// src/routes/sandbox-routes.js, one per route.
const SandboxServerCrashed = closed({ crashed: string, mode: { type: 'string', enum: ['kill', 'term', 'cut'] }, ...sandboxSnapshot });
const SandboxServerRestored = closed({ restored: string, ...sandboxSnapshot });
const SandboxNodeCrashed = closed({ crashed: string, ...sandboxSnapshot });
const SandboxNodeCordoned = closed({ node: string, cordoned: boolean, ...sandboxSnapshot });
const SandboxPodStarted = closed({ started: string, node: string, note: string });
const SandboxPodCpu = closed({ pod: string, cpuDemandCores: number });
const SandboxInterference = closed({ pod: string, node: string, interferenceCores: number });
const SandboxScaled = closed({ replicas: integer });
const SandboxEvents = closed({
  events: arrayOf(closed({ pod: string, reason: string, message: string, type: { type: 'string', enum: ['Normal', 'Warning'] }, namespace: string, time: dateTime })),
});

export const RESPONSE_SCHEMAS = {
  OperationRef, Timings, ShardConfig, Change, NamedItem, ActionReport, ActionResult, ReleaseResult, DataMoveStarted,
  Decision, PrestopResult, PoststartStarted, PerfWarningResult, PerfWarningEnded, PerfWarningEndedOnNode, PerfWarningEndResult,
  OperationStep, Operation, OperationList, AuditRecord, AuditList, MonitorView, LatencyView, ScaleOutState, MonitorSummary, LeaderView, ClusterView,
  SandboxPod, SandboxServerCrashed, SandboxServerRestored, SandboxNodeCrashed, SandboxNodeCordoned, SandboxPodStarted, SandboxPodCpu,
  SandboxInterference, SandboxScaled, SandboxEvents,
};
