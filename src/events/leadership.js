// This replica's part in leading: it leads alone (soleLeader) until startElection(); then the Lease decides
// (src/events/leader-election.js). lead() loads and reconciles the persisted state, retrying with backoff, and only
// then takes work and starts what runs while leading; follow() gives the work up. Until it has loaded its state, a
// replica takes no work and /readyz says why.

import { retryUntilDone } from '../lib/retry.js';
import { createLeaderElector, soleLeader } from './leader-election.js';

// kubePort: the Kubernetes API, unfenced (the Lease is how the fence is decided), or null.
// reconcileState(): loads and reconciles the persisted state once (src/state/reconcile.js).
// onLead(), onFollow(reason): what starts once this replica leads and has loaded its state, and what stops when it no
// longer leads. loadFollowerView(pods): a follower's marks, as the leader persisted them on the pods.
export function createLeadership({
  kubePort, work, metrics, config, clock, logger, reconcileState, onLead, onFollow, loadFollowerView,
}) {
  const log = logger.child({ module: 'manager' });
  let elector = soleLeader();
  let reconciliation = null;

  // This replica leads and has loaded its state: it serves what only the leader may serve.
  const served = () => elector.isLeading() && work.started();

  // Load the state persisted on the pods and reconcile it with the live cluster, retrying with backoff until it
  // succeeds (or this replica stops leading, or shuts down).
  async function reconcile() {
    reconciliation = await retryUntilDone(reconcileState, {
      clock, ...config.retry, stopped: () => work.shuttingDown() || !elector.isLeading(),
      onFailure: (err, { attempt, delayMs }) => {
        work.noteStarting(`the manager has not loaded its persisted state yet (attempt ${attempt} failed: ${err.message})`);
        log.warn({ err: err.message, attempt, retryInMs: delayMs }, 'state reconciliation failed; retrying');
      },
    });
    if (elector.isLeading() && !work.shuttingDown()) work.markStarted();
    return reconciliation;
  }

  // This replica leads (or is the only one): load and reconcile the persisted state, then take work and start what
  // runs while leading. Returns whether it started.
  // One at a time: a replica that loses and regains the Lease while it is still loading waits for that load first.
  let leading = Promise.resolve(false);
  function lead() {
    leading = leading.catch(() => false).then(async () => {
      await reconcile();
      if (!work.started()) return false;
      await onLead();
      return true;
    });
    return leading;
  }

  // This replica no longer leads: no new work. Work already running meets the fence at its next write.
  async function follow(reason) {
    work.close(`this manager replica does not lead (${reason}); the leader takes the work`);
    await onFollow(reason);
  }

  // The Lease election. identity: this replica's name in the Lease; addresses: { http, webhook } where the followers
  // reach it. Before it leads, this replica takes no work.
  function startElection({ identity, addresses }) {
    elector = createLeaderElector({
      kube: kubePort, leaseName: config.leaderElection.leaseName, identity, addresses, timings: config.leaderElection.timings, clock, logger,
      onStartedLeading: () => { metrics.setLeading(true); metrics.recordLeaderChange('started'); return lead(); },
      onStoppedLeading: (reason) => { metrics.setLeading(false); metrics.recordLeaderChange('stopped'); return follow(reason); },
    });
    metrics.setLeading(false);
    work.close('this manager replica has not been elected leader (yet)');
    elector.start();
    return elector;
  }

  // A follower's GET /v1/cluster shows the marks as the leader persisted them on the pods, read again at most every
  // retry period. Never while this replica leads: its own marks are the truth then.
  let followerViewAt = -Infinity;
  async function refreshFollowerView() {
    if (elector.isLeading() || !kubePort?.listRethinkDbPods || clock.now() - followerViewAt < config.leaderElection.timings.retryPeriodMs) return;
    followerViewAt = clock.now();
    const pods = await kubePort.listRethinkDbPods().catch(() => null);
    if (pods && !elector.isLeading() && !work.started()) loadFollowerView(pods);
  }

  return {
    elector: () => elector, served, reconcile, lead, follow, startElection, refreshFollowerView, reconciliation: () => reconciliation,
  };
}
