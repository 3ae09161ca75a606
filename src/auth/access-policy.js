// Who may do what: pure functions from a request's method and path, the caller's identity and the target it
// names to a verdict. No I/O, so every rule is table-tested (test/unit/access-policy.test.js).

const POD_NAME_EXTRA = 'authentication.kubernetes.io/pod-name';

// Which kind of access a request needs: open (probes, the status page's shell), read, hook (acts on one pod) or
// operator.
// The kubelet's probes: open to anyone, and not logged one by one (src/app.js).
export const PROBE_PATHS = new Set(['/livez', '/readyz']);

export function classifyRequest(method, path) {
  if (PROBE_PATHS.has(path)) return 'open';
  // The status page's shell holds no data (it reads the endpoints, which are checked), so it always loads.
  if (path === '/' && (method === 'GET' || method === 'HEAD')) return 'open';
  if (path.startsWith('/v1/hooks/')) return 'hook';
  if (path.startsWith('/v1/actions/')) return 'operator';
  if (method === 'GET' || method === 'HEAD') return 'read';
  return 'operator';
}

// The roles an authenticated user holds: listed by name, or through a group entry "group:NAME".
export function rolesOf({ username, groups = [] }, { hookSubjects, operatorSubjects }) {
  const matches = (list) => list.some((entry) => (entry.startsWith('group:') ? groups.includes(entry.slice(6)) : entry === username));
  return { hook: matches(hookSubjects), operator: matches(operatorSubjects) };
}

// The identity a TokenReview status describes, or why it does not describe one we accept.
export function identityFromReview(review, { audience, namespace }) {
  if (!review.authenticated) return { error: `the token was not accepted: ${review.error ?? 'not authenticated'}` };
  if (!(review.audiences ?? []).includes(audience)) {
    return { error: `the token is not for audience ${audience} (it is for ${(review.audiences ?? []).join(', ') || 'no stated audience'})` };
  }
  // A pod name says nothing of its namespace: it binds only a service account of the manager's namespace.
  const pods = review.extra?.[POD_NAME_EXTRA] ?? [];
  const ours = String(review.username ?? '').startsWith(`system:serviceaccount:${namespace}:`);
  return { username: review.username, groups: review.groups ?? [], pod: pods.length === 1 && ours ? pods[0] : null };
}

// The verdict for one request: { allow: true } or { allow: false, code, message }. target = { pod, node }.
export function authorize({ kind, identity, target = {}, protectReads = false }) {
  if (kind === 'open' || (kind === 'read' && !protectReads)) return { allow: true };
  if (!identity) return deny('UNAUTHENTICATED', 'a bearer token is required (Authorization: Bearer <token>)');
  const { roles } = identity;
  if (roles.operator) return { allow: true };
  if (kind === 'read') {
    return roles.hook ? { allow: true } : deny('FORBIDDEN', `${identity.username} is neither an operator nor a hook caller, and AUTH_PROTECT_READS is on`);
  }
  if (kind === 'operator') return deny('FORBIDDEN', `${identity.username} is not an operator (see AUTH_OPERATOR_SUBJECTS); this endpoint needs an operator identity`);
  if (!roles.hook) return deny('FORBIDDEN', `${identity.username} may not call hooks (see AUTH_HOOK_SUBJECTS)`);
  return authorizeHook(identity, target);
}

// A pod's token acts for that pod only: never for another pod and never for a whole node.
function authorizeHook(identity, { pod, node }) {
  if (!identity.pod) return deny('FORBIDDEN', `${identity.username}'s token is not bound to a pod; hooks need the pod's projected service-account token`);
  if (node !== undefined) return deny('FORBIDDEN', `pod ${identity.pod} may not act on a node; node-wide warnings need an operator`);
  if (pod !== identity.pod) {
    return deny('FORBIDDEN', `pod ${identity.pod} may only act on itself, not on ${pod === undefined ? 'an unnamed pod' : JSON.stringify(pod)}`);
  }
  return { allow: true };
}

function deny(code, message) {
  return { allow: false, code, message };
}

// Who asks, as the events see it (src/policy/requesters.js): a pod acting for itself, or an operator (who may also
// hold a pod-bound token).
export function requesterOf(identity) {
  return identity?.pod && !identity.roles?.operator ? { kind: 'pod', pod: identity.pod } : { kind: 'operator' };
}

