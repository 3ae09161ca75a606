// The RBAC rules the manager needs, derived from the Kubernetes adapter's KUBE_CALLS so that the list of
// permissions is kept in one place: the manifests and the least-privilege tests compare against this.

import { KUBE_CALLS } from './kube-adapter.js';

// { namespaced: PolicyRule[], cluster: PolicyRule[] }, one rule per (apiGroup, resource), sorted.
export function rbacRulesFromKubeCalls(calls = KUBE_CALLS) {
  const toRule = (call) => ({ apiGroups: [call.apiGroup], resources: [call.resource], verbs: [...call.verbs].sort() });
  const byKey = (a, b) => `${a.apiGroups[0]}/${a.resources[0]}`.localeCompare(`${b.apiGroups[0]}/${b.resources[0]}`);
  return {
    namespaced: calls.filter((c) => c.namespaced).map(toRule).sort(byKey),
    cluster: calls.filter((c) => !c.namespaced).map(toRule).sort(byKey),
  };
}
