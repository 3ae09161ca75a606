// Who acted, as a structured value: a hook (which one, for which pod, called by whom), a caller (an operator or
// another authenticated identity), the monitor, the latency trigger, or the manager's own periodic work. The audit trail shows it as
// text; the metrics label it by its kind and fields, never by parsing the text.

export const hookActor = (hook, pod, caller = null) => ({ kind: 'hook', hook, pod, caller });
export const callerActor = (identity) => ({ kind: 'caller', name: identity?.username ?? 'anonymous', pod: identity?.pod ?? null });
export const managerActor = (task) => ({ kind: 'manager', task });
export const MONITOR_ACTOR = Object.freeze({ kind: 'monitor' });
export const LATENCY_ACTOR = Object.freeze({ kind: 'latency' });

// A name given as text (an operator named in a direct call) is a caller.
function asActor(value) {
  if (value && typeof value === 'object' && value.kind) return value;
  return typeof value === 'string' && value !== '' ? { kind: 'caller', name: value, pod: null } : { kind: 'unknown' };
}

// As people read it: hook:prestop:rethinkdb-1 (system:serviceaccount:rethinkdb:rethinkdb (pod rethinkdb-1)).
export function describeActor(value) {
  const actor = asActor(value);
  if (actor.kind === 'hook') return `hook:${actor.hook}:${actor.pod}${actor.caller ? ` (${describeActor(actor.caller)})` : ''}`;
  if (actor.kind === 'caller') return actor.pod ? `${actor.name} (pod ${actor.pod})` : actor.name;
  if (actor.kind === 'manager') return `manager:${actor.task}`;
  return actor.kind;
}

// As a metrics label: no pod, which would make one series per pod (the pod is in the audit record).
export function actorLabel(value) {
  const actor = asActor(value);
  if (actor.kind === 'hook') return `hook:${actor.hook}`;
  if (actor.kind === 'caller') return actor.name;
  if (actor.kind === 'manager') return `manager:${actor.task}`;
  return actor.kind;
}
