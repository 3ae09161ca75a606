// Once this replica leads: what the manager needs from the RethinkDB StatefulSet's pods (hooks, their token, the
// readiness gate, the grace period, the loopback address) and finds missing, said in the log in plain words, one line
// per missing piece, with where the docs give the patch (src/policy/attachment.js decides). Most useful when the
// manager is attached to a StatefulSet it did not install (docs/existing-statefulset.md). Without a Kubernetes API
// there is no StatefulSet to read, and nothing is said.

import { checkAttachment } from '../policy/attachment.js';

export function createAttachmentCheck({ kube, config, clock, logger, metrics }) {
  const log = logger.child({ module: 'attachment' });
  let last = null;

  async function run() {
    if (!kube?.getStatefulSetPodTemplate) return null;
    let template;
    try {
      template = await kube.getStatefulSetPodTemplate();
    } catch (err) {
      log.warn({ err: err.message, statefulSet: config.kubernetes.statefulSetName }, 'the StatefulSet could not be read: what the manager needs from its pods is not checked');
      return null;
    }
    const findings = checkAttachment(template, {
      statefulSetName: config.kubernetes.statefulSetName,
      namespace: config.kubernetes.namespace,
      podLabelSelector: config.kubernetes.podLabelSelector,
      authMode: config.auth.mode,
      audience: config.auth.audience,
      readinessGateEnabled: config.readiness.enabled,
      prestopDeadlineSeconds: config.deadlines.prestopSeconds,
    });
    last = { checkedAt: new Date(clock.now()).toISOString(), statefulSet: config.kubernetes.statefulSetName, findings };
    metrics?.setSetupFindings?.(findings);
    if (findings.length === 0) log.info({ statefulSet: config.kubernetes.statefulSetName }, 'the StatefulSet\'s pods have what the manager needs (hooks, their token, the readiness gate, the grace period, the loopback address)');
    for (const f of findings) log.warn({ check: f.check, statefulSet: config.kubernetes.statefulSetName, fix: f.fix }, `${f.missing}: ${f.consequence} (the patch: ${f.fix})`);
    return last;
  }

  return { run, view: () => last };
}
