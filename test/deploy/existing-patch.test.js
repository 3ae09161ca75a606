// deploy/existing/statefulset-patch.yaml, the patch docs/existing-statefulset.md gives for a StatefulSet the chart did
// not install: its pieces are the shipped StatefulSet's own (so they cannot drift apart), and a bare StatefulSet with
// the patch merged in leaves the manager's start check (src/policy/attachment.js) only the start command to report.
// kubectl's own strategic merge of it is in test/kube-lab/kubelet.test.js.

import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { toPodTemplate } from '../../src/kubernetes/kube-adapter.js';
import { checkAttachment } from '../../src/policy/attachment.js';

const read = (path) => parse(readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8'));
const patch = read('deploy/existing/statefulset-patch.yaml').spec.template.spec;
const base = read('deploy/k8s/rethinkdb-statefulset.yaml').spec.template.spec;
const byName = (list, name) => list.find((x) => x.name === name);

describe('the patch for an existing StatefulSet', () => {
  test('when it is compared with the shipped StatefulSet, then its hooks, environment, token volume and mount, readiness gate and grace period are the same', () => {
    const [container] = patch.containers;
    const shipped = base.containers[0];
    expect(container.lifecycle).toEqual(shipped.lifecycle);
    for (const env of container.env) expect(env).toEqual(byName(shipped.env, env.name));
    expect(container.volumeMounts).toEqual([byName(shipped.volumeMounts, 'manager-token')]);
    expect(patch.volumes).toEqual([byName(base.volumes, 'manager-token')]);
    expect(patch.readinessGates).toEqual(base.readinessGates);
    expect(patch.terminationGracePeriodSeconds).toBe(base.terminationGracePeriodSeconds);
  });

  test('when it is merged into a bare StatefulSet\'s template (containers, env and volumes by name), then only the start command is left to report', () => {
    const bare = {
      metadata: { labels: { app: 'rdb' } },
      spec: {
        volumes: [{ name: 'data', emptyDir: {} }],
        containers: [{ name: 'rethinkdb', command: ['rethinkdb', '--bind', 'all'], ports: [{ containerPort: 28015 }, { containerPort: 29015 }], env: [{ name: 'TZ', value: 'UTC' }], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      },
    };
    const [addition] = patch.containers;
    const merged = {
      metadata: bare.metadata,
      spec: {
        ...bare.spec,
        terminationGracePeriodSeconds: patch.terminationGracePeriodSeconds,
        readinessGates: patch.readinessGates,
        volumes: [...bare.spec.volumes, ...patch.volumes],
        containers: [{
          ...bare.spec.containers[0],
          env: [...bare.spec.containers[0].env, ...addition.env],
          volumeMounts: [...bare.spec.containers[0].volumeMounts, ...addition.volumeMounts],
          lifecycle: addition.lifecycle,
        }],
      },
    };
    const config = {
      statefulSetName: 'rdb', namespace: 'db', podLabelSelector: 'app=rdb', authMode: 'tokenreview', audience: 'rethinkdb-manager', readinessGateEnabled: true, prestopDeadlineSeconds: 20,
    };
    expect(checkAttachment(toPodTemplate('rdb', bare), config).map((f) => f.check)).toEqual(['prestop-hook', 'poststart-hook', 'hook-token', 'readiness-gate', 'grace-period', 'canonical-loopback']);
    expect(checkAttachment(toPodTemplate('rdb', merged), config).map((f) => f.check)).toEqual(['canonical-loopback']);
  });
});
