// The Helm chart deploy/helm/rethinkdb-k8s-manager, rendered by the helm that test/helm/build-helm.sh builds:
// it lints; with the default values it renders exactly the kustomize base's objects (no normalization: the chart
// emits the base's names and labels); non-default values land where the README's values table says; values that
// would break the wiring are refused with a message.

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CONFIG_KEYS, loadConfig } from '../../src/config.js';
import { REPLICAS_READY_CONDITION } from '../../src/policy/rollout.js';
import {
  CLUSTER_SCOPED_KINDS, differences, helmChartDir, objectsById, readYamlFile, renderHelmChart, renderKustomization, repoRoot, runHelm, validateManifest,
  withoutHelmChecksum,
} from '../helpers/deploy-files.js';

const customValues = join(repoRoot, 'test/helm/custom-values.yaml');
const CUSTOM_NAMESPACE = 'rethinkdb-custom';
const fullBase = objectsById(renderKustomization().resources.map(({ doc }) => doc));
// The chart's default (namespace.create false, for helm install into an existing namespace) is the base less its
// Namespace.
const base = new Map([...fullBase].filter(([id]) => !id.startsWith('Namespace/')));
const chart = objectsById(renderHelmChart());
const custom = objectsById(renderHelmChart({ namespace: CUSTOM_NAMESPACE, valuesFiles: [customValues] }));
const customObject = (kind, name) => custom.get(`${kind}/${CLUSTER_SCOPED_KINDS.has(kind) ? '' : CUSTOM_NAMESPACE}/${name}`);

// What each render differs from the base in: { id: [paths] }, objects missing on either side as ['(missing)'].
function diffFromBase(rendered, from = base) {
  const found = {};
  for (const id of new Set([...from.keys(), ...rendered.keys()])) {
    const paths = from.has(id) && rendered.has(id) ? differences(withoutHelmChecksum(from.get(id)), withoutHelmChecksum(rendered.get(id))) : ['(missing)'];
    if (paths.length > 0) found[id] = paths;
  }
  return found;
}

// The manager's environment as its pod would have it: the ConfigMap plus the Deployment's own variables.
function managerEnv(objects, namespace) {
  const configMap = [...objects.values()].find((o) => o.kind === 'ConfigMap');
  return { ...configMap.data, RETHINKDB_PASSWORD: 'from-the-secret', KUBERNETES_NAMESPACE: namespace, KUBERNETES_SERVICE_HOST: '198.18.96.1' };
}

describe('the Helm chart: lint', () => {
  test.each([['the default values', []], ['test/helm/custom-values.yaml', ['--values', customValues]]])(
    'when the chart is linted strictly with %s, then helm reports no warning and no error',
    (name, args) => {
      const { status, stdout, stderr } = runHelm(['lint', '--strict', helmChartDir, ...args]);
      expect({ status, stderr }).toEqual({ status: 0, stderr: '' });
      expect(stdout).toContain('1 chart(s) linted, 0 chart(s) failed');
      expect(stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
    },
  );

  test('when Chart.yaml is read, then the chart\'s version and appVersion are package.json\'s version', () => {
    const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8'));
    const [meta] = readYamlFile(join(helmChartDir, 'Chart.yaml'));
    expect({ version: meta.version, appVersion: meta.appVersion }).toEqual({ version: pkg.version, appVersion: pkg.version });
  });
});

describe('the Helm chart with the default values equals the kustomize base', () => {
  test('when both are rendered (helm template in namespace rethinkdb, deploy/k8s less its Namespace), then they hold the same objects, each equal field for field', () => {
    expect([...chart.keys()].sort()).toEqual([...base.keys()].sort());
    expect(diffFromBase(chart)).toEqual({});
  });

  test('when one value changes, then the comparison reports exactly that field (it can fail)', () => {
    const changed = objectsById(renderHelmChart({ set: { 'manager.replicas': 3 } }));
    expect(diffFromBase(changed)).toEqual({ 'Deployment/rethinkdb/rethinkdb-manager': ['.spec.replicas'] });
  });

  test('when the namespace or the Namespace object changes, then the comparison reports every object concerned', () => {
    const withNamespace = objectsById(renderHelmChart({ set: { 'namespace.create': true } }));
    expect(diffFromBase(withNamespace)).toEqual({ 'Namespace//rethinkdb': ['(missing)'] });
    expect(diffFromBase(withNamespace, fullBase)).toEqual({});
    // In namespace db every object of the base is missing or differs, except the ClusterRole, which names none.
    const elsewhere = Object.keys(diffFromBase(objectsById(renderHelmChart({ namespace: 'db' }))));
    expect(elsewhere).toEqual(expect.arrayContaining([...base.keys()].filter((id) => id !== 'ClusterRole//rethinkdb-manager')));
    expect(elsewhere).not.toContain('ClusterRole//rethinkdb-manager');
  });
});

describe('the Helm chart with test/helm/custom-values.yaml renders what the values say', () => {
  const deployment = customObject('Deployment', 'rethinkdb-manager');
  const statefulSet = customObject('StatefulSet', 'rethinkdb');
  const managerPod = deployment.spec.template.spec;
  const rethinkdbPod = statefulSet.spec.template.spec;
  const [manager] = managerPod.containers;
  const [rethinkdb] = rethinkdbPod.containers;
  // Inside each test, so that a value loadConfig refuses fails that test rather than the whole file.
  const loadCustomConfig = () => loadConfig(managerEnv(custom, CUSTOM_NAMESPACE));

  test.each([...custom.entries()].map(([id, doc]) => [id, doc]))('when %s is validated against the Kubernetes schema, then it has no error and no unknown field', async (id, doc) => {
    expect(await validateManifest(doc)).toEqual([]);
  });

  test('when the release namespace is rethinkdb-custom, then every namespaced object, binding and webhook reference is in it', () => {
    // namespace.create defaults to false: helm install goes into a namespace that exists.
    expect(customObject('Namespace', CUSTOM_NAMESPACE)).toBeUndefined();
    const namespaced = [...custom.values()].filter((o) => !CLUSTER_SCOPED_KINDS.has(o.kind));
    expect(new Set(namespaced.map((o) => o.metadata.namespace))).toEqual(new Set([CUSTOM_NAMESPACE]));
    expect(customObject('ClusterRoleBinding', 'rethinkdb-manager').subjects).toEqual([{ kind: 'ServiceAccount', name: 'rethinkdb-manager', namespace: CUSTOM_NAMESPACE }]);
    expect(customObject('RoleBinding', 'rethinkdb-manager').subjects[0].namespace).toBe(CUSTOM_NAMESPACE);
    const [hook] = customObject('ValidatingWebhookConfiguration', 'rethinkdb-manager-eviction').webhooks;
    expect(hook.clientConfig.service.namespace).toBe(CUSTOM_NAMESPACE);
    expect(hook.namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': CUSTOM_NAMESPACE } });
  });

  test('when replicas, images, pull settings and resources are set, then both workloads have them', () => {
    expect(deployment.spec.replicas).toBe(3);
    expect(statefulSet.spec.replicas).toBe(5);
    expect(manager).toMatchObject({ image: 'registry.example.com/team/rethinkdb-k8s-manager:0.1.0-rc.2', imagePullPolicy: 'Always' });
    expect(manager.resources).toEqual({ requests: { cpu: '100m', memory: '192Mi' }, limits: { cpu: '1', memory: '384Mi' } });
    expect(rethinkdb.image).toBe('registry.example.com/team/rethinkdb:2.4.4-custom.1');
    expect(rethinkdb.imagePullPolicy).toBeUndefined();
    expect(rethinkdb.resources).toEqual({ requests: { cpu: '2', memory: '4Gi' }, limits: { cpu: '4', memory: '8Gi' } });
    expect(managerPod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(rethinkdbPod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
  });

  test('when manager.config, monitor thresholds, the latency trigger and headroom targets are set, then the manager loads them (3600000 stays an integer, not 3.6e+06)', () => {
    expect(loadCustomConfig()).toMatchObject({
      logLevel: 'debug', managedTables: ['ycsb.*'], deadlines: { prestopSeconds: 15 }, maintenance: { taints: ['node.kubernetes.io/unschedulable'] },
      monitor: { hotUtilization: 0.9, pollIntervalMs: 3600000, consecutivePolls: 3, immediateUtilization: 0, scaleOut: false, hotSkew: 1.3, maxReplicas: 16 },
      latency: { enabled: true, factor: 3, windowMs: 2000, minDeltaMs: 5 },
      headroom: { enabled: true, weights: { cpu: 1, node: 2, latency: 1 }, tolerance: 0.1 },
    });
    expect(customObject('ConfigMap', 'rethinkdb-manager').data.MONITOR_POLL_INTERVAL_MS).toBe('3600000');
    expect(customObject('ConfigMap', 'rethinkdb-manager').data.MONITOR_IMMEDIATE_UTILIZATION).toBe('0');
  });

  test('when auth.mode is static, then the manager reads the token from the Secret and the RethinkDB hooks send that same token', () => {
    expect(loadCustomConfig().auth).toMatchObject({ mode: 'static', protectReads: true, staticTokenFile: '/etc/rethinkdb-manager/auth/token' });
    const tokenSecret = { secretName: 'manager-shared-token', items: [{ key: 'bearer', path: 'token' }] };
    expect(managerPod.volumes.find((v) => v.name === 'auth-token').secret).toEqual(tokenSecret);
    expect(manager.volumeMounts).toContainEqual({ name: 'auth-token', mountPath: '/etc/rethinkdb-manager/auth', readOnly: true });
    const hookTokenVolume = rethinkdbPod.volumes.find((v) => v.name === 'manager-token');
    expect(hookTokenVolume).toEqual({ name: 'manager-token', secret: tokenSecret });
    const mount = rethinkdb.volumeMounts.find((m) => m.name === 'manager-token');
    expect(rethinkdb.env.find((e) => e.name === 'MANAGER_TOKEN_FILE').value).toBe(`${mount.mountPath}/token`);
  });

  test('when the webhook settings change, then its port, Secret, deadline, policy, timeout, CA and annotations follow', () => {
    expect(loadCustomConfig().webhook).toMatchObject({ enabled: true, port: 9443, evictionDeadlineSeconds: 4 });
    expect(manager.ports).toContainEqual({ name: 'webhook', containerPort: 9443 });
    expect(managerPod.volumes.find((v) => v.name === 'webhook-tls').secret).toEqual({ secretName: 'webhook-serving-cert', optional: true });
    const webhook = customObject('ValidatingWebhookConfiguration', 'rethinkdb-manager-eviction');
    expect(webhook.metadata.annotations).toEqual({ 'cert-manager.io/inject-ca-from': 'rethinkdb-custom/manager-webhook' });
    expect(webhook.webhooks[0]).toMatchObject({ failurePolicy: 'Fail', timeoutSeconds: 5, clientConfig: { caBundle: 'Y2EtYnVuZGxlLWZvci10ZXN0cw==' } });
  });

  test('when the proxies\' replicas and resources and the RethinkDB settings change, then the proxies follow: the servers\' image, pull secrets and admin Secret, a --join for each of the 5 servers, and the manager seeds all 5', () => {
    const proxy = customObject('Deployment', 'rethinkdb-proxy');
    const [container] = proxy.spec.template.spec.containers;
    expect(proxy.spec.replicas).toBe(3);
    expect(container.resources).toEqual({ requests: { cpu: '500m', memory: '384Mi' }, limits: { cpu: '2', memory: '768Mi' } });
    expect(container.image).toBe(rethinkdb.image);
    expect(proxy.spec.template.spec.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    expect(container.env.find((e) => e.name === 'RETHINKDB_PASSWORD').valueFrom.secretKeyRef).toEqual({ name: 'db-admin', key: 'pw' });
    const servers = [0, 1, 2, 3, 4].map((i) => `rethinkdb-${i}.rethinkdb`);
    expect(container.env.find((e) => e.name === 'JOIN_ADDRESSES').value).toBe(servers.map((s) => `${s}:29015`).join(' '));
    expect(loadCustomConfig().rethinkdb.seeds).toEqual(servers.map((host) => ({ host, port: 28015 })));
    expect(customObject('Service', 'rethinkdb-client').spec.selector).toEqual({ app: 'rethinkdb-proxy' });
  });

  test('when the RethinkDB settings change, then the admin Secret, storage and anti-affinity follow', () => {
    const secretRefs = [manager, rethinkdb].map((c) => c.env.find((e) => e.name === 'RETHINKDB_PASSWORD').valueFrom.secretKeyRef);
    expect(secretRefs).toEqual([{ name: 'db-admin', key: 'pw' }, { name: 'db-admin', key: 'pw' }]);
    expect(statefulSet.spec.volumeClaimTemplates[0].spec).toMatchObject({ storageClassName: 'fast-ssd', resources: { requests: { storage: '50Gi' } } });
    expect(rethinkdbPod.affinity.podAntiAffinity).toEqual({
      preferredDuringSchedulingIgnoredDuringExecution: [{
        weight: 100, podAffinityTerm: { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: { app: 'rethinkdb' } } },
      }],
    });
  });
});

describe('the Helm chart: other values', () => {
  test('when the webhook is disabled, then no webhook object, port, Service port, mount or WEBHOOK_* key is rendered, and the manager runs it off', () => {
    const objects = objectsById(renderHelmChart({ set: { 'webhook.enabled': false } }));
    expect([...objects.keys()]).not.toContain('ValidatingWebhookConfiguration//rethinkdb-manager-eviction');
    const pod = objects.get('Deployment/rethinkdb/rethinkdb-manager').spec.template.spec;
    expect(pod.containers[0].ports.map((p) => p.name)).toEqual(['http']);
    expect(pod.volumes.map((v) => v.name)).toEqual(['tmp', 'gate-hold', 'relay-token']);
    expect(objects.get('Service/rethinkdb/rethinkdb-manager').spec.ports.map((p) => p.name)).toEqual(['http']);
    const policy = objects.get('NetworkPolicy/rethinkdb/rethinkdb-manager').spec;
    expect([...policy.ingress, ...policy.egress].flatMap((rule) => (rule.ports ?? []).map((p) => p.port))).not.toContain('webhook');
    expect(loadConfig(managerEnv(objects, 'rethinkdb')).webhook.enabled).toBe(false);
  });

  test('when proxy.enabled is false, then no proxy Deployment or PDB is rendered and rethinkdb-client selects the servers, nothing else changes', () => {
    const objects = objectsById(renderHelmChart({ set: { 'proxy.enabled': false } }));
    // Without proxies there are no gates to hold (the holds' own objects: the next tests).
    expect(diffFromBase(objects, objectsById(renderHelmChart({ set: { 'gate.hold.enabled': false } })))).toEqual({
      'Deployment/rethinkdb/rethinkdb-proxy': ['(missing)'],
      'PodDisruptionBudget/rethinkdb/rethinkdb-proxy': ['(missing)'],
      // ... and goes to the servers' driver port: the gate runs beside a proxy only.
      'Service/rethinkdb/rethinkdb-client': ['.spec.ports[0].targetPort', '.spec.selector.app'],
    });
    const client = objects.get('Service/rethinkdb/rethinkdb-client');
    const servers = objects.get('StatefulSet/rethinkdb/rethinkdb');
    expect(client.spec.selector).toEqual(servers.spec.selector.matchLabels);
    expect(servers.spec.template.spec.containers[0].ports).toContainEqual({ name: client.spec.ports[0].targetPort, containerPort: client.spec.ports[0].port });
  });

  test('when rethinkdb.existing names a StatefulSet of its own, then only the manager is rendered, configured for its pods, names, servers and ServiceAccount', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rkm-existing-'));
    const values = join(dir, 'values.yaml');
    writeFileSync(values, [
      'rethinkdb:', '  existing:', '    statefulSetName: rdb', '    podLabels:', '      app.kubernetes.io/name: rdb', '      tier: db',
      '    hosts: [rdb-0.rdb, rdb-1.rdb, rdb-2.rdb]', '    driverPort: 28016', '    serviceAccountName: rdb-sa', '',
    ].join('\n'));
    const objects = objectsById(renderHelmChart({ namespace: 'db', valuesFiles: [values] }));
    rmSync(dir, { recursive: true, force: true });
    const kinds = [...objects.keys()].filter((id) => !id.includes('rethinkdb-manager') && !id.includes('operator'));
    // Nothing of RethinkDB's own: no StatefulSet, Services, PDB, ServiceAccount, proxies or gates.
    expect(kinds).toEqual([]);
    const config = loadConfig(managerEnv(objects, 'db'));
    expect({
      seeds: config.rethinkdb.seeds.map((s) => `${s.host}:${s.port}`), selector: config.kubernetes.podLabelSelector, statefulSet: config.kubernetes.statefulSetName,
      hookSubjects: config.auth.hookSubjects, holds: config.gateHold.tokenFile,
    }).toEqual({
      seeds: ['rdb-0.rdb:28016', 'rdb-1.rdb:28016', 'rdb-2.rdb:28016'], selector: 'app.kubernetes.io/name=rdb,tier=db', statefulSet: 'rdb',
      hookSubjects: ['system:serviceaccount:db:rdb-sa'], holds: undefined,
    });
    const policy = objects.get('NetworkPolicy/db/rethinkdb-manager').spec;
    expect(policy.ingress[0].from[0].podSelector.matchLabels).toEqual({ 'app.kubernetes.io/name': 'rdb', tier: 'db' });
    expect(policy.egress[0]).toEqual({ to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'rdb', tier: 'db' } } }], ports: [{ protocol: 'TCP', port: 28016 }] });
  });

  test('when gate.enabled is false, then the proxies run alone and rethinkdb-client goes to their driver port', () => {
    const objects = objectsById(renderHelmChart({ set: { 'gate.enabled': false } }));
    expect(diffFromBase(objects, objectsById(renderHelmChart({ set: { 'gate.hold.enabled': false } })))).toEqual({
      'Deployment/rethinkdb/rethinkdb-proxy': ['.spec.template.spec.containers[1]'],
      'Service/rethinkdb/rethinkdb-client': ['.spec.ports[0].targetPort'],
    });
    const proxy = objects.get('Deployment/rethinkdb/rethinkdb-proxy').spec.template.spec;
    expect(proxy.containers.map((c) => c.name)).toEqual(['rethinkdb-proxy']);
    expect(proxy.containers[0].ports).toContainEqual({ name: objects.get('Service/rethinkdb/rethinkdb-client').spec.ports[0].targetPort, containerPort: 28015 });
  });

  test.each([['gate.hold.enabled', 'gate.hold.enabled'], ['gate.enabled', 'gate.enabled'], ['proxy.enabled', 'proxy.enabled']])('when %s is false, then no hold token is mounted, no GATE_HOLD_ key is set and the manager has no egress to the gates', (_, key) => {
    const objects = objectsById(renderHelmChart({ set: { [key]: false } }));
    const config = objects.get('ConfigMap/rethinkdb/rethinkdb-manager').data;
    expect(Object.keys(config).filter((k) => k.startsWith('GATE_HOLD_'))).toEqual([]);
    expect(objects.get('Deployment/rethinkdb/rethinkdb-manager').spec.template.spec.volumes.map((v) => v.name)).not.toContain('gate-hold');
    const proxy = objects.get('Deployment/rethinkdb/rethinkdb-proxy')?.spec.template.spec;
    expect((proxy?.volumes ?? []).map((v) => v.name)).not.toContain('gate-hold');
    expect(JSON.stringify(objects.get('NetworkPolicy/rethinkdb/rethinkdb-manager').spec.egress)).not.toContain('rethinkdb-proxy');
    expect(loadConfig(managerEnv(objects, 'rethinkdb')).gateHold.tokenFile).toBeUndefined();
  });

  test('when holds are on (the default), then the manager and every gate read one token file, of the Secret gate.hold.secretName', () => {
    const objects = objectsById(renderHelmChart({ set: { 'gate.hold.secretName': 'my-hold-token' } }));
    const manager = objects.get('Deployment/rethinkdb/rethinkdb-manager').spec.template.spec;
    const proxy = objects.get('Deployment/rethinkdb/rethinkdb-proxy').spec.template.spec;
    const gate = proxy.containers.find((c) => c.name === 'query-gate');
    const tokenFile = loadConfig(managerEnv(objects, 'rethinkdb')).gateHold.tokenFile;
    expect(gate.env).toContainEqual({ name: 'GATE_HOLD_TOKEN_FILE', value: tokenFile });
    for (const [spec, container] of [[manager, manager.containers[0]], [proxy, gate]]) {
      const mount = container.volumeMounts.find((m) => m.name === 'gate-hold');
      expect(tokenFile.startsWith(`${mount.mountPath}/`)).toBe(true);
      expect(spec.volumes.find((v) => v.name === 'gate-hold')).toEqual({ name: 'gate-hold', secret: { secretName: 'my-hold-token', optional: true } });
    }
  });

  test('when auth.mode is none, then the manager runs without checks and the hooks keep their projected token', () => {
    const objects = objectsById(renderHelmChart({ set: { 'auth.mode': 'none' } }));
    expect(loadConfig(managerEnv(objects, 'rethinkdb')).auth.mode).toBe('none');
    expect(diffFromBase(objects)).toEqual({ 'ConfigMap/rethinkdb/rethinkdb-manager': ['.data.AUTH_MODE'] });
  });

  test('when the manager\'s configuration changes, then its pod template\'s checksum changes (helm upgrade restarts it); otherwise it stays', () => {
    const checksum = (set) => objectsById(renderHelmChart({ set })).get('Deployment/rethinkdb/rethinkdb-manager').spec.template.metadata.annotations['checksum/config'];
    expect(checksum({})).toMatch(/^[0-9a-f]{64}$/);
    expect(checksum({})).toBe(checksum({}));
    expect(checksum({ 'rethinkdb.readinessGate': false })).not.toBe(checksum({}));
    expect(checksum({ 'manager.config.LOG_LEVEL': 'debug' })).not.toBe(checksum({}));
  });

  test('when rethinkdb.readinessGate is false, then the pods have no readiness gate and the manager is told not to set one', () => {
    const objects = objectsById(renderHelmChart({ set: { 'rethinkdb.readinessGate': false } }));
    expect(diffFromBase(objects)).toEqual({
      'ConfigMap/rethinkdb/rethinkdb-manager': ['.data.READINESS_GATE_ENABLED'],
      'StatefulSet/rethinkdb/rethinkdb': ['.spec.template.spec.readinessGates'],
    });
    expect(loadConfig(managerEnv(objects, 'rethinkdb')).readiness.enabled).toBe(false);
    const gated = objectsById(renderHelmChart());
    expect(gated.get('StatefulSet/rethinkdb/rethinkdb').spec.template.spec.readinessGates).toEqual([{ conditionType: REPLICAS_READY_CONDITION }]);
    expect(loadConfig(managerEnv(gated, 'rethinkdb')).readiness.enabled).toBe(true);
  });

  test.each([
    ['manager.config.READINESS_GATE_ENABLED=false', { 'manager.config.READINESS_GATE_ENABLED': false }, /manager\.config\.READINESS_GATE_ENABLED: the chart sets READINESS_GATE_ENABLED itself \(from .*rethinkdb\.readinessGate/],
    ['manager.config.PORT=9090', { 'manager.config.PORT': 9090 }, /manager\.config\.PORT: the chart sets PORT itself/],
    ['manager.config.MONITOR_HOT_SKEW=2', { 'manager.config.MONITOR_HOT_SKEW': 2 }, /manager\.config\.MONITOR_HOT_SKEW: the chart sets/],
    ['manager.config.LATENCY_FACTOR=2', { 'manager.config.LATENCY_FACTOR': 2 }, /manager\.config\.LATENCY_FACTOR: the chart sets .*latencyTrigger\.\*/],
    ['a misspelt latency trigger setting', { 'latencyTrigger.window': 500 }, /at '\/latencyTrigger': additional properties 'window' not allowed/],
    // values.schema.json: a misspelt key or a value out of its set is refused before any template runs.
    ['a misspelt monitor setting', { 'monitor.hotUtilisation': 0.9 }, /at '\/monitor': additional properties 'hotUtilisation' not allowed/],
    ['a misspelt top-level key', { 'gates.enabled': false }, /additional properties 'gates' not allowed/],
    ['a misspelt hold setting', { 'gate.hold.secretname': 'x' }, /at '\/gate\/hold': additional properties 'secretname' not allowed/],
    ['auth.mode=token', { 'auth.mode': 'token' }, /at '\/auth\/mode': value must be one of 'tokenreview', 'static', 'none'/],
    ['rethinkdb.podAntiAffinity=sometimes', { 'rethinkdb.podAntiAffinity': 'sometimes' }, /at '\/rethinkdb\/podAntiAffinity': value must be one of 'required', 'preferred'/],
    ['webhook.evictionDeadlineSeconds=12', { 'webhook.evictionDeadlineSeconds': 12 }, /at '\/webhook\/evictionDeadlineSeconds': maximum: got 12, want 9/],
    ['a lower-case manager.config key', { 'manager.config.log_level': 'debug' }, /invalid propertyName 'log_level'/],
    ['a manager.config key the manager does not know', { 'manager.config.RETHINKDB_HOSTS': 'x' }, /invalid propertyName 'RETHINKDB_HOSTS'/],
  ])('when %s is given, then helm refuses to render and says which value is wrong', (name, set, message) => {
    expect(() => renderHelmChart({ set })).toThrow(message);
  });

  test('when rethinkdb.existing names a StatefulSet of its own without its pods\' labels or its servers, then helm refuses to render, saying which', () => {
    expect(() => renderHelmChart({ set: { 'rethinkdb.existing.statefulSetName': 'rdb', 'rethinkdb.existing.hosts[0]': 'rdb-0.rdb' } }))
      .toThrow('rethinkdb.existing.podLabels: the labels of the existing StatefulSet\'s pods');
    expect(() => renderHelmChart({ set: { 'rethinkdb.existing.statefulSetName': 'rdb', 'rethinkdb.existing.podLabels.app': 'rdb' } }))
      .toThrow('rethinkdb.existing.hosts: the existing servers\' addresses');
  });

  test('when the schema lists the keys manager.config may hold, then they are exactly the manager\'s configuration keys', () => {
    const schema = JSON.parse(readFileSync(join(helmChartDir, 'values.schema.json'), 'utf8'));
    expect(schema.properties.manager.properties.config.propertyNames.enum).toEqual(CONFIG_KEYS.map((k) => k.env).sort());
  });
});
