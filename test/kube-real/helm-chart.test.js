// The Helm chart rendered by the pinned helm (helm template) and server-side applied to a real kube-apiserver, as
// deploy-and-hook-auth.test.js does with deploy/k8s: the default render is stored, and the kustomize base applied
// over it changes nothing; the render of test/helm/custom-values.yaml in another namespace is stored as rendered.

import { join } from 'node:path';
import { KubernetesObjectApi, dumpYaml } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import {
  differences, objectId, renderHelmChart, renderKustomization, repoRoot, withoutHelmChecksum,
} from '../helpers/deploy-files.js';
import { startKubeApiServer } from '../helpers/kube-apiserver.js';
import { applyObjects } from '../helpers/kube-objects.js';

const CUSTOM_NAMESPACE = 'rethinkdb-custom';
// With the Namespace (namespace.create true), as the base has it: the API server here starts empty.
const chart = renderHelmChart({ set: { 'namespace.create': true } });
const base = renderKustomization().resources.map(({ doc }) => doc);
const custom = renderHelmChart({ namespace: CUSTOM_NAMESPACE, valuesFiles: [join(repoRoot, 'test/helm/custom-values.yaml')], set: { 'namespace.create': true } });
let api;
let objects;

// The stored object, or null when the API server has none of that kind, namespace and name. The client reads it into
// its models, whose names differ from the API's in places (a NetworkPolicy rule's `from` is `_from`), so it is
// written back out in the API's names (dumpYaml) for the comparison.
async function readBack(doc) {
  const { apiVersion, kind, metadata: { name, namespace } } = doc;
  try {
    return parseYaml(dumpYaml(await objects.read({ apiVersion, kind, metadata: { name, namespace } })));
  } catch (err) {
    if (err.code === 404) return null;
    throw err;
  }
}

// The fields of `written` that the stored object lacks or holds otherwise (the API server adds defaults, which
// are not differences: only paths present in what was written are compared).
function changedFields(written, stored) {
  return differences(written, stored).filter((path) => {
    const parts = path.match(/[^.[\]]+/g) ?? [];
    let node = written;
    for (const part of parts) {
      if (node === undefined || node === null) return false;
      node = node[part];
    }
    return node !== undefined;
  });
}

beforeAll(async () => {
  api = await startKubeApiServer();
  objects = KubernetesObjectApi.makeApiClient(api.kubeConfig);
}, 120000);

afterAll(async () => { await api?.stop(); });

describe('the Helm chart on a real API server', () => {
  test('when the default render is server-side applied, then every object is stored as written', async () => {
    const applied = await applyObjects(api.kubeConfig, chart);
    expect(applied.map(objectId)).toEqual(chart.map(objectId));
    for (const doc of chart) {
      const stored = await readBack(doc);
      expect([objectId(doc), stored?.metadata.uid]).toEqual([objectId(doc), expect.stringMatching(/^[0-9a-f-]{36}$/)]);
      expect([objectId(doc), changedFields(doc, stored)]).toEqual([objectId(doc), []]);
    }
  });

  // The chart is applied a second time first: the Namespace's first re-apply bumps its resourceVersion whatever is
  // applied (the API server records the fields it set at creation, its name label and finalizer, under a manager
  // before-first-apply); deploy-and-hook-auth.test.js compares its third apply with its second for that reason.
  test('when the kustomize base is applied over the chart\'s objects, then the API server changes nothing (same resourceVersions)', async () => {
    // Less the chart's Helm-only checksum annotation (withoutHelmChecksum), which the base does not carry.
    const settled = await applyObjects(api.kubeConfig, chart.map(withoutHelmChecksum));
    const before = Object.fromEntries(settled.map((o) => [objectId(o), o.metadata.resourceVersion]));
    const again = await applyObjects(api.kubeConfig, base);
    expect(Object.fromEntries(again.map((o) => [objectId(o), o.metadata.resourceVersion]))).toEqual(before);
  });

  test('when the custom render is applied in namespace rethinkdb-custom, then every object is stored as written, with its replicas, token Secret and webhook policy', async () => {
    await applyObjects(api.kubeConfig, custom);
    for (const doc of custom) {
      const stored = await readBack(doc);
      expect([objectId(doc), stored === null ? [] : changedFields(doc, stored)]).toEqual([objectId(doc), []]);
      expect(stored).not.toBeNull();
    }
    const deployment = await readBack({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'rethinkdb-manager', namespace: CUSTOM_NAMESPACE } });
    const statefulSet = await readBack({ apiVersion: 'apps/v1', kind: 'StatefulSet', metadata: { name: 'rethinkdb', namespace: CUSTOM_NAMESPACE } });
    expect([deployment.spec.replicas, statefulSet.spec.replicas]).toEqual([3, 5]);
    expect(statefulSet.spec.template.spec.volumes.find((v) => v.name === 'manager-token').secret)
      .toMatchObject({ secretName: 'manager-shared-token', items: [{ key: 'bearer', path: 'token' }] });
    // Cluster-scoped objects have fixed names: a server-side apply of this second render took the webhook over (what
    // `helm install` of a second release would do is not run here. README: one per cluster).
    const webhook = await readBack({ apiVersion: 'admissionregistration.k8s.io/v1', kind: 'ValidatingWebhookConfiguration', metadata: { name: 'rethinkdb-manager-eviction' } });
    expect(webhook.webhooks[0]).toMatchObject({ failurePolicy: 'Fail', clientConfig: { service: { namespace: CUSTOM_NAMESPACE } } });
  });
});
