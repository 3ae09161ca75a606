// Pure: what a SERVER or POD argument names, looked up in the manager's GET /v1/cluster answer. The actions take a
// server (rethinkdb_1), the hooks a pod (rethinkdb-1); an operator may give either. Each server of the answer has
// its pod (`pod`, when the manager lists the pods) or its hostname (the pod's name in a StatefulSet, when it does
// not); no name is derived from another by rewriting it.

export class LookupError extends Error {
  constructor(code, message) {
    super(message);
    this.name = 'LookupError';
    this.code = code;
  }
}

// subject: { kind: 'server' | 'pod', name }. Returns { name, line }: the name the request takes, and the line that
// says what was resolved (null when the argument already was what the request takes).
export function resolveSubject(subject, cluster) {
  if (!cluster || !Array.isArray(cluster.servers)) throw new LookupError('BAD_ANSWER', 'GET /v1/cluster answered without a server list');
  return subject.kind === 'pod' ? resolvePod(subject.name, cluster) : resolveServer(subject.name, cluster);
}

// The pod a server runs in, as the manager knows it: `pod` when it listed the pods, else the server's hostname.
function podOf(server, cluster) {
  if (Array.isArray(cluster.pods)) return server.pod ?? null;
  return server.hostname ?? null;
}

function resolveServer(name, cluster) {
  const named = cluster.servers.filter((s) => s.name === name);
  const byPod = preferConnected(cluster.servers.filter((s) => podOf(s, cluster) === name));
  const others = byPod.filter((s) => !named.includes(s));
  if (named.length > 0 && others.length > 0) {
    throw new LookupError('AMBIGUOUS_NAME', `"${name}" is server ${name} and also the pod of server ${others[0].name}; give the other server's name to mean it`);
  }
  if (named.length > 0) return { name, line: null };
  if (byPod.length > 1) throw new LookupError('AMBIGUOUS_NAME', `pod ${name} is claimed by servers ${byPod.map((s) => s.name).join(', ')}; give the server's name`);
  if (byPod.length === 1) return { name: byPod[0].name, line: `pod ${name} -> server ${byPod[0].name}` };
  if ((cluster.pods ?? []).some((p) => p.pod === name)) {
    throw new LookupError('SERVER_NOT_FOUND', `pod ${name} runs no RethinkDB server the manager sees (not joined yet, or disconnected); ${known(cluster)}`);
  }
  throw new LookupError('SERVER_NOT_FOUND', `"${name}" is neither a server nor the pod of one; ${known(cluster)}`);
}

function resolvePod(name, cluster) {
  const pods = new Set([
    ...(cluster.pods ?? []).map((p) => p.pod),
    ...cluster.servers.map((s) => podOf(s, cluster)),
    // A warning outlives its pod: ending the warning of a pod that is gone names the pod it was raised for.
    ...(cluster.perfWarnings ?? []).map((w) => w.pod),
  ].filter(Boolean));
  if (pods.has(name)) return { name, line: null };
  const servers = preferConnected(cluster.servers.filter((s) => s.name === name));
  if (servers.length > 0) {
    const pod = podOf(servers[0], cluster);
    if (!pod) {
      const why = Array.isArray(cluster.pods) ? 'it is disconnected and no pod is known for it' : `the manager lists no pods${cluster.podsError ? ` (${cluster.podsError})` : ''}`;
      throw new LookupError('POD_NOT_FOUND', `server ${name} has no pod the manager knows: ${why}; give the pod's name`);
    }
    return { name: pod, line: `server ${name} -> pod ${pod}` };
  }
  throw new LookupError('POD_NOT_FOUND', `"${name}" is neither a pod nor a server; ${known(cluster)}`);
}

// A restarted server can be listed twice under one name (the old one disconnected): the connected one is meant.
function preferConnected(servers) {
  const connected = servers.filter((s) => s.connected);
  return connected.length > 0 ? connected : servers;
}

function known(cluster) {
  const servers = cluster.servers.map((s) => s.name);
  const pods = [...new Set([...(cluster.pods ?? []).map((p) => p.pod), ...cluster.servers.map((s) => podOf(s, cluster))].filter(Boolean))];
  return `servers: ${servers.join(', ') || 'none'}; pods: ${pods.join(', ') || (Array.isArray(cluster.pods) ? 'none' : 'not listed by the manager')}`;
}
