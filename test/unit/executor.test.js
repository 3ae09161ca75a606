// The executor runs a decision's intents in order; with a deadline, each intent gets what is left of the decision's
// deadline when it starts (a PRESTOP's Raft move after its demotion must still answer within the hook's deadline).

import { createExecutor } from '../../src/events/executor.js';
import { INTENT_TYPES, intentIs } from '../../src/events/intent-types.js';
import { createDeadline, createVirtualClock } from '../../src/lib/clock.js';
import { createLogger } from '../../src/logger.js';

// What an action sees of the decision's deadline when it starts (undefined: none, it keeps its own default).
const secondsLeft = (deadline) => (deadline ? deadline.remainingMs() / 1000 : undefined);

function executorWith({ demoteMs }) {
  const clock = createVirtualClock();
  const seen = [];
  const report = { changes: [], skipped: [], notDone: [] };
  const actions = {
    async movePrimariesFromServers(params, { deadline }) { seen.push(['demote', secondsLeft(deadline)]); await clock.sleep(demoteMs); return report; },
    async rebalancePrimaries(params, { deadline }) { seen.push(['rebalance', secondsLeft(deadline)]); return report; },
  };
  const marks = { async noteDemoted() {}, fork() { return marks; } };
  const executor = createExecutor({
    store: {}, actions, marks, operations: {}, config: {}, clock, logger: createLogger({ level: 'silent' }),
  });
  return { executor, seen, clock };
}

const intents = [
  { type: 'demote', servers: [{ id: 'a', name: 'a' }], mark: 'draining', reason: 'test' },
  { type: 'rebalance-primaries', reason: 'test' },
];

describe('the executor\'s deadline', () => {
  test('when a decision has a deadline, then each intent gets what is left of it when it starts', async () => {
    const { executor, seen, clock } = executorWith({ demoteMs: 5000 });
    await executor.run(intents, { deadline: createDeadline(clock, 20000) });
    expect(seen).toEqual([['demote', 20], ['rebalance', 15]]);
  });

  test('when an intent used up the deadline, then the next one gets 0 (its action reports what it did not do)', async () => {
    const { executor, seen, clock } = executorWith({ demoteMs: 25000 });
    await executor.run(intents, { deadline: createDeadline(clock, 20000) });
    expect(seen).toEqual([['demote', 20], ['rebalance', 0]]);
  });

  test('when a decision has no deadline, then each action keeps its own default', async () => {
    const { executor, seen } = executorWith({ demoteMs: 5000 });
    await executor.run(intents, {});
    expect(seen).toEqual([['demote', undefined], ['rebalance', undefined]]);
  });
});

describe('lowering the heartbeat before a demotion', () => {
  // write(seconds): the store's heartbeat write (by default it answers at once).
  function heartbeatExecutor({ write = async () => {} } = {}) {
    const clock = createVirtualClock();
    const writes = [];
    const departures = [];
    const store = { async readCluster() { return { heartbeatTimeoutSecs: 10 }; }, writeHeartbeatTimeout(seconds) { writes.push(seconds); return write(seconds); } };
    const marks = { async departures() { return departures; }, async setDeparture(id, d) { departures.push({ serverId: id, ...d }); }, fork() { return marks; } };
    const executor = createExecutor({
      store, actions: {}, marks, operations: {}, config: {}, clock, logger: createLogger({ level: 'silent' }),
    });
    return { executor, clock, writes, departures };
  }
  const lower = { type: 'lower-heartbeat', server: { id: 'a', name: 'a', pod: 'pod-a' }, seconds: 2, windowSeconds: 60 };

  test('when the decision leaves more than the demotion needs, then it is lowered', async () => {
    const { executor, clock, writes } = heartbeatExecutor();
    const [{ result }] = await executor.run([lower], { deadline: createDeadline(clock, 17000) });
    expect(result).toMatchObject({ lowered: true, from: 10, to: 2 });
    expect(writes).toEqual([2]);
  });

  test('when the decision leaves only what the demotion needs, then the write is sent but not waited for, and the departure is marked', async () => {
    const { executor, clock, writes, departures } = heartbeatExecutor({ write: () => new Promise(() => {}) });
    const [{ result }] = await executor.run([lower], { deadline: createDeadline(clock, 4000) });
    expect(result).toEqual({ lowered: false, reason: 'sent, not waited for: the deadline leaves no time before the demotion (it may still land)' });
    expect(writes).toEqual([2]);
    expect(departures).toHaveLength(1);
  });

  test('when the write does not answer within what the demotion can spare, then the step ends and says so (the departure stays marked)', async () => {
    const { executor, clock, departures } = heartbeatExecutor({ write: () => new Promise(() => {}) });
    const [{ result }] = await executor.run([lower], { deadline: createDeadline(clock, 5030) });
    expect(result).toEqual({ lowered: false, reason: 'not lowered: the write did not answer within 30 ms, and the demotion goes ahead (the write may still land)' });
    expect(departures).toHaveLength(1);
  });
});

describe('the registry of intent types', () => {
  test('when the executor is built, then it has exactly one step per registered intent type', () => {
    const { executor } = executorWith({ demoteMs: 0 });
    expect([...executor.stepTypes].sort()).toEqual(Object.keys(INTENT_TYPES).sort());
  });

  test('when a dry run meets an intent that writes, then it skips it and runs the planning ones', async () => {
    const { executor, seen } = executorWith({ demoteMs: 0 });
    const done = await executor.run([{ type: 'set-heartbeat', seconds: 2, reason: 'test' }, ...intents], { dryRun: true });
    expect(done.map((d) => d.intent.type)).toEqual(['demote', 'rebalance-primaries']);
    expect(seen.map(([name]) => name)).toEqual(['demote', 'rebalance']);
  });

  test('when an intent type is not registered, then it has no property', () => {
    expect(intentIs('demote', 'reconfigures')).toBe(true);
    expect(intentIs('no-such-intent', 'dryRun')).toBe(false);
  });
});
