// Sandbox admin endpoints: crash or restore a server, crash or cordon a node, start a replacement pod, drive a pod's CPU
// load or its node's interference, and scale the StatefulSet. Mounted only on the sandbox backend (404
// otherwise), so that a person can replay any scenario by hand with curl.

import { Router } from 'express';
import { appError, AppError } from '../errors.js';
import { fields, mountRoute, objectSchema } from './validation.js';

const cores = { type: 'number', minimum: 0, maximum: 64 };
const serverParams = objectSchema({ name: fields.server }, ['name']);
const podParams = objectSchema({ pod: fields.pod }, ['pod']);
// schema: the name of the answer's schema in src/routes/response-schemas.js.
const sandbox = ({ schema, ...route }) => ({ tag: 'sandbox', sandboxOnly: true, ok: [{ status: 200, description: 'what changed, and the pods and servers after it', schema }], ...route });

// Method, path and input schemas of each sandbox route: what the router enforces and /openapi.json describes.
export const SANDBOX_ROUTES = {
  crashServer: sandbox({
    method: 'post', path: '/v1/sandbox/servers/:name/crash', operationId: 'sandboxCrashServer', schema: 'SandboxServerCrashed', summary: 'Crash a server (kill, term or cut off the network; default cut)',
    params: serverParams, body: objectSchema({ mode: { type: 'string', enum: ['kill', 'term', 'cut'] } }), errors: ['SERVER_NOT_FOUND'],
  }),
  restoreServer: sandbox({
    method: 'post', path: '/v1/sandbox/servers/:name/restore', operationId: 'sandboxRestoreServer', schema: 'SandboxServerRestored', summary: 'Bring a crashed server back',
    params: serverParams, errors: ['SERVER_NOT_FOUND'],
  }),
  crashNode: sandbox({
    method: 'post', path: '/v1/sandbox/nodes/:node/crash', operationId: 'sandboxCrashNode', schema: 'SandboxNodeCrashed', summary: 'Crash a node: its pods and servers vanish unannounced',
    params: objectSchema({ node: fields.node }, ['node']), errors: ['NODE_NOT_FOUND'],
  }),
  cordonNode: sandbox({
    method: 'post', path: '/v1/sandbox/nodes/:node/cordon', operationId: 'sandboxCordonNode', schema: 'SandboxNodeCordoned', summary: 'Cordon a node (or uncordon it with {"cordoned": false}), as kubectl does',
    params: objectSchema({ node: fields.node }, ['node']), body: objectSchema({ cordoned: { type: 'boolean' } }), errors: ['NODE_NOT_FOUND'],
  }),
  startPod: sandbox({
    method: 'post', path: '/v1/sandbox/pods', operationId: 'sandboxStartPod', summary: 'Start a replacement pod on a fresh node; it calls POSTSTART',
    body: objectSchema({}), ok: [{ status: 201, description: 'the pod started', schema: 'SandboxPodStarted' }], errors: [],
  }),
  podCpu: sandbox({
    method: 'post', path: '/v1/sandbox/pods/:pod/cpu', operationId: 'sandboxSetPodCpu', schema: 'SandboxPodCpu', summary: "Set a pod's CPU demand in cores",
    params: podParams, body: objectSchema({ cores }, ['cores']), errors: ['POD_NOT_FOUND'],
  }),
  startInterference: sandbox({
    method: 'post', path: '/v1/sandbox/pods/:pod/interference', operationId: 'sandboxStartInterference', schema: 'SandboxInterference', summary: "Load the pod's node with a co-located process",
    params: podParams, body: objectSchema({ cores }, ['cores']), errors: ['POD_NOT_FOUND', 'NOT_FOUND'],
  }),
  endInterference: sandbox({
    method: 'delete', path: '/v1/sandbox/pods/:pod/interference', operationId: 'sandboxEndInterference', schema: 'SandboxInterference', summary: "Remove the load on the pod's node",
    params: podParams, errors: ['POD_NOT_FOUND', 'NOT_FOUND'],
  }),
  scale: sandbox({
    method: 'post', path: '/v1/sandbox/scale', operationId: 'sandboxScale', schema: 'SandboxScaled', summary: 'Scale the StatefulSet (PRESTOP runs before a pod stops)',
    body: objectSchema({ replicas: { type: 'integer', minimum: 1, maximum: 64 } }, ['replicas']), errors: ['DEADLINE_EXCEEDED'],
  }),
  events: sandbox({
    method: 'get', path: '/v1/sandbox/events', operationId: 'sandboxEvents', summary: 'The Kubernetes Events the manager created',
    ok: [{ status: 200, description: 'the events', schema: 'SandboxEvents' }], errors: [],
  }),
};

export function createSandboxRoutes({ model, kube, store }) {
  const router = Router();
  const server = (name) => {
    if (!model.serverNames().includes(name)) throw appError('sandboxServerNotFound', { name, known: model.serverNames().join(', ') });
    return name;
  };
  const podOf = (name) => kube.getPod(name).catch(() => { throw appError('sandboxPodNotFound', { name }); });
  const guard = (fn) => {
    try { return fn(); } catch (err) {
      if (err.code) throw err;
      throw new AppError('BAD_REQUEST', err.message);
    }
  };
  const snapshot = async () => ({ pods: await kube.listRethinkDbPods(), cluster: await store.readCluster().then((c) => c.servers.map((s) => ({ name: s.name, connected: s.connected }))) });

  mountRoute(router, SANDBOX_ROUTES.crashServer, async ({ params, body }, res) => {
    const { mode = 'cut' } = body;
    guard(() => model.crashServer(server(params.name), { mode }));
    res.json({ crashed: params.name, mode, ...(await snapshot()) });
  });
  mountRoute(router, SANDBOX_ROUTES.restoreServer, async ({ params }, res) => {
    guard(() => model.restoreServer(server(params.name)));
    res.json({ restored: params.name, ...(await snapshot()) });
  });
  mountRoute(router, SANDBOX_ROUTES.cordonNode, async ({ params, body }, res) => {
    if (!(await kube.nodeExists(params.node))) throw appError('sandboxNodeNotFound', { node: params.node });
    const cordoned = body.cordoned ?? true;
    kube.setNodeUnschedulable(params.node, cordoned);
    res.json({ node: params.node, cordoned, ...(await snapshot()) });
  });
  mountRoute(router, SANDBOX_ROUTES.crashNode, async ({ params }, res) => {
    if (!(await kube.nodeExists(params.node))) throw appError('sandboxNodeNotFound', { node: params.node });
    guard(() => kube.crashNode(params.node));
    res.json({ crashed: params.node, ...(await snapshot()) });
  });
  mountRoute(router, SANDBOX_ROUTES.startPod, async (input, res) => {
    const pod = kube.startReplacementPod();
    res.status(201).json({ started: pod.name, node: pod.nodeName, note: 'the pod joins and calls POSTSTART; follow it on GET /v1/operations' });
  });
  mountRoute(router, SANDBOX_ROUTES.podCpu, async ({ params, body }, res) => {
    await podOf(params.pod);
    kube.setPodCpu(params.pod, body.cores);
    res.json({ pod: params.pod, cpuDemandCores: body.cores });
  });
  mountRoute(router, SANDBOX_ROUTES.startInterference, async ({ params, body }, res) => {
    const pod = await podOf(params.pod);
    kube.setInterference(pod.nodeName, body.cores);
    res.json({ pod: pod.name, node: pod.nodeName, interferenceCores: body.cores });
  });
  mountRoute(router, SANDBOX_ROUTES.endInterference, async ({ params }, res) => {
    const pod = await podOf(params.pod);
    kube.setInterference(pod.nodeName, 0);
    res.json({ pod: pod.name, node: pod.nodeName, interferenceCores: 0 });
  });
  mountRoute(router, SANDBOX_ROUTES.scale, async ({ body }, res) => {
    res.json(await kube.patchStatefulSetScale(body.replicas));
  });
  mountRoute(router, SANDBOX_ROUTES.events, (input, res) => {
    res.json({ events: kube.events() });
  });
  return router;
}
