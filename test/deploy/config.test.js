// The manager's configuration as deployed (the ConfigMap in deploy/k8s) is one that loadConfig accepts, with
// keys it knows, and it agrees with the manifests it refers to.

import { CONFIG_KEYS, loadConfig } from '../../src/config.js';
import { findResource, renderKustomization } from '../helpers/deploy-files.js';

const { resources } = renderKustomization();
const configMap = findResource(resources, 'ConfigMap', 'rethinkdb-manager');
const manager = findResource(resources, 'Deployment', 'rethinkdb-manager');
const knownKeys = CONFIG_KEYS.map((k) => k.env);
// What the Deployment adds to the ConfigMap: the Secret and the downward API.
const deploymentEnv = { RETHINKDB_PASSWORD: 'from-the-secret', KUBERNETES_NAMESPACE: 'rethinkdb', KUBERNETES_SERVICE_HOST: '198.19.192.1' };

describe('the manager ConfigMap', () => {
  test.each(Object.keys(configMap.data))('when %s is set in the ConfigMap, then it is a key loadConfig knows', (key) => {
    expect(knownKeys).toContain(key);
  });

  test('when the manager starts with the ConfigMap and its Deployment env, then loadConfig accepts it: RethinkDB backend, in-cluster Kubernetes', () => {
    const config = loadConfig({ ...configMap.data, ...deploymentEnv });
    expect(config).toMatchObject({ backend: 'rethinkdb', kubernetes: { mode: 'in-cluster' } });
  });

  test('when the Deployment adds variables, then they too are keys loadConfig knows, and every value is a string', () => {
    for (const { name } of manager.spec.template.spec.containers[0].env) expect(knownKeys).toContain(name);
    for (const value of Object.values(configMap.data)) expect(typeof value).toBe('string');
  });

  test('when the manager looks for the StatefulSet, its pods and its namespace, then it finds the deployed ones', () => {
    const { kubernetes } = loadConfig({ ...configMap.data, ...deploymentEnv });
    const statefulSet = findResource(resources, 'StatefulSet', kubernetes.statefulSetName);
    expect(statefulSet.metadata.namespace).toBe(kubernetes.namespace);
    const [key, value] = kubernetes.podLabelSelector.split('=');
    expect(statefulSet.spec.template.metadata.labels[key]).toBe(value);
  });
});

describe('the manager ConfigMap: who may call', () => {
  const { auth } = loadConfig({ ...configMap.data, ...deploymentEnv });
  const statefulSet = findResource(resources, 'StatefulSet', 'rethinkdb');
  const subject = (doc, name) => `system:serviceaccount:${doc.metadata.namespace}:${name}`;

  test('when deployed, then callers are checked with TokenReview and reads are open', () => {
    expect(auth).toMatchObject({ mode: 'tokenreview', protectReads: false });
  });

  test('when a RethinkDB pod sends its projected token, then the token is minted for the audience the manager checks', () => {
    const projected = statefulSet.spec.template.spec.volumes.flatMap((v) => v.projected?.sources ?? []).map((s) => s.serviceAccountToken).filter(Boolean);
    expect(projected).toEqual([expect.objectContaining({ audience: auth.audience })]);
    expect(projected[0].expirationSeconds).toBeLessThanOrEqual(3600);
  });

  test('when a RethinkDB pod calls a hook, then its service account is the hook subject', () => {
    expect(auth.hookSubjects).toEqual([subject(statefulSet, statefulSet.spec.template.spec.serviceAccountName)]);
  });

  test('when an operator mints a token, then the deployed operator service account is the operator subject, and it carries no Kubernetes token', () => {
    const operator = findResource(resources, 'ServiceAccount', 'rethinkdb-manager-operator');
    expect(auth.operatorSubjects).toEqual([subject(operator, operator.metadata.name)]);
    expect(operator.automountServiceAccountToken).toBe(false);
  });
});
