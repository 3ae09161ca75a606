// Runs the intents the policy returns, in order, through the actions, and is the only writer of the marks on
// servers (draining, perf warnings, restores waiting for a healthy server, what each demotion took, departures),
// for the events and the operator's commands alike. Each intent is a plain object with a `type`; its result is
// returned next to it, so the caller reports both.

import { appError } from '../errors.js';
import { INTENT_STEPS } from './intent-steps.js';

// run(intents, ctx): ctx is the decision's operation context (src/actions/operation-context.js), the same for every
// intent. Its deadline is one object made at the edge, so that each intent gets what is left of it when it starts (a
// PRESTOP's Raft move after its demotion must still answer within the hook's deadline); null: each action has its own
// default. Its snapshot is the cluster the decision was made on: the steps see it as `snapshot` as long as no intent
// before them has reconfigured a table (null then), and as `decided` always.
// kube: the Kubernetes adapter (fenced like every write), for the StatefulSet's scale; null without a Kubernetes API.
export function createExecutor({ store, kube = null, actions, marks: realMarks, operations, config, clock, logger }) {
  const deps = {
    store, kube, actions, marks: realMarks, operations, config, clock, log: logger.child({ module: 'executor' }),
  };

  // Runs the intents in order and returns [{ intent, result }]. A failing intent stops the rest (its error
  // propagates); a dry run runs only the intents that can plan without changing anything.
  async function run(intents, { snapshot = null, ...context }) {
    // A dry run's steps change a copy of the marks, which a plan after them reads as the real run's would.
    const on = context.dryRun ? { ...deps, marks: realMarks.fork() } : deps;
    const done = [];
    const read = { decided: snapshot, current: snapshot };
    const observe = (cluster) => { read.current = cluster; };
    for (const intent of intents) {
      const step = INTENT_STEPS[intent.type];
      if (!step) throw appError('noExecutorStep', { type: intent.type });
      if (context.dryRun && !step.dryRun) continue;
      // Once the decision's deadline has passed, an intent's action finds it expired and reports what it did not do.
      done.push({ intent, result: await step.run(intent, { ...context, snapshot: read.current, decided: read.decided, observe }, on) });
      if (!context.dryRun && step.reconfigures) read.current = null;
    }
    return done;
  }

  // stepTypes: the intent types it has a step for (./intent-steps.js).
  return { run, stepTypes: Object.keys(INTENT_STEPS) };
}

// The result of the first intent of a type, or null.
export function resultOf(done, type) {
  return done.find((d) => d.intent.type === type)?.result ?? null;
}
