// Long-running actions (those that move data) run in the background as operations with visible progress.
// Kept in memory and bounded: the newest maxOperations are served at GET /v1/operations/:id.

import { randomUUID } from 'node:crypto';

export function createOperationRegistry({ clock, logger, maxOperations = 200, newId = randomUUID }) {
  const operations = new Map();
  const running = new Set();
  const settled = new Map();
  const log = logger.child({ module: 'operations' });

  function start(kind, params, work) {
    const op = {
      id: newId(),
      kind,
      params,
      status: 'running',
      createdAt: new Date(clock.now()).toISOString(),
      finishedAt: null,
      steps: [],
      report: null,
      error: null,
    };
    operations.set(op.id, op);
    trim();
    const promise = Promise.resolve()
      .then(() => work(op))
      .then((report) => {
        op.report = report;
        op.status = report.outcome === 'completed' || report.outcome === 'nothing_to_do' ? 'succeeded' : report.outcome;
      })
      .catch((err) => {
        op.status = 'failed';
        op.error = { error: err.code ?? 'INTERNAL', message: err.message };
        log.error({ operation: op.id, kind, err: err.message }, 'operation failed');
      })
      .finally(() => {
        op.finishedAt = new Date(clock.now()).toISOString();
        running.delete(promise);
      });
    running.add(promise);
    settled.set(op.id, promise);
    return op;
  }

  function trim() {
    while (operations.size > maxOperations) {
      const oldest = [...operations.values()].find((o) => o.status !== 'running');
      if (!oldest) break;
      operations.delete(oldest.id);
      settled.delete(oldest.id);
    }
  }

  return {
    start,
    get: (id) => operations.get(id) ?? null,
    list: () => [...operations.values()],
    // Resolves with the operation once it has finished (whatever its outcome).
    wait: async (id) => { await settled.get(id); return operations.get(id) ?? null; },
    // For graceful shutdown: resolves when every running operation has settled.
    drain: () => Promise.allSettled([...running]),
    runningCount: () => running.size,
  };
}
