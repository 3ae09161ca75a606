// The Kubernetes calls share one keep-alive agent per set of TLS options (client-node 1.4 makes one per call), and a
// call that gets no answer is aborted at the adapter's time limit, its connection with it.
import { once } from 'node:events';
import { createServer } from 'node:http';
import { KubeConfig } from '@kubernetes/client-node';
import { createKubeAdapter } from '../../src/kubernetes/kube-adapter.js';
import { createSharedAgentAuth } from '../../src/kubernetes/shared-agents.js';
import { createSystemClock } from '../../src/lib/clock.js';

// Two clusters at one address, one of them without TLS verification; the current context is `strict`.
function kubeConfigFor(server) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'strict', server }, { name: 'insecure', server, skipTLSVerify: true }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'strict', cluster: 'strict', user: 'u' }, { name: 'insecure', cluster: 'insecure', user: 'u' }],
    currentContext: 'strict',
  });
  return kc;
}

// What the generated clients hand the authentication: a request context with an agent, headers and a signal.
function requestContext() {
  const ctx = { agent: undefined, headers: {}, signal: null };
  return {
    getAgent: () => ctx.agent, setAgent: (a) => { ctx.agent = a; }, setHeaderParam: (k, v) => { ctx.headers[k] = v; },
    getHeaders: () => ctx.headers, getUrl: () => 'https://api.example:6443/api/v1/pods', setUrl: () => {}, setSignal: (s) => { ctx.signal = s; }, ctx,
  };
}

describe('shared agents for Kubernetes calls', () => {
  test('when two calls are authenticated, then they get the same keep-alive agent and the kubeconfig\'s token header', async () => {
    const auth = createSharedAgentAuth(kubeConfigFor('https://api.example:6443'));
    const a = requestContext();
    const b = requestContext();
    await auth.applySecurityAuthentication(a);
    await auth.applySecurityAuthentication(b);
    expect(a.ctx.agent).toBeDefined();
    expect(a.ctx.agent).toBe(b.ctx.agent);
    expect(a.ctx.agent.keepAlive).toBe(true);
    expect(a.ctx.headers.Authorization ?? a.ctx.headers.authorization).toBe('Bearer secret-token');
  });

  test('when the TLS options of one kubeconfig change between calls, then the calls do not share an agent', async () => {
    const kc = kubeConfigFor('https://api.example:6443');
    const auth = createSharedAgentAuth(kc);
    const strict = requestContext();
    const again = requestContext();
    const insecure = requestContext();
    await auth.applySecurityAuthentication(strict);
    await auth.applySecurityAuthentication(again);
    kc.setCurrentContext('insecure');
    await auth.applySecurityAuthentication(insecure);
    expect(again.ctx.agent).toBe(strict.ctx.agent);
    expect(insecure.ctx.agent).not.toBe(strict.ctx.agent);
    expect(insecure.ctx.agent.options.rejectUnauthorized).toBe(false);
  });

  test('when the API server answers one call and never the next, then both went over one connection, and the second is answered 503 at the time limit and its connection closed', async () => {
    let requests = 0;
    const sockets = [];
    const server = createServer((req, res) => {
      requests += 1;
      if (requests > 1) return; // never answered
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: {}, items: [] }));
    });
    server.on('connection', (s) => sockets.push(s));
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      // client-node speaks plain HTTP only with TLS verification off.
      const kubeConfig = kubeConfigFor(`http://127.0.0.1:${server.address().port}`);
      kubeConfig.setCurrentContext('insecure');
      const kube = createKubeAdapter({ kubeConfig, namespace: 'rethinkdb', clock: createSystemClock(), requestTimeoutMs: 300 });
      expect(await kube.listRethinkDbPods()).toEqual([]);
      await expect(kube.listRethinkDbPods()).rejects.toMatchObject({ statusCode: 503 });
      expect(sockets).toHaveLength(1);
      if (!sockets[0].destroyed) await once(sockets[0], 'close');
      expect(sockets[0].destroyed).toBe(true);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
