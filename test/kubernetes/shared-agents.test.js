// The Kubernetes calls share one keep-alive agent per set of TLS options (client-node 1.4 makes one per call).
import { KubeConfig } from '@kubernetes/client-node';
import { createSharedAgentAuth } from '../../src/kubernetes/shared-agents.js';

function kubeConfigFor(server, { insecure = false } = {}) {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server, skipTLSVerify: insecure }],
    users: [{ name: 'u', token: 'secret-token' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return kc;
}

// What the generated clients hand the authentication: a request context with an agent and headers.
function requestContext(agent) {
  const ctx = { agent, headers: {} };
  return {
    getAgent: () => ctx.agent, setAgent: (a) => { ctx.agent = a; }, setHeaderParam: (k, v) => { ctx.headers[k] = v; },
    getHeaders: () => ctx.headers, getUrl: () => 'https://api.example:6443/api/v1/pods', setUrl: () => {}, ctx,
  };
}

describe('shared agents for Kubernetes calls', () => {
  test('when two calls are authenticated, then they get the same keep-alive agent and the kubeconfig\'s token header', async () => {
    const auth = createSharedAgentAuth(kubeConfigFor('https://api.example:6443'));
    const a = requestContext(undefined);
    const b = requestContext(undefined);
    await auth.applySecurityAuthentication(a);
    await auth.applySecurityAuthentication(b);
    expect(a.ctx.agent).toBeDefined();
    expect(a.ctx.agent).toBe(b.ctx.agent);
    expect(a.ctx.agent.keepAlive).toBe(true);
    expect(a.ctx.headers.Authorization ?? a.ctx.headers.authorization).toBe('Bearer secret-token');
  });

  test('when the TLS options differ, then the calls do not share an agent', async () => {
    const strict = requestContext(undefined);
    const insecure = requestContext(undefined);
    await createSharedAgentAuth(kubeConfigFor('https://api.example:6443')).applySecurityAuthentication(strict);
    const auth = createSharedAgentAuth(kubeConfigFor('https://api.example:6443', { insecure: true }));
    await auth.applySecurityAuthentication(insecure);
    expect(strict.ctx.agent).not.toBe(insecure.ctx.agent);
    expect(insecure.ctx.agent.options.rejectUnauthorized).toBe(false);
  });
});
