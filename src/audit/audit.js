// One audit record per mutation, whoever asked for it (a hook, an operator or the monitor): who, what, why,
// the plan, the outcome and the duration. It goes to the log as one structured line, to a Kubernetes Event on
// the pod concerned, to a bounded in-memory history (GET /v1/events), and to the metrics (GET /metrics).
// The actor comes as a structured value (src/audit/actor.js); the record shows it as text and as its label.

import { isFullOutcome } from '../actions/report.js';
import { actorLabel, describeActor } from './actor.js';

export function createAudit({ kube = null, clock, logger, metrics = null, maxRecords = 500 }) {
  const log = logger.child({ module: 'audit' });
  const records = [];
  let seq = 0;

  function record({ actor: who = null, action, target = {}, pod = null, reason = null, outcome, changes = [], skipped = [], notDone = [], durationMs = null, operation = null }) {
    seq += 1;
    const entry = {
      id: seq, time: new Date(clock.now()).toISOString(), actor: describeActor(who), actorLabel: actorLabel(who), action, target, pod, reason, outcome,
      plan: {
        changes: changes.map(({
          table, shard, kind, from, to, headroom,
        }) => ({
          table, shard, kind, from, to, ...(headroom ? { headroom: headroom.score } : {}),
        })),
        skipped, notDone,
      },
      durationMs, operation, event: pod && kube?.createPodEvent ? 'pending' : 'none',
    };
    records.push(entry);
    if (records.length > maxRecords) records.shift();
    log.info({ audit: true, ...entry }, 'action audited');
    metrics?.recordAction(entry);
    if (entry.event === 'pending') {
      const warning = !isFullOutcome(outcome);
      const message = `${action} by ${entry.actor}: ${outcome}; ${changes.length} change(s), ${skipped.length + notDone.length} not done. ${reason ?? ''}`.trim();
      kube.createPodEvent({ pod: { name: pod }, reason: eventReason(action), message, type: warning ? 'Warning' : 'Normal' })
        .then(() => { entry.event = 'created'; })
        .catch((err) => {
          entry.event = `failed: ${err.message}`;
          log.warn({ pod, action, err: err.message }, 'could not create the Kubernetes Event');
        });
    }
    return entry;
  }

  return {
    record,
    list: ({ limit = 100 } = {}) => records.slice(-limit).reverse(),
  };
}

// move-primaries-from-server -> MovePrimariesFromServer (Event reasons are UpperCamelCase).
function eventReason(action) {
  return action.split(/[-_ ]/).map((w) => w.charAt(0).toUpperCase() + w.slice(1)).join('');
}
