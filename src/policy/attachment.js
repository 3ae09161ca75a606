// What the manager cannot do for a RethinkDB StatefulSet it did not install, read from that StatefulSet's pod template
// (docs/existing-statefulset.md). Pure: the template as the Kubernetes adapter projects it (getStatefulSetPodTemplate)
// and the manager's configuration in; one finding per missing piece out, each in plain words: what is missing, what
// the manager then cannot do, and the section of the docs with the smallest patch. The chart's own StatefulSet has
// none.

export const READINESS_CONDITION = 'rethinkdb-manager.io/replicas-ready';
const DOCS = 'docs/existing-statefulset.md';

// RETHINKDB_POD_SELECTOR's equality terms (k=v, k==v, comma-separated); a set-based term is not checked here.
export function selectorTerms(selector) {
  return selector.split(',').map((t) => t.trim()).filter(Boolean).map((t) => {
    const match = /^([^=!\s]+)\s*==?\s*([^=!\s]*)$/.exec(t);
    return match ? { key: match[1], value: match[2] } : null;
  }).filter(Boolean);
}

// The container that runs the RethinkDB server: the one that exposes the cluster port 29015, else one named
// rethinkdb, else the first.
export function serverContainer(template) {
  const containers = template.containers ?? [];
  return containers.find((c) => (c.ports ?? []).includes(29015)) ?? containers.find((c) => c.name === 'rethinkdb') ?? containers[0] ?? null;
}

// statefulSet: null when it does not exist; else { name, podLabels, terminationGracePeriodSeconds, readinessGates,
// volumes: [{ name, tokenAudiences }], containers: [{ name, ports, text, preStop, postStart, volumeMounts }] } (text:
// the command and arguments joined; preStop/postStart: the hook's command joined, its HTTP path, or null).
// config: { statefulSetName, namespace, podLabelSelector, authMode, audience, readinessGateEnabled,
// prestopDeadlineSeconds }. -> [{ check, missing, consequence, fix }]
export function checkAttachment(statefulSet, config) {
  if (!statefulSet) {
    return [{
      check: 'statefulset',
      missing: `no StatefulSet ${config.statefulSetName} in the namespace ${config.namespace} (RETHINKDB_STATEFULSET)`,
      consequence: 'the manager cannot tell a rollout from single stops (each returning server gets its primaries back at once) and the monitor cannot scale out',
      fix: `${DOCS}#configure-the-manager`,
    }];
  }
  const findings = [];
  const add = (check, missing, consequence, section) => findings.push({ check, missing, consequence, fix: `${DOCS}#${section}` });
  const labels = statefulSet.podLabels ?? {};
  const unmatched = selectorTerms(config.podLabelSelector).filter((t) => labels[t.key] !== t.value);
  if (unmatched.length > 0) {
    add('pod-selector', `the pods of ${statefulSet.name} do not carry ${unmatched.map((t) => `${t.key}=${t.value}`).join(', ')} (RETHINKDB_POD_SELECTOR=${config.podLabelSelector})`,
      'the manager finds none of these pods: it refuses their hooks, places no server on a pod or node, and sets no readiness condition',
      'configure-the-manager');
  }
  const container = serverContainer(statefulSet);
  const name = container ? `the container ${container.name}` : 'the pod template';
  if (!container?.preStop?.includes('/v1/hooks/prestop')) {
    add('prestop-hook', `${name} has no preStop hook that calls the manager (/v1/hooks/prestop)`,
      'a pod that stops (deleted, rolled, evicted past the webhook) keeps its primaries until RethinkDB finds it gone: its clients see the whole failover',
      'the-hooks');
  }
  if (!container?.postStart?.includes('/v1/hooks/poststart')) {
    add('poststart-hook', `${name} has no postStart hook that calls the manager (/v1/hooks/poststart)`,
      'a server drained by its preStop stays drained when it returns (no primary until release-server), and a pod that replaces a lost server is not given its replicas',
      'the-hooks');
  }
  if (config.authMode === 'tokenreview') {
    const tokenVolumes = new Set((statefulSet.volumes ?? []).filter((v) => (v.tokenAudiences ?? []).includes(config.audience)).map((v) => v.name));
    if (!(container?.volumeMounts ?? []).some((m) => tokenVolumes.has(m))) {
      add('hook-token', `${name} mounts no service-account token for the audience ${config.audience} (AUTH_AUDIENCE)`,
        'the hooks cannot prove which pod calls: the manager answers them 401 and moves nothing',
        'the-hooks');
    }
  }
  if (config.readinessGateEnabled && !(statefulSet.readinessGates ?? []).includes(READINESS_CONDITION)) {
    add('readiness-gate', `the pods have no readiness gate ${READINESS_CONDITION}`,
      'a restarted pod is Ready as soon as its port answers, before its replicas have caught up: a rollout or a drain moves on to the next pod early, and a shard can be left without a ready majority',
      'the-readiness-gate');
  }
  // The shipped hook waits up to PRESTOP_DEADLINE_SECONDS and 5 s (its own clock); then RethinkDB shuts down.
  const grace = statefulSet.terminationGracePeriodSeconds ?? 30;
  const hookSeconds = config.prestopDeadlineSeconds + 5;
  if (grace < hookSeconds + 10) {
    add('grace-period', `terminationGracePeriodSeconds is ${grace}, under the preStop's ${hookSeconds} s (PRESTOP_DEADLINE_SECONDS and 5) and 10 s for RethinkDB's own shutdown`,
      'the kubelet kills the server before its preStop has moved its primaries or before it has shut down cleanly',
      'the-hooks');
  }
  const text = container?.text ?? '';
  if (!/--canonical-address[ =]127\.0\.0\.1\b/.test(text)) {
    add('canonical-loopback', `${name} does not start RethinkDB with --canonical-address 127.0.0.1 beside its own address (as far as its command and arguments show: a start script in the image is not read)`,
      'RethinkDB 2.4.4 crashes on the other servers when a killed peer\'s address resets their reconnect (rethinkdb/rethinkdb#6880): one OOM kill can take several servers down',
      'the-loopback-address');
  }
  return findings;
}
