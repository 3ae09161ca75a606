// The Kubernetes API calls' HTTP agents, shared. @kubernetes/client-node 1.4 builds a new https.Agent for every call
// (KubeConfig.createAgent; kubernetes-client/javascript#2893), without keep-alive: every call then opens a new TLS
// connection and builds a TLS context from the CA again. GET /v1/cluster lists the pods, so under load that cost
// CPU and malloc'd memory per request (bench/memory.bench.js --backend rethinkdb --kube). This authentication
// wraps the KubeConfig's: the same headers, and one keep-alive agent per set of TLS options.

import { createHash } from 'node:crypto';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';

// The agent options client-node sets from the kubeconfig: they say which connections an agent may share.
const TLS_OPTIONS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'];
// A rotated CA or client certificate makes a new agent; the one it replaces is closed once its calls are done.
const MAX_AGENTS = 4;
const RETIRED_AGENT_CLOSE_MS = 60000;
// An idle connection is closed by us before the API server closes it (90 s in kube-apiserver), so that a call never
// goes out on a connection the server is closing.
const IDLE_CONNECTION_MS = 30000;

// kubeConfig: a loaded KubeConfig. requestTimeoutMs: each call is aborted after it, which also destroys its socket:
// a kept-alive connection to an API server that stopped answering would otherwise hold the call (and the socket)
// until TCP gives up, long after the adapter's own time limit answered 503. Returns the SecurityAuthentication to
// give the generated clients.
export function createSharedAgentAuth(kubeConfig, { requestTimeoutMs = null } = {}) {
  const agents = new Map();

  function shared(agent) {
    // Proxy agents (a kubeconfig's proxy-url) are left as the client made them.
    if (agent?.constructor !== HttpsAgent && agent?.constructor !== HttpAgent) return agent;
    const key = agentKey(agent);
    let kept = agents.get(key);
    if (!kept) {
      kept = new agent.constructor({ ...agent.options, keepAlive: true, timeout: IDLE_CONNECTION_MS });
      agents.set(key, kept);
      if (agents.size > MAX_AGENTS) retire(agents.keys().next().value);
    }
    return kept;
  }

  function retire(key) {
    const agent = agents.get(key);
    agents.delete(key);
    setTimeout(() => agent.destroy(), RETIRED_AGENT_CLOSE_MS).unref();
  }

  return {
    getName: () => 'kubeconfig with shared agents',
    async applySecurityAuthentication(context) {
      await kubeConfig.applySecurityAuthentication(context);
      context.setAgent(shared(context.getAgent()));
      if (requestTimeoutMs) context.setSignal(AbortSignal.timeout(requestTimeoutMs));
    },
  };
}

function agentKey(agent) {
  const hash = createHash('sha256');
  hash.update(agent.constructor === HttpsAgent ? 'https' : 'http');
  for (const name of TLS_OPTIONS) {
    const values = [agent.options[name]].flat();
    hash.update(`\0${name}=`);
    for (const value of values) hash.update(value === undefined ? '\0u' : `\0${Buffer.isBuffer(value) ? value.toString('base64') : String(value)}`);
  }
  return hash.digest('hex');
}
