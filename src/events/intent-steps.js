// Every intent type the executor (./executor.js) runs: what it is, and the step that runs it, in one list. A type's
// properties (./intent-types.js reads them):
// - reconfigures: it writes tables' configurations, so the cluster read a decision was made on is stale after it;
// - dryRun: a dry run runs it (an action that only plans, or a mark changed on a copy that is never persisted, so
//   that a plan after it sees what the real run's would); a dry run skips the others, which write;
// - action: callers see it among a decision's actions; the others only move marks or the manager's connection, or
//   wait (PRESTOP's waits are reported on their own, as majorityWait and settleWait).
// run(intent, ctx, deps): intent is the policy's plain object; ctx the decision's operation context
// (src/actions/operation-context.js) with `snapshot` (null once an intent before it reconfigured a table), `decided`
// and `observe(cluster)` (a fresher read the next intents plan on); deps the executor's: store, kube, actions,
// marks (the real ones, or a dry run's copy), operations, config, clock, log.

import { clusterOf } from '../actions/operation-context.js';
import { failedMoveReport } from '../actions/raft-leadership.js';
import { describeActor } from '../audit/actor.js';
import { appError } from '../errors.js';
import { createDeadline, withinMs } from '../lib/clock.js';
import { unreadyReplicasOf } from '../planner/eligibility.js';
import { decideHeartbeatLowering, heartbeatWriteBudgetMs } from '../policy/heartbeat.js';
import {
  decidePrestopWait, prestopWaitBudgetMs, prestopWaitOutcome, prestopWaitSkipped, prestopWaitUnread,
} from '../policy/rollout.js';

export const INTENT_STEPS = Object.freeze({
  // The manager's own connection leaves the servers about to stop or be drained (and those already marked).
  'move-connection': {
    dryRun: true,
    async run({ servers }, { dryRun }, { store, marks, log }) {
      if (dryRun) return { moved: false, reason: 'dry run' };
      const moved = await store.steerAwayFrom(await marks.drainingIds(servers.map((s) => s.id)))
        .catch((err) => ({ moved: false, reason: err.message }));
      if (moved.moved) log.info({ from: moved.from, to: moved.to }, 'connection moved off a server about to be drained');
      return moved;
    },
  },
  // origin: { kind: 'prestop' | 'operator' }; the mark keeps it with who asked.
  'mark-draining': {
    dryRun: true,
    async run({ servers, origin, reason }, { actor }, { marks }) {
      for (const s of servers) {
        await marks.markDraining(s.id, { reason, origin: { ...origin, by: actor ? describeActor(actor) : null }, serverName: s.name, pod: s.pod });
      }
      return { marked: servers.map((s) => s.name) };
    },
  },
  'mark-perf-warning': {
    dryRun: true,
    async run({ servers, warning }, _ctx, { marks }) {
      // A new warning also cancels a restore that was waiting to give the server its primaries back.
      for (const s of servers) await marks.setPerfWarning(s.id, warning, { serverName: s.name, pod: s.pod });
      return { marked: servers.map((s) => s.name) };
    },
  },
  // An escalated warning becomes long once its migration has started: the mark as it is now (with what the
  // demotion just added to it), long.
  'mark-perf-warning-long': {
    dryRun: true,
    async run({ servers, decision, at }, _ctx, { marks }) {
      const marked = [];
      for (const s of servers) {
        const current = await marks.getPerfWarning(s.id);
        if (!current) continue;
        await marks.setPerfWarning(s.id, { ...current, long: true, decision, escalatedAt: at }, { serverName: s.name, pod: s.pod });
        marked.push(s.name);
      }
      return { marked };
    },
  },
  // One plan for every server named; what each lost is kept with its mark ('draining' or 'perfwarning') so
  // that it can be given back.
  demote: {
    reconfigures: true, dryRun: true, action: true,
    async run({
      servers, node = null, pods = null, mark, reason, prefer = null,
    }, {
      actor, dryRun, deadline, snapshot,
    }, { actions, marks }) {
      const report = await actions.movePrimariesFromServers({
        servers: servers.map((s) => s.id), node, pods, reason, prefer,
      }, { actor, dryRun, deadline, snapshot, marks });
      if (!dryRun) {
        for (const s of servers) await marks.noteDemoted(s.id, mark, report.changes.filter((c) => c.from === s.name));
      }
      return report;
    },
  },
  // After a demotion: the tables each server leads in Raft get another leader, while its mark lasts (whileMarked:
  // its perf warning, or for a PRESTOP its draining mark). A failure is reported, not thrown: the demotion before it
  // is what the warning or the PRESTOP is for. { reports: [one per server] }
  'move-raft-leadership': {
    reconfigures: true, action: true,
    async run({ servers, reason, whileMarked = 'perfwarning' }, { actor, deadline, decided }, { actions, marks, log }) {
      const reports = [];
      for (const s of servers) {
        const stillWanted = async () => Boolean(await (whileMarked === 'draining' ? marks.getDraining(s.id) : marks.getPerfWarning(s.id)));
        reports.push(await actions.moveRaftLeadership({ server: s.id, reason, stillWanted }, { actor, deadline, decided }).catch((err) => {
          log.warn({ server: s.name, err: err.message }, 'Raft leadership not moved');
          return failedMoveReport(s.name, reason, err);
        }));
      }
      return { reports };
    },
  },
  // Marks the departure first, so that a manager restarted after the write still restores the heartbeat.
  // A failure is reported, not thrown: the demotion before it is what the PRESTOP is for.
  'lower-heartbeat': {
    action: true,
    async run({ server, seconds, windowSeconds }, { decided, deadline }, { store, marks, clock, log }) {
      try {
        const current = (await clusterOf(store, { snapshot: decided })).heartbeatTimeoutSecs;
        const plan = decideHeartbeatLowering({ current, departures: await marks.departures(), seconds, windowSeconds, now: clock.now() });
        if (!plan.departure) return { lowered: false, reason: plan.reason };
        const budgetMs = heartbeatWriteBudgetMs({ leftMs: deadline?.remainingMs() });
        await marks.setDeparture(server.id, plan.departure, { serverName: server.name, pod: server.pod });
        if (plan.write !== null) {
          const write = store.writeHeartbeatTimeout(plan.write);
          if (budgetMs === 0) {
            // No time to wait for it: sent all the same (a lowered heartbeat matters most in a cluster this slow).
            write.catch((err) => log.warn({ server: server.name, err: err.message }, 'heartbeat timeout write sent without waiting failed'));
            return { lowered: false, reason: 'sent, not waited for: the deadline leaves no time before the demotion (it may still land)' };
          }
          await (budgetMs === null ? write : withinMs(write, budgetMs, () => appError('heartbeatWriteSlow', { ms: budgetMs })));
        }
        log.info({ server: server.name, from: current, to: seconds, until: plan.departure.until }, 'heartbeat timeout lowered for a departing server');
        return { lowered: true, from: current, to: seconds, until: plan.departure.until, reason: plan.reason };
      } catch (err) {
        log.warn({ server: server.name, err: err.message }, 'heartbeat timeout not lowered');
        return { lowered: false, reason: `not lowered: ${err.message}` };
      }
    },
  },
  'set-heartbeat': {
    action: true,
    async run({ seconds, reason }, _ctx, { store, log }) {
      await store.writeHeartbeatTimeout(seconds);
      log.info({ seconds, reason }, 'heartbeat timeout set');
      return { seconds };
    },
  },
  'end-departure': {
    async run({ servers }, _ctx, { marks }) {
      for (const id of servers) await marks.clearDeparture(id);
      return { ended: servers };
    },
  },
  // The action's answer: the operation started, or with dryRun the plan.
  // whileWarned: only while the server still has its perf warning (an escalation whose warning was ended during
  // its demotion starts no migration).
  'migrate-replicas-off': {
    reconfigures: true, dryRun: true, action: true,
    async run({ server, reason, whileWarned = false }, { actor, dryRun, deadline, snapshot }, { actions, marks }) {
      if (whileWarned && !(await marks.getPerfWarning(server.id))) return { operation: null, skipped: 'the perf warning ended before the migration started' };
      return actions.migrateReplicasOff({ server: server.id, reason }, {
        actor, dryRun, deadline, snapshot, marks,
      });
    },
  },
  // released: those that were draining.
  release: {
    dryRun: true,
    async run({ servers }, _ctx, { marks }) {
      const released = [];
      for (const id of servers) if (await marks.release(id)) released.push(id);
      return { released };
    },
  },
  'clear-perf-warning': {
    dryRun: true,
    async run({ server }, _ctx, { marks }) {
      return { cleared: await marks.clearPerfWarning(server.id) };
    },
  },
  // Persisted, so that a restarted manager still gives the primaries back once the server is healthy.
  'await-health': {
    async run({ server, warning, reason }, { actor, pod }, { marks }) {
      await marks.setRestore(server.id, { warning, reason, actor }, { serverName: server.name, pod });
      return { waiting: true };
    },
  },
  // Ready on the snapshot, or on the first read that shows it, which the next intents plan on.
  'wait-for-replicas-ready': {
    action: true,
    async run({ server }, { snapshot, observe }, deps) {
      return { ready: await waitForReplicasReady(server.id, snapshot, observe, deps) };
    },
  },
  // prefer: shards to give back ([{ tableId, shard }] to `server`, or [{ tableId, shard, serverId }]), e.g. what a
  // server held before it was demoted.
  // byLoad: level with the least busy shards (client traffic from rethinkdb.stats); `prefer` then breaks ties.
  'rebalance-primaries': {
    reconfigures: true, dryRun: true, action: true,
    async run({
      server = null, prefer = [], byLoad = false, reason, clearsRestore = false,
    }, {
      actor, pod, dryRun, deadline, snapshot,
    }, { actions, marks }) {
      if (clearsRestore) await marks.clearRestore(server.id);
      return actions.rebalancePrimaries({ reason, prefer: prefer.map((d) => ({ serverId: server?.id, ...d })), byLoad }, {
        actor, pod, dryRun, deadline, snapshot, marks,
      });
    },
  },
  // After a failover RethinkDB did on its own (a server crashed or vanished): its acting primaries become the
  // configured ones, so that the lost server's return hands nothing back unplanned.
  'adopt-acting-primaries': {
    reconfigures: true, dryRun: true, action: true,
    async run({ reason }, {
      actor, pod, dryRun, deadline, snapshot,
    }, { actions, marks }) {
      return actions.adoptActingPrimaries({ reason }, {
        actor, pod, dryRun, deadline, snapshot, marks,
      });
    },
  },
  // PRESTOP, once the server is marked: wait while stopping it would leave a shard without a ready voting majority,
  // within prestopWaitBudgetMs. The demotion then plans on the last read. A read that fails ends the wait (the
  // demotion matters more). A dry run says whether it would wait, and does not. After the demotion (phase
  // after-demote) the same wait, on a fresh read, for the secondaries catching up with their new primaries; a dry
  // run moved nothing, so it has nothing to say there.
  'wait-for-majority': {
    dryRun: true,
    async run({ server, maxWaitSeconds, phase }, { snapshot, observe, deadline, dryRun }, { store, config, clock }) {
      const startedAt = clock.now();
      const skipped = prestopWaitSkipped({ phase, dryRun });
      if (skipped) return { ...skipped, waitedMs: 0 };
      const waitUntil = createDeadline(clock, prestopWaitBudgetMs({ maxWaitSeconds, leftMs: deadline?.remainingMs() }));
      const report = (outcome, reason, short) => ({ outcome, waitedMs: clock.now() - startedAt, short, reason });
      const unreadable = (err, from) => ({ ...prestopWaitUnread({ phase, from, message: err.message }), waitedMs: clock.now() - startedAt });
      let cluster;
      try {
        cluster = await clusterOf(store, { snapshot });
      } catch (err) {
        return unreadable(err, null);
      }
      const initial = decidePrestopWait(cluster, { serverId: server.id, serverName: server.name, waitLeftMs: waitUntil.remainingMs() });
      if (initial.short.length === 0) return report('none', initial.reason, initial.short);
      if (dryRun) return report(initial.wait ? 'would_wait' : 'gave_up', initial.reason, initial.short);
      let last = initial;
      while (last.wait) {
        await clock.sleep(config.waitPollIntervalMs);
        try {
          cluster = await store.readCluster();
        } catch (err) {
          return unreadable(err, initial);
        }
        last = decidePrestopWait(cluster, { serverId: server.id, serverName: server.name, waitLeftMs: waitUntil.remainingMs() });
      }
      observe(cluster);
      const outcome = prestopWaitOutcome(cluster, { serverId: server.id, initialShort: initial.short });
      if (outcome === 'waited') return report(outcome, `${initial.reason}; the majority was back after ${clock.now() - startedAt} ms`, initial.short);
      return report(outcome, last.short.length > 0 ? last.reason : `${initial.reason}; a shard lost its voting majority meanwhile, which no wait brings back`, initial.short);
    },
  },
  // A server back during a rollout: what its last drain took is owed back when the rollout ends (persisted, so that
  // another replica leading by then still gives it back).
  'owe-hand-back': {
    async run({ server, pod, demoted, reason }, _ctx, { marks, clock }) {
      const owed = await marks.setHandBack(server.id, { demoted, reason, since: new Date(clock.now()).toISOString() }, { serverName: server.name, pod });
      return { owed: owed.demoted.length };
    },
  },
  'settle-hand-backs': {
    async run({ servers }, _ctx, { marks }) {
      for (const id of servers) await marks.clearHandBack(id);
      return { settled: servers.length };
    },
  },
  'add-server': {
    reconfigures: true, action: true,
    async run({
      server, reason, clearsRestore = false, wait = true,
    }, { actor, snapshot }, { actions, marks, operations }) {
      if (clearsRestore) await marks.clearRestore(server.id);
      const started = await actions.addServer({ server: server.id, reason }, { actor, snapshot });
      return wait ? operations.wait(started.operation.id) : { id: started.operation.id, status: started.operation.status };
    },
  },
  'scale-statefulset': {
    action: true,
    async run({ replicas }, _ctx, { kube }) {
      if (!kube) throw appError('noKubeForScale');
      await kube.patchStatefulSetScale(replicas);
      return { replicas };
    },
  },
  'replace-server': {
    reconfigures: true, action: true,
    async run({ lost, server, reason }, { actor, snapshot }, { actions, operations }) {
      const started = await actions.replaceServer({ lost, server: server.id, reason }, { actor, snapshot });
      return operations.wait(started.operation.id);
    },
  },
});

// Ready on the snapshot, or on the first read that shows it (observed: the next intents plan on it).
async function waitForReplicasReady(serverId, snapshot, observe, { store, clock, config }) {
  const deadline = createDeadline(clock, config.deadlines.migrationSeconds * 1000);
  let cluster = await clusterOf(store, { snapshot });
  for (;;) {
    if (unreadyReplicasOf(cluster, serverId).length === 0) {
      observe(cluster);
      return true;
    }
    if (deadline.expired()) return false;
    await clock.sleep(config.waitPollIntervalMs);
    cluster = await store.readCluster();
  }
}
