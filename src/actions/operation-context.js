// The operation context: what an action needs to know about the request it serves, made once where the request
// entered (a hook route, an operator command, the webhook, the node watch, the monitor, a periodic job) and passed
// unchanged from the events' executor (src/events/executor.js) to the action and its last write.
//   actor     who asked (src/audit/actor.js), for the audit record
//   requester of which kind the asker is (src/policy/requesters.js: the operator, the pod's own hook, the monitor),
//             which decides what it may undo (a pod ends only the warning it raised)
//   pod       the pod that asked (a hook's), for the audit record; null otherwise
//   dryRun    plan and report, change nothing
//   deadline  one deadline object (src/lib/clock.js) for the whole decision; null: the action's own default
//   snapshot  the cluster the decision was made on: an action plans on it instead of reading the cluster again
//             (the commit reads it again under the table locks before it writes); null: read here
//   decided   the cluster the decision was made on, kept after a reconfiguration has made `snapshot` null
//   marks     the marks the plan reads: the real ones, or a dry run's copy changed as the real run would change them
// An action reads a field it is not given as its default above (marks: its own; marksOf says so once).

// The cluster to plan on: the decision's, or a fresh read.
export async function clusterOf(store, ctx) {
  return ctx.snapshot ?? store.readCluster();
}

// The marks to plan on: the decision's (a dry run's copy), or the action's own.
export function marksOf(ctx, own) {
  return ctx.marks ?? own;
}
