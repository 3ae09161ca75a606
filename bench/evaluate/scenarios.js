// The paper's Section IV scenarios as timelines of infrastructure events, each run with and without the manager.
// A timeline gets { cluster, manager, at, mark, arm, hotServer, notes } and awaits its events at fixed times.

const RETURN_AFTER_SECONDS = 15;

// The pod's preStop hook then the stop itself; with the manager, PRESTOP first, as the StatefulSet's hook does.
async function prestopThen(ctx, stop) {
  const { manager, mark, hotServer, notes } = ctx;
  if (manager) {
    const started = performance.now();
    const res = await manager.hook('POST', `/v1/hooks/prestop?pod=rethinkdb-${hotServer}`);
    notes.prestopMs = Math.round(performance.now() - started);
    notes.prestop = { status: res.status, outcome: res.body?.outcome, primariesOff: res.body?.primariesOff, heartbeat: res.body?.heartbeat?.lowered ? res.body.heartbeat.to : null };
    mark('PRESTOP answered');
  }
  await stop();
}

// The pod's postStart hook after the server is back; the run records how long the manager's operation took.
async function poststart(ctx) {
  const { manager, mark, hotServer, notes } = ctx;
  if (!manager) return;
  const res = await manager.hook('POST', `/v1/hooks/poststart?pod=rethinkdb-${hotServer}`);
  mark('POSTSTART');
  const op = res.body?.operation?.href ? await manager.waitOperation(res.body.operation.href) : null;
  notes.poststart = { status: op?.status, outcome: op?.report?.outcome, kind: op?.report?.decision?.kind, moved: op?.report?.changes?.length ?? null };
  mark('POSTSTART done');
}

async function plannedStop(ctx) {
  const { cluster, at, mark, hotServer } = ctx;
  await at(10);
  await prestopThen(ctx, async () => { await cluster.stopServer(hotServer, 'SIGTERM'); mark('SIGTERM'); });
  await at(10 + RETURN_AFTER_SECONDS);
  await cluster.restartServer(hotServer);
  mark('server back');
  await poststart(ctx);
}

export const SCENARIOS = {
  // IV-B2: a planned stop (clean SIGTERM) of the server holding the busiest shard's primary, back 15 s later.
  'planned-stop': {
    name: 'planned-stop', title: 'IV-B2 planned stop and return (SIGTERM)', durationSeconds: 45, timeline: plannedStop,
  },
  // The same, with the manager leaving the primaries where PRESTOP put them (POSTSTART_GIVE_BACK=never).
  'planned-stop-keep': {
    name: 'planned-stop-keep', title: 'IV-B2 planned stop and return, no hand-back', durationSeconds: 45, timeline: plannedStop,
    managerEnv: { POSTSTART_GIVE_BACK: 'never' },
  },
  // IV-B2 variant: PRESTOP answered, then the node drops off the network (no SIGTERM), back 15 s later.
  'prestop-then-cut': {
    name: 'prestop-then-cut',
    title: 'IV-B2 PRESTOP then a silent network loss',
    durationSeconds: 45,
    needs: 'netns',
    async timeline(ctx) {
      const { cluster, at, mark, hotServer } = ctx;
      await at(10);
      await prestopThen(ctx, async () => { cluster.cutNetwork(hotServer); mark('network cut'); });
      await at(10 + RETURN_AFTER_SECONDS);
      cluster.restoreNetwork(hotServer);
      mark('network back');
      await poststart(ctx);
    },
  },
  // IV-B1: an unannounced crash (SIGKILL) and, 15 s later, the same server back.
  'crash-and-return': {
    name: 'crash-and-return',
    title: 'IV-B1 unannounced crash (SIGKILL) and return',
    durationSeconds: 45,
    async timeline(ctx) {
      const { cluster, at, mark, hotServer } = ctx;
      await at(10);
      await cluster.stopServer(hotServer, 'SIGKILL');
      mark('SIGKILL');
      await at(10 + RETURN_AFTER_SECONDS);
      await cluster.restartServer(hotServer);
      mark('server back');
      await poststart(ctx);
    },
  },
};
