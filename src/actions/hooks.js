// What each lifecycle event does, in terms of the actions. PRESTOP: demote every primary on the pod's server.

import { AppError } from '../errors.js';
import { findServerForPod } from '../cluster/cluster-model.js';

export function createHooks({ store, actions, kube, config, logger }) {
  const log = logger.child({ module: 'hooks' });

  // The pod's RethinkDB server: by hostname (= pod name in a StatefulSet), canonical address, pod IP, or override.
  async function serverForPod(podName) {
    const pod = kube ? await kube.getPod(podName).catch((err) => {
      if (err.code === 'NOT_FOUND') throw new AppError('POD_NOT_FOUND', `pod "${podName}" does not exist in namespace ${config.kubernetes.namespace}`);
      throw err;
    }) : null;
    const cluster = await store.readCluster();
    const server = findServerForPod(cluster, { podName, podIp: pod?.podIp ?? null, overrides: config.podServerOverrides });
    return { pod, server };
  }

  async function prestop({ pod, dryRun = false, deadlineSeconds }) {
    const { server } = await serverForPod(pod);
    if (!server) {
      log.warn({ pod }, 'preStop for a pod with no connected RethinkDB server; nothing to demote');
      return { event: 'PRESTOP', pod, server: null, outcome: 'nothing_to_do', primariesOff: true, reason: 'no connected RethinkDB server matches this pod' };
    }
    const report = await actions.movePrimariesFromServer({ server: server.name, dryRun, deadlineSeconds, reason: `PRESTOP ${pod}` });
    const primariesOff = report.skipped.length === 0 && report.notDone.length === 0 && report.settled !== false;
    log.info({ pod, server: server.name, outcome: report.outcome, primariesOff }, 'preStop handled');
    return { event: 'PRESTOP', pod, server: server.name, outcome: report.outcome, primariesOff, report };
  }

  return { prestop };
}
