// Pure: who asks, as a structured value: { kind: 'pod', pod } (a pod acting for itself, through its hooks),
// { kind: 'operator' }, { kind: 'monitor' } (the CPU rule) or { kind: 'latency' } (the latency trigger). A pod, the
// monitor or the latency trigger may undo only what it did itself.

export const OPERATOR = Object.freeze({ kind: 'operator' });
export const MONITOR = Object.freeze({ kind: 'monitor' });
export const LATENCY = Object.freeze({ kind: 'latency' });

// The source a warning raised by the requester is marked with ('hook' for a pod).
export function warningSourceOf(requester) {
  return {
    pod: 'hook', operator: 'operator', monitor: 'monitor', latency: 'latency',
  }[requester.kind];
}

// The only source of warnings the requester may end (null: any, for an operator).
export function endableWarningSource(requester) {
  return requester.kind === 'operator' ? null : warningSourceOf(requester);
}

// The draining mark a POSTSTART releases: an operator's drain (release-server undoes it) outlives the pod's
// restarts, so the pod itself releases only one its own PRESTOP set. (A mark written before origins were
// structured says so in `via`.)
// A drain that came from the pod's own eviction is the pod's as well. A drain that came from its node's
// maintenance (a cordon or a drain taint) is released by the pod only once it runs on another node (podNode):
// the node's uncordon releases it otherwise.
export function releasableDrain(requester, mark, { podNode = null } = {}) {
  if (!mark) return null;
  const origin = mark.origin?.kind ?? (mark.via === 'prestop' ? 'prestop' : 'operator');
  if (requester.kind !== 'pod' || origin === 'prestop' || origin === 'eviction') return mark;
  return origin === 'node' && podNode && podNode !== mark.origin.node ? mark : null;
}
