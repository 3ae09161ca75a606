// The state store's annotation writes: a write that fails while the API server is down (503) is written again by
// retryUnsaved with the value the mark has by then; a pod that is gone (404) is not written again.
import { createStateStore } from '../../src/state/state-store.js';
import { AppError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { createLogSink, createVirtualClock } from '../helpers/harness.js';

function setup(failures) {
  const writes = [];
  const kube = {
    async annotatePod(pod, annotations) {
      const failure = failures.shift();
      if (failure) throw failure;
      writes.push({ pod, annotations });
    },
  };
  const logger = createLogger({ level: 'info', destination: createLogSink().stream });
  const marks = createStateStore({ kube, clock: createVirtualClock(), logger });
  return { marks, writes };
}
const ref = { serverName: 'rethinkdb_1', pod: 'rethinkdb-1' };

describe('annotation writes that fail', () => {
  test('when the API server is down for a write, then retryUnsaved writes the mark again as it is now, once it is saved it is not written again', async () => {
    const { marks, writes } = setup([new AppError('KUBERNETES_UNAVAILABLE', 'down')]);
    await marks.markDraining('s1', { reason: 'prestop', origin: { via: 'prestop' }, ...ref });
    await marks.flush();
    expect(writes).toEqual([]);
    expect((await marks.list())[0].persisted).toBe('failed: down');
    expect(marks.retryUnsaved()).toEqual([{ pod: 'rethinkdb-1', kind: 'draining', serverName: 'rethinkdb_1' }]);
    await marks.flush();
    expect(writes).toHaveLength(1);
    expect(JSON.parse(writes[0].annotations['rethinkdb-manager.io/draining'])).toMatchObject({ serverId: 's1', reason: 'prestop' });
    expect((await marks.list())[0].persisted).toBe('saved');
    expect(marks.retryUnsaved()).toEqual([]);
  });

  test('when a release fails to reach the pod, then the retry removes the annotation (the pod does not keep a released mark)', async () => {
    const { marks, writes } = setup([undefined, new AppError('NOT_LEADER', 'fence')]);
    await marks.markDraining('s1', { reason: 'prestop', origin: { via: 'prestop' }, ...ref });
    await marks.release('s1');
    await marks.flush();
    expect(writes).toHaveLength(1);
    marks.retryUnsaved();
    await marks.flush();
    expect(writes[1]).toEqual({ pod: 'rethinkdb-1', annotations: { 'rethinkdb-manager.io/draining': null } });
  });

  test('when the pod is gone (404), then the write is not tried again', async () => {
    const { marks, writes } = setup([new AppError('NOT_FOUND', 'pods "rethinkdb-1" not found')]);
    await marks.markDraining('s1', { reason: 'prestop', origin: { via: 'prestop' }, ...ref });
    await marks.flush();
    expect(marks.retryUnsaved()).toEqual([]);
    expect(writes).toEqual([]);
  });

  test('when the marks are loaded again (a replica that leads again), then what failed before is not written over them', async () => {
    const { marks, writes } = setup([new AppError('KUBERNETES_UNAVAILABLE', 'down')]);
    await marks.markDraining('s1', { reason: 'prestop', origin: { via: 'prestop' }, ...ref });
    await marks.flush();
    marks.load([], { replace: true });
    expect(marks.retryUnsaved()).toEqual([]);
    expect(writes).toEqual([]);
  });
});

describe('annotation writes of an unchanged mark', () => {
  test('when a mark is written again with the same content (a restore that still waits, each tick), then the pod is not patched again; a changed one is', async () => {
    const { marks, writes } = setup([]);
    const restore = { warning: { source: 'monitor', long: false }, reason: 'perf warning ended', actor: 'monitor' };
    await marks.setRestore('s1', restore, ref);
    await marks.setRestore('s1', structuredClone(restore), ref);
    await marks.flush();
    expect(writes).toHaveLength(1);
    await marks.setRestore('s1', { ...restore, warning: { ...restore.warning, long: true } }, ref);
    await marks.flush();
    expect(writes).toHaveLength(2);
    expect(JSON.parse(writes[1].annotations['rethinkdb-manager.io/restore'])).toMatchObject({ warning: { long: true } });
  });
});
