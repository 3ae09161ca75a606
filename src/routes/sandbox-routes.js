// Sandbox admin endpoints: crash or restore a server, crash a node, start a replacement pod, drive a pod's CPU
// load or its node's interference, and scale the StatefulSet. Mounted only on the sandbox backend (404
// otherwise), so that a person can replay any scenario by hand with curl.

import { Router } from 'express';
import { AppError } from '../errors.js';
import { compileValidator, objectSchema } from './validation.js';

const cores = { type: 'number', minimum: 0, maximum: 64 };
const schemas = {
  crash: objectSchema({ mode: { enum: ['kill', 'term', 'cut'] } }),
  cpu: objectSchema({ cores }, ['cores']),
  scale: objectSchema({ replicas: { type: 'integer', minimum: 1, maximum: 64 } }, ['replicas']),
  empty: objectSchema({}),
};

export function createSandboxRoutes({ model, kube, store }) {
  const router = Router();
  const validate = Object.fromEntries(Object.entries(schemas).map(([k, v]) => [k, compileValidator(v, 'body')]));
  const server = (name) => {
    if (!model.serverNames().includes(name)) throw new AppError('SERVER_NOT_FOUND', `sandbox server "${name}" does not exist (known: ${model.serverNames().join(', ')})`);
    return name;
  };
  const podOf = (name) => kube.getPod(name).catch(() => { throw new AppError('POD_NOT_FOUND', `sandbox pod "${name}" does not exist`); });
  const guard = (fn) => {
    try { return fn(); } catch (err) {
      if (err.code) throw err;
      throw new AppError('BAD_REQUEST', err.message);
    }
  };
  const snapshot = async () => ({ pods: await kube.listRethinkDbPods(), cluster: await store.readCluster().then((c) => c.servers.map((s) => ({ name: s.name, connected: s.connected }))) });

  router.post('/v1/sandbox/servers/:name/crash', async (req, res) => {
    const { mode = 'cut' } = validate.crash(req.body ?? {});
    guard(() => model.crashServer(server(req.params.name), { mode }));
    res.json({ crashed: req.params.name, mode, ...(await snapshot()) });
  });
  router.post('/v1/sandbox/servers/:name/restore', async (req, res) => {
    guard(() => model.restoreServer(server(req.params.name)));
    res.json({ restored: req.params.name, ...(await snapshot()) });
  });
  router.post('/v1/sandbox/nodes/:node/crash', async (req, res) => {
    guard(() => kube.crashNode(req.params.node));
    res.json({ crashed: req.params.node, ...(await snapshot()) });
  });
  router.post('/v1/sandbox/pods', async (req, res) => {
    validate.empty(req.body ?? {});
    const pod = kube.startReplacementPod();
    res.status(201).json({ started: pod.name, node: pod.nodeName, note: 'the pod joins and calls POSTSTART; follow it on GET /v1/operations' });
  });
  router.post('/v1/sandbox/pods/:pod/cpu', async (req, res) => {
    const body = validate.cpu(req.body ?? {});
    await podOf(req.params.pod);
    kube.setPodCpu(req.params.pod, body.cores);
    res.json({ pod: req.params.pod, cpuDemandCores: body.cores });
  });
  router.post('/v1/sandbox/pods/:pod/interference', async (req, res) => {
    const body = validate.cpu(req.body ?? {});
    const pod = await podOf(req.params.pod);
    kube.setInterference(pod.nodeName, body.cores);
    res.json({ pod: pod.name, node: pod.nodeName, interferenceCores: body.cores });
  });
  router.delete('/v1/sandbox/pods/:pod/interference', async (req, res) => {
    const pod = await podOf(req.params.pod);
    kube.setInterference(pod.nodeName, 0);
    res.json({ pod: pod.name, node: pod.nodeName, interferenceCores: 0 });
  });
  router.post('/v1/sandbox/scale', async (req, res) => {
    const body = validate.scale(req.body ?? {});
    res.json(await kube.patchStatefulSetScale(body.replicas));
  });
  router.get('/v1/sandbox/events', (req, res) => {
    res.json({ events: kube.events() });
  });
  return router;
}
