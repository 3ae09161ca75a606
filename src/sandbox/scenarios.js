// The paper's five scenarios (Section IV-B), and a rolling restart of the StatefulSet, replayed on the sandbox in
// virtual time through the manager's real HTTP routes: sandbox admin endpoints play Kubernetes and the
// infrastructure, hooks and the monitor play the manager's inputs. Each step records the time, the event, the
// manager's decision and reason, and the resulting primary map. Used by `npm run scenarios` and by the end-to-end
// tests.

import { loadConfig } from '../config.js';
import { createVirtualClock } from '../lib/clock.js';
import { createLogger } from '../logger.js';
import { connectSandboxHooks, createSandboxWorld } from './sandbox-world.js';

const POLL_SECONDS = 15;

export const SCENARIOS = [
  { id: 'IV-B1', title: 'A node crashes, then a replacement pod arrives', run: nodeCrashThenReplacement },
  { id: 'IV-B2', title: "A node's shutdown is announced in advance by PRESTOP", run: announcedShutdown },
  { id: 'IV-B3', title: 'A brief hot-spot detected by the monitor', run: monitorDetectedHotspot },
  { id: 'IV-B4', title: 'A brief hot-spot announced by PERFWARNING', run: announcedHotspot },
  { id: 'IV-B5', title: "A long hot-spot, then a second node's crash", run: longHotspotThenCrash },
  {
    id: 'ROLLOUT',
    title: 'kubectl rollout restart statefulset/rethinkdb: every server in turn, as one event',
    run: rollingRestart,
    // A returning server catches up for 3 s before its replicas are ready (on 2.4.4 about 0.5 s at 200 ops/s; longer
    // here so that the rule shows), and the pods carry the chart's readiness gate.
    world: { modelOptions: { returnBackfillMs: 3000 }, kubeOptions: { readinessGate: true } },
  },
];

// Starts a sandbox manager on an ephemeral loopback port and returns a driver for one scenario.
// world: more options for the sandbox ({ modelOptions, kubeOptions }, see createSandboxWorld).
async function createScenarioDriver({ env = {}, logger, world: worldOptions = {} } = {}) {
  const config = loadConfig({ LOG_LEVEL: 'silent', MONITOR_POLL_INTERVAL_MS: String(POLL_SECONDS * 1000), ...env });
  const clock = createVirtualClock();
  const world = createSandboxWorld({ config, clock, logger: logger ?? createLogger({ level: config.logLevel }), ...worldOptions });
  const server = await new Promise((resolve) => { const s = world.manager.app.listen(0, '127.0.0.1', () => resolve(s)); });
  const base = `http://127.0.0.1:${server.address().port}`;
  const steps = [];
  let nextPollAt = clock.now() + POLL_SECONDS * 1000;

  async function call(method, path, body) {
    const res = await fetch(`${base}${path}`, {
      method, ...(body ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: await res.json().catch(() => null) };
  }
  connectSandboxHooks(world.kube, (path) => call('POST', path).then((r) => r.body));

  // Seconds since the scenario's start, to a tenth.
  const secondsAt = (ms) => Math.round((ms - clock.start) / 100) / 10;
  const seconds = () => secondsAt(clock.now());

  async function snapshot() {
    const { body } = await call('GET', '/v1/cluster');
    const table = body.tables[0];
    return {
      primaries: table.shards.map((s) => s.primary),
      acting: table.shards.map((s) => s.acting[0] ?? null),
      replicas: table.shards.map((s) => s.replicas.filter((r) => r.voting).map((r) => r.server)),
      readyForWrites: table.readyForWrites,
    };
  }

  async function record(event, { decision = null, reason = null, request = null, status = null } = {}) {
    const step = { t: seconds(), event, request, status, decision, reason, ...(await snapshot()) };
    steps.push(step);
    return step;
  }

  // A step that happened earlier than now, told by the manager's own records (an operation step's finishedAt
  // and the replica sets its report gives), placed in time order.
  function recordPast(atIso, event, fields) {
    const step = { t: secondsAt(Date.parse(atIso)), event, request: null, status: null, decision: null, reason: null, ...fields };
    const at = steps.findIndex((s) => s.t > step.t);
    steps.splice(at === -1 ? steps.length : at, 0, step);
    return step;
  }

  // Moves virtual time to `t` seconds, ticking the manager on the way: warning expiry, and a metrics poll
  // every 15 s. Monitor decisions become steps of their own.
  async function advanceTo(t) {
    const target = clock.start + t * 1000;
    while (nextPollAt <= target) {
      clock.advanceTo(nextPollAt);
      nextPollAt += POLL_SECONDS * 1000;
      const { expired, polled } = await world.manager.tick();
      for (const e of expired) await record(e.event === 'PERFWARNING_END' ? 'perf warning expired' : 'restore retried', { decision: e.restore?.action ?? null, reason: e.restore?.reason ?? e.reason });
      for (const d of polled?.decisions ?? []) {
        if (d.type === 'scale-out-suppressed') continue;
        await record(`monitor: ${d.type}${d.pod ? ` ${d.pod}` : ''}`, { decision: monitorDecision(d), reason: d.reason });
      }
      await settle();
    }
    clock.advanceTo(target);
  }

  // Waits (in real time; virtual time moves with the operations' own waits) until no operation is running.
  async function settle() {
    for (let i = 0; i < 2000; i += 1) {
      const { body } = await call('GET', '/v1/operations');
      if (!body.operations.some((o) => o.status === 'running')) return body.operations;
      await new Promise((resolve) => { setTimeout(resolve, 2); });
    }
    throw new Error('scenario: operations did not finish');
  }

  async function close() {
    await new Promise((resolve) => { server.close(resolve); });
  }

  // One virtual second: the manager's periodic work (readiness gates, the levelling after a rollout), then the
  // operations it started. Returns the tick's result.
  async function tickSecond() {
    clock.advance(1000);
    const done = await world.manager.tick({ poll: false });
    await settle();
    return done;
  }

  return {
    call, record, recordPast, advanceTo, settle, snapshot, close, steps, world, clock, seconds, tickSecond,
  };
}

function monitorDecision(d) {
  if (d.type === 'raise') return d.result?.decision?.actions?.join(' + ') ?? 'perfwarning';
  if (d.type === 'clear') return d.result?.restore?.action ?? 'end warning';
  if (d.type === 'escalate') return d.result?.escalated ? 'migrate-replicas-off' : 'not escalated';
  return d.type;
}

// Runs one scenario and returns its record.
// `npm run scenarios [ID ...]`'s arguments: { help: true } for -h/--help, else { ids } (every scenario when none is
// given; an ID in any case, IV-B2 or iv-b2), or { error } naming what is wrong and what is known. Pure.
export function parseScenarioArgs(args) {
  if (args.some((a) => a === '-h' || a === '--help')) return { help: true };
  const unknownOption = args.find((a) => a.startsWith('-'));
  if (unknownOption) return { error: `unknown option ${unknownOption} (the only option is --help)` };
  const ids = [];
  for (const arg of args) {
    const scenario = SCENARIOS.find((s) => s.id.toLowerCase() === arg.toLowerCase());
    if (!scenario) return { error: `unknown scenario ${arg} (known: ${SCENARIOS.map((s) => s.id).join(', ')})` };
    ids.push(scenario.id);
  }
  return { ids: ids.length > 0 ? ids : SCENARIOS.map((s) => s.id) };
}

export async function runScenario(id, options = {}) {
  const scenario = SCENARIOS.find((s) => s.id === id);
  if (!scenario) throw new Error(`unknown scenario ${id} (known: ${SCENARIOS.map((s) => s.id).join(', ')})`);
  const driver = await createScenarioDriver({ ...options, world: { ...scenario.world, ...options.world } });
  try {
    await driver.record('start');
    await scenario.run(driver);
    return { id: scenario.id, title: scenario.title, steps: driver.steps, ...(driver.summary ? { summary: driver.summary } : {}) };
  } finally {
    await driver.close();
  }
}

async function operationOutcome(d) {
  const ops = await d.settle();
  const last = ops.filter((o) => o.kind === 'poststart').at(-1);
  if (!last) return { decision: null, reason: null };
  const { body } = await d.call('GET', `/v1/operations/${last.id}`);
  return { decision: body.report?.decision?.kind ?? body.kind, reason: body.report?.decision?.reason ?? body.report?.reason ?? body.error?.message ?? null, status: body.status };
}

// IV-B1: node-1 fails without notice; RethinkDB elects new primaries after the heartbeat timeout; a
// replacement pod arrives, its POSTSTART recreates the lost replicas there and rebalances the primaries.
async function nodeCrashThenReplacement(d) {
  await d.advanceTo(150);
  const crash = await d.call('POST', '/v1/sandbox/nodes/node-1/crash');
  await d.record('node-1 crashes (unannounced)', { request: 'POST /v1/sandbox/nodes/node-1/crash', status: crash.status, reason: 'no hook runs: the manager learns nothing' });
  await d.advanceTo(155);
  await d.record('shard 1 has no acting primary', { reason: 'survivors wait for the heartbeat timeout' });
  await d.advanceTo(165);
  await d.record('RethinkDB elected a new primary', { reason: 'election by the surviving majority' });
  await d.advanceTo(180);
  const started = await d.call('POST', '/v1/sandbox/pods');
  const outcome = await operationOutcome(d);
  await d.record(`replacement pod ${started.body.started} started; POSTSTART`, { request: 'POST /v1/sandbox/pods', status: started.status, ...outcome });
}

// IV-B2: PRESTOP for rethinkdb-1 demotes its primaries; the pod then stops with nothing to elect.
async function announcedShutdown(d) {
  await d.advanceTo(140);
  const pre = await d.call('POST', '/v1/hooks/prestop?pod=rethinkdb-1');
  await d.record('PRESTOP rethinkdb-1', { request: 'POST /v1/hooks/prestop?pod=rethinkdb-1', status: pre.status, decision: pre.body.decision?.action, reason: pre.body.decision?.reason });
  await d.advanceTo(170);
  await d.call('POST', '/v1/sandbox/servers/rethinkdb_1/crash', { mode: 'term' });
  await d.advanceTo(172);
  await d.record('rethinkdb-1 stops (SIGTERM)', { request: 'POST /v1/sandbox/servers/rethinkdb_1/crash', reason: 'it held no primary: no election, no unavailability' });
  await d.advanceTo(300);
  await d.call('POST', '/v1/sandbox/servers/rethinkdb_1/restore');
  const post = await d.call('POST', '/v1/hooks/poststart?pod=rethinkdb-1');
  const outcome = await operationOutcome(d);
  await d.record('rethinkdb-1 back after maintenance; POSTSTART', { request: 'POST /v1/hooks/poststart?pod=rethinkdb-1', status: post.status, ...outcome });
}

// IV-B3: a co-located process drains node-1; the monitor sees the node's interference (the starved pod uses
// less CPU, not more), raises PERFWARNING after two polls, and restores after the hot-spot has cleared.
async function monitorDetectedHotspot(d) {
  await d.advanceTo(100);
  const on = await d.call('POST', '/v1/sandbox/pods/rethinkdb-1/interference', { cores: 1.8 });
  await d.record('interference starts on node-1', { request: 'POST /v1/sandbox/pods/rethinkdb-1/interference', status: on.status });
  await d.advanceTo(250);
  const off = await d.call('DELETE', '/v1/sandbox/pods/rethinkdb-1/interference');
  await d.record('interference ends on node-1', { request: 'DELETE /v1/sandbox/pods/rethinkdb-1/interference', status: off.status });
  await d.advanceTo(360);
}

// IV-B4: PERFWARNING with a short duration arrives before the interference; primaries leave in advance and
// return when the warning expires.
async function announcedHotspot(d) {
  await d.advanceTo(80);
  const warn = await d.call('POST', '/v1/hooks/perfwarning', { pod: 'rethinkdb-1', durationSeconds: 120, reason: 'batch job scheduled on node-1' });
  await d.record('PERFWARNING rethinkdb-1 for 120 s', { request: 'POST /v1/hooks/perfwarning', status: warn.status, decision: warn.body.decision?.actions?.join(' + '), reason: warn.body.decision?.reason });
  await d.advanceTo(110);
  await d.call('POST', '/v1/sandbox/pods/rethinkdb-1/interference', { cores: 1.8 });
  await d.record('interference starts on node-1', { reason: 'the pod holds no primary: the application does not notice' });
  await d.advanceTo(190);
  await d.call('DELETE', '/v1/sandbox/pods/rethinkdb-1/interference');
  await d.record('interference ends on node-1');
  await d.advanceTo(215);
}

// IV-B5: PERFWARNING with a long duration demotes AND migrates the replicas off rethinkdb-1, one at a time (a row
// per replica, at the time its move finished, with the replica sets after it); the announced interference then
// starts; when node-3 crashes 30 s later, every shard still has a live, up-to-date majority.
async function longHotspotThenCrash(d) {
  await d.advanceTo(370);
  const before = await d.snapshot();
  const sentAt = new Date(d.clock.now()).toISOString();
  const warn = await d.call('POST', '/v1/hooks/perfwarning', { pod: 'rethinkdb-1', durationSeconds: 3600, reason: 'long-running analytics on node-1' });
  // The row is placed when the warning was sent; the migration it starts runs meanwhile, a row per replica.
  const answered = await d.snapshot();
  const warned = d.recordPast(sentAt, 'PERFWARNING rethinkdb-1 for 3600 s', {
    request: 'POST /v1/hooks/perfwarning', status: warn.status, decision: warn.body.decision?.actions?.join(' + '), reason: warn.body.decision?.reason,
    primaries: answered.primaries, acting: answered.acting, readyForWrites: answered.readyForWrites, replicas: before.replicas,
  });
  const ops = await d.settle();
  const migration = ops.find((o) => o.kind === 'migrate-replicas-off');
  const { body } = await d.call('GET', `/v1/operations/${migration.id}`);
  const done = body.steps.filter((s) => s.status === 'done');
  replicaRows(d, body, before.replicas);
  await d.record('replicas migrated off rethinkdb-1', { decision: 'migrate-replicas-off', reason: `${done.length} replicas moved one at a time: ${body.status}` });
  await d.advanceTo(Math.max(warned.t + 10, d.seconds() + 5));
  const on = await d.call('POST', '/v1/sandbox/pods/rethinkdb-1/interference', { cores: 1.8 });
  await d.record('interference starts on node-1 (the announced analytics)', { request: 'POST /v1/sandbox/pods/rethinkdb-1/interference', status: on.status, reason: 'rethinkdb-1 holds no primary and no replica: clients do not wait on it' });
  await d.advanceTo(d.clock.now() / 1000 - d.clock.start / 1000 + 30);
  const crash = await d.call('POST', '/v1/sandbox/nodes/node-3/crash');
  await d.record('node-3 crashes (unannounced)', { request: 'POST /v1/sandbox/nodes/node-3/crash', status: crash.status });
  await d.advanceTo(d.clock.now() / 1000 - d.clock.start / 1000 + 15);
  await d.record('after the election', { reason: 'every shard keeps a live, up-to-date majority because rethinkdb-1 holds no replica' });
}

// ROLLOUT: the StatefulSet restarts every pod, highest ordinal first, each on its data, the next one once the
// previous is Ready. With the manager's rule (POSTSTART_DURING_ROLLOUT=defer and the readiness gate) each PRESTOP
// sends primaries to pods already restarted, no POSTSTART hands them back, the gate holds each pod until its
// replicas have caught up, and one levelling runs at the end. The record's `summary` counts the handovers per shard
// (changes of the acting primary, sampled each virtual second): what clients would see. Time is virtual, and the
// manager's own waits move it, so seconds and backfill overlaps are the Kubernetes lab's to measure
// (npm run evaluate -- --lab kube --scenarios rolling-restart), not this replay's.
async function rollingRestart(d) {
  await d.advanceTo(10);
  let lastActing = (await d.snapshot()).acting;
  const handovers = lastActing.map(() => 0);
  const sample = async () => {
    const { acting } = await d.snapshot();
    acting.forEach((a, i) => { if (a !== lastActing[i]) handovers[i] += 1; });
    lastActing = acting;
  };
  await d.record('kubectl rollout restart statefulset/rethinkdb', { reason: 'the StatefulSet controller restarts the pods, highest ordinal first' });
  await d.world.kube.rolloutRestart({
    // The controller sees a pod Ready at its next probe: a second at least.
    waitReady: async (pod) => {
      for (let i = 0; i < 600; i += 1) {
        await d.tickSecond();
        await sample();
        if ((await d.world.kube.getPod(pod)).ready) return;
      }
      throw new Error(`scenario: ${pod} not Ready after 600 s`);
    },
    onStep: async ({ pod, step, prestop }) => {
      if (step === 'stopped') {
        await sample();
        await d.record(`${pod} stopped (PRESTOP, then SIGTERM)`, { decision: prestop?.decision?.actions?.join(' + ') ?? null, reason: prestop?.decision?.reason ?? null });
      } else if (step === 'started') {
        const outcome = await operationOutcome(d);
        await d.record(`${pod} made again on the new revision; POSTSTART`, outcome);
      } else {
        await d.record(`${pod} Ready`, { reason: 'its readiness gate is True: every replica it holds is ready' });
      }
    },
  });
  await d.record('rollout done', { reason: 'every pod on the new revision' });
  let levelling = null;
  for (let i = 0; i < 10 && !levelling?.outcome; i += 1) {
    const done = await d.tickSecond();
    await sample();
    if (done.levelling?.action === 'level') levelling = done.levelling;
  }
  for (let i = 0; i < 5; i += 1) { await d.tickSecond(); await sample(); }
  await d.record('after the rollout', {
    decision: levelling ? 'rebalance-primaries' : null,
    reason: levelling ? `${levelling.reason}: ${levelling.outcome}, ${levelling.changes.length} moved` : 'no levelling was owed',
  });
  const { primaries } = await d.snapshot();
  d.summary = { handovers, primaries };
}

// A row per replica an operation moved, in order, at the time its step finished: the voting replica sets after
// that move, from the report's own before/after of each shard, starting from `initial`.
function replicaRows(d, operation, initial) {
  const replicas = initial.map((set) => [...set]);
  const changes = operation.report?.changes ?? [];
  const finished = operation.steps.filter((s) => s.finishedAt);
  finished.forEach((step, i) => {
    const change = changes.find((c) => c.table === step.table && c.shard === step.shard);
    if (change) replicas[step.shard] = change.after.replicas.filter((r) => !change.after.nonvoting.includes(r));
    const backfill = `staged ${step.startedAt.slice(11, 19)}, done ${step.finishedAt.slice(11, 19)}`;
    d.recordPast(step.finishedAt, `replica ${i + 1}/${operation.steps.length}: ${step.table} shard ${step.shard} ${step.from} → ${step.to}`, {
      decision: 'migrate-replicas-off', reason: `${step.status} (${backfill}): backfilled as nonvoting, then voting`, replicas: replicas.map((set) => [...set]),
    });
  });
}

// A readable timeline for the terminal.
export function formatTimeline(result) {
  const lines = [`${result.id}: ${result.title}`];
  if (result.summary) {
    lines.push(`  handovers per shard: [${result.summary.handovers.join(', ')}]; primaries at the end: [${result.summary.primaries.join(', ')}]`);
  }
  for (const s of result.steps) {
    lines.push(`  t=${String(s.t).padStart(6)}s  ${s.event}`);
    if (s.decision || s.reason) lines.push(`             decision: ${s.decision ?? '-'}${s.reason ? `; reason: ${s.reason}` : ''}`);
    if (s.primaries) lines.push(`             primaries: [${s.primaries.join(', ')}]  acting: [${s.acting.map((a) => a ?? 'none').join(', ')}]  writable: ${s.readyForWrites}`);
    if (s.replicas) lines.push(`             replicas:  ${s.replicas.map((set, i) => `${i}:[${set.map(shortName).join(',')}]`).join(' ')}`);
  }
  return lines.join('\n');
}

// rethinkdb_3 -> 3 in the replica column, which lists a shard's voting replicas.
function shortName(server) {
  return server.replace(/^rethinkdb_/, '');
}
