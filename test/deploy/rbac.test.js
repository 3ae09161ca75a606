// The manager's RBAC in deploy/k8s grants exactly rbacRulesFromKubeCalls(): the permissions are derived from
// the Kubernetes adapter's KUBE_CALLS and never maintained by hand in two places.

import { stringify } from 'yaml';
import { rbacRulesFromKubeCalls } from '../../src/kubernetes/rbac.js';
import { findResource, renderKustomization } from '../helpers/deploy-files.js';

const { resources } = renderKustomization();
const expected = rbacRulesFromKubeCalls();
const normalize = (rules) => rules.map((r) => ({ apiGroups: r.apiGroups, resources: r.resources, verbs: [...r.verbs].sort() }))
  .sort((a, b) => `${a.apiGroups}/${a.resources}`.localeCompare(`${b.apiGroups}/${b.resources}`));

// On a difference, the message carries the rules to paste into deploy/k8s/manager-rbac.yaml.
function expectExactly(actualRules, wantedRules) {
  try {
    expect(normalize(actualRules)).toEqual(wantedRules);
  } catch (err) {
    err.message += `\n\nrules for deploy/k8s/manager-rbac.yaml, from rbacRulesFromKubeCalls():\n${stringify({ rules: wantedRules })}`;
    throw err;
  }
}

describe('deploy/k8s RBAC', () => {
  test('when the manager makes namespaced calls, then its Role grants exactly the namespaced rules, nothing more', () => {
    const role = findResource(resources, 'Role', 'rethinkdb-manager');
    expectExactly(role.rules, expected.namespaced);
  });

  test('when the manager makes cluster-scoped calls (nodes, node metrics, TokenReview), then its ClusterRole grants exactly those', () => {
    const clusterRole = findResource(resources, 'ClusterRole', 'rethinkdb-manager');
    expectExactly(clusterRole.rules, expected.cluster);
  });

  test('when the roles are bound, then each binding gives its role to the manager\'s ServiceAccount only', () => {
    const serviceAccount = findResource(resources, 'ServiceAccount', 'rethinkdb-manager');
    const subject = { kind: 'ServiceAccount', name: serviceAccount.metadata.name, namespace: serviceAccount.metadata.namespace };
    for (const [bindingKind, roleKind] of [['RoleBinding', 'Role'], ['ClusterRoleBinding', 'ClusterRole']]) {
      const binding = findResource(resources, bindingKind, 'rethinkdb-manager');
      expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name: 'rethinkdb-manager' });
      expect(binding.subjects).toEqual([subject]);
    }
  });

  test('when anything else in deploy/k8s grants permissions, then the test knows about it (no other role or binding)', () => {
    const rbacKinds = ['Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding'];
    expect(resources.filter(({ doc }) => rbacKinds.includes(doc.kind)).map(({ doc }) => doc.kind).sort()).toEqual([...rbacKinds].sort());
  });
});
