// One sandbox: the in-memory RethinkDB cluster, its Kubernetes, and a manager wired to both through the same
// ports as the real adapters. Used by `npm start` without a cluster, by the scenario replay and by the tests.

import { createManager } from '../manager.js';
import { createDataStore } from '../rethinkdb/data-store.js';
import { createSandboxCluster, createSandboxSource } from './sandbox-cluster.js';
import { createSandboxKube } from './sandbox-kube.js';

// existing: { model, kube } of an earlier world, to start a new manager over the same cluster (a restart).
// modelOptions, kubeOptions: more options for a new model and Kubernetes (the rolling-restart scenario's catch-up
// backfill and readiness gates). timers: the manager's work queue's (the tests' never fire: they add keys themselves).
export function createSandboxWorld({
  config, clock, logger, existing = null, wrapSource = (s) => s, metrics, staticToken = null, modelOptions = {}, kubeOptions = {}, timers,
}) {
  const model = existing?.model ?? createSandboxCluster({
    clock, electionTimeoutMs: config.sandbox.electionTimeoutMs, backfillMsPer1000Docs: config.sandbox.backfillMsPer1000Docs, ...modelOptions,
  });
  const kube = existing?.kube ?? createSandboxKube({ model, clock, ...kubeOptions });
  const source = wrapSource(createSandboxSource(model));
  const store = createDataStore({ source, managedTables: config.managedTables });
  // A fresh sandbox has no persisted state; one built over an earlier world's pods must reconcile first.
  const manager = createManager({ config, store, kube, clock, logger, sandboxModel: model, metrics, staticToken, stateLoaded: !existing?.kube, timers,
  });
  return { model, kube, source, store, manager };
}

// How the sandbox's pods call their hooks: `post(path)` sends an HTTP request to the manager's routes.
export function connectSandboxHooks(kube, post) {
  kube.setHookCaller({
    postStart: (pod) => post(`/v1/hooks/poststart?pod=${encodeURIComponent(pod)}`),
    preStop: (pod) => post(`/v1/hooks/prestop?pod=${encodeURIComponent(pod)}`),
  });
}
