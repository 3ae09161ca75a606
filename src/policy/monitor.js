// Pure: the hot-spot monitor's state machine. Each poll's evaluation (src/monitor/hotspot.js) and the state before it
// give the next state and the decisions: raise, escalate or clear a warning, scale out (or say why not).

// The monitor's state machine. `evaluation` is this poll's verdict (src/monitor/hotspot.js). A skewed hot-spot
// must hold for `consecutivePolls` polls before a warning is raised, and stay clear for `clearCooldownMs`
// before it is ended. Uniform overload scales out by one, at most one in flight, at most one per cooldown.
// immediateUtilization (0: off): a pod hot on the interference signal at or above it raises on its first poll
// instead of after consecutivePolls: a node that busy for a whole poll interval is no passing spike, and each poll
// waited is a poll interval of slow operations. Not on the pod's own load: a backfill or an index build can hold a
// pod at its limit for a poll, and only interference was measured (docs/evaluation/README.md, on real RethinkDB).
// monitorWarnings ([{ pod, since, long }]): the monitor's own warnings as persisted on the pods. A pod with one counts
// as raised, so that a monitor that did not raise it itself (a restarted manager, a new leader) ends it too.
// longMs (0: off): a pod hot on interference for consecutivePolls polls whose warning from the monitor was raised at
// least longMs ago and is not long yet is escalated (decidePerfWarningEscalation), once: the escalation makes the
// warning long. Not on the pod's own load: moving its replicas off would lower that load, end the warning and bring
// them back.
export function decideMonitorStep(previous, evaluation, options) {
  const {
    now, consecutivePolls, immediateUtilization = 0, clearCooldownMs, warnedPods = [], scaleOut, longMs = 0, monitorWarnings = [],
  } = options;
  const warned = new Set(warnedPods);
  const monitorWarned = new Map(monitorWarnings.map((w) => [w.pod, w]));
  const pods = {};
  const decisions = [];
  const hotByPod = new Map(evaluation.hot.map((h) => [h.pod, h]));
  for (const sample of evaluation.samples) {
    const remembered = previous.pods[sample.pod] ?? { hotStreak: 0, raised: false, clearSince: null, signal: null };
    const before = { ...remembered, raised: remembered.raised || monitorWarned.has(sample.pod) };
    const hot = hotByPod.get(sample.pod);
    const state = { ...before };
    if (hot) {
      state.hotStreak = before.hotStreak + 1;
      state.clearSince = null;
      state.signal = hot.signal;
      const interference = hot.hotOn?.interference;
      const immediate = immediateUtilization > 0 && Number.isFinite(interference) && interference >= immediateUtilization;
      if (!before.raised && !warned.has(sample.pod) && (state.hotStreak >= consecutivePolls || immediate)) {
        state.raised = true;
        const why = state.hotStreak >= consecutivePolls ? hot.reason
          : `${hot.reason}; raised after ${state.hotStreak} of ${consecutivePolls} polls (node ${pct(interference)} busy, at or above ${pct(immediateUtilization)})`;
        decisions.push({ type: 'raise', pod: sample.pod, signal: hot.signal, reason: why });
      }
      const warning = monitorWarned.get(sample.pod);
      const heldMs = warning ? now - Date.parse(warning.since) : 0;
      const stillStarved = Number.isFinite(hot.hotOn?.interference) && state.hotStreak >= consecutivePolls;
      if (warning && !warning.long && stillStarved && longMs > 0 && heldMs >= longMs) {
        decisions.push({
          type: 'escalate', pod: sample.pod, signal: hot.signal, heldSeconds: Math.round(heldMs / 1000),
          reason: `${hot.reason}; still hot ${Math.round(heldMs / 1000)} s after the monitor's warning (PERFWARNING_LONG_SECONDS ${longMs / 1000})`,
        });
      }
    } else {
      state.hotStreak = 0;
      if (before.raised) {
        state.clearSince = before.clearSince ?? now;
        if (now - state.clearSince >= clearCooldownMs) {
          state.raised = false;
          state.clearSince = null;
          decisions.push({ type: 'clear', pod: sample.pod, reason: `clear for ${Math.round((now - (before.clearSince ?? now)) / 1000)} s (cooldown ${clearCooldownMs / 1000} s)` });
        }
      }
    }
    pods[sample.pod] = state;
  }
  for (const [pod, state] of Object.entries(previous.pods)) {
    if (!pods[pod] && state.raised) decisions.push({ type: 'clear', pod, reason: 'the pod is gone' });
  }
  const uniformStreak = evaluation.uniform ? previous.uniformStreak + 1 : 0;
  const scale = decideScaleOut({ uniformStreak, evaluation, consecutivePolls, now, ...scaleOut });
  if (scale) decisions.push(scale);
  return { state: { pods, uniformStreak }, decisions };
}

// The monitor's scale-out (decideScaleOut's 'scale-out') as intents: one more RethinkDB pod. Its own POSTSTART then
// adds the server.
export function scaleOutIntents({ to, reason }) {
  return [{ type: 'scale-statefulset', replicas: to, reason }];
}

function decideScaleOut({ uniformStreak, evaluation, consecutivePolls, now, enabled, inFlight, lastAt, cooldownMs, replicas, maxReplicas }) {
  if (!evaluation.uniform || uniformStreak < consecutivePolls) return null;
  const base = `uniform overload: average utilization ${pct(evaluation.averages.own)} for ${uniformStreak} polls`;
  if (!enabled) return { type: 'scale-out-suppressed', reason: `${base}, but scale-out is disabled` };
  if (inFlight) return { type: 'scale-out-suppressed', reason: `${base}, but a scale-out is already in flight` };
  if (lastAt !== null && now - lastAt < cooldownMs) return { type: 'scale-out-suppressed', reason: `${base}, but the last scale-out was ${Math.round((now - lastAt) / 1000)} s ago (cooldown ${cooldownMs / 1000} s)` };
  if (replicas >= maxReplicas) return { type: 'scale-out-suppressed', reason: `${base}, but the StatefulSet is at its maximum of ${maxReplicas}` };
  return { type: 'scale-out', to: replicas + 1, reason: `${base}: scale the StatefulSet from ${replicas} to ${replicas + 1}` };
}

// Whether a scale-out to `to` pods is over: that many pods are Ready and no POSTSTART is still adding a server. Ready,
// not created: the StatefulSet counts a new pod as soon as it exists, before its kubelet has run its postStart hook
// (on real kubelets that left a scale-out in flight for no poll at all). A new pod's postStart calls POSTSTART before
// it can be Ready, so Ready means the POSTSTART has begun, and once it has finished the new server holds its share.
export function scaleOutSettled({ to, readyReplicas, poststartRunning }) {
  return readyReplicas >= to && !poststartRunning;
}

// The pods a poll found busy: own load or their node's at or above hotUtilization (pods: the monitor's view, each
// { pod, own, interference }), while that poll (lastPollAt, ISO) is at most three poll intervals old; none otherwise
// (no poll yet, or polls failing). The prober suspects their servers later (src/policy/suspicion.js, silentServers).
export function busyPodsOf({
  pods, lastPollAt, now, pollIntervalMs, hotUtilization,
}) {
  const busy = (u) => u !== null && u !== undefined && u >= hotUtilization;
  return freshPods({
    pods, lastPollAt, now, pollIntervalMs,
  }).filter((p) => busy(p.own) || busy(p.interference)).map((p) => p.pod);
}

// The monitor's pods of its last poll while that poll is at most three poll intervals old; none otherwise (no poll yet,
// or polls failing): what others may still take as the pods' load now.
export function freshPods({
  pods, lastPollAt, now, pollIntervalMs,
}) {
  return lastPollAt === null || now - Date.parse(lastPollAt) > 3 * pollIntervalMs ? [] : pods;
}

export const initialMonitorState = () => ({ pods: {}, uniformStreak: 0 });

export function pct(u) {
  return u === null || u === undefined ? 'n/a' : `${Math.round(u * 100)}%`;
}
