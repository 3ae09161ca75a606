// The Kubernetes manifests in deploy/k8s, checked without a cluster: they parse, validate against the
// Kubernetes schemas, render through the kustomization, and hold the properties an operator relies on.

import { readdirSync, readFileSync } from 'node:fs';
import { DIST_DIR, GATE_ENTRY } from '../../scripts/build.js';
import { loadConfig } from '../../src/config.js';
import {
  commandExists, containersOf, findResource, k8sDir, listK8sFiles, podSpecOf, readYamlFile, renderKustomization,
  repoRoot, runKubectlKustomize, runScript, validateManifest,
} from '../helpers/deploy-files.js';

const { kustomization, resources } = renderKustomization();
const defaults = loadConfig({});
const workloads = resources.filter(({ doc }) => ['Deployment', 'StatefulSet'].includes(doc.kind));
const containers = workloads.flatMap(({ doc }) => containersOf(doc).map((c) => [`${doc.kind} ${doc.metadata.name} / ${c.name}`, c, doc]));
const statefulSet = findResource(resources, 'StatefulSet', defaults.kubernetes.statefulSetName);
const manager = findResource(resources, 'Deployment', 'rethinkdb-manager');
const proxy = findResource(resources, 'Deployment', 'rethinkdb-proxy');
// Whether a label selector (matchLabels or a Service's selector) selects a pod template's labels.
const selects = (selector, labels) => Object.entries(selector).every(([k, v]) => labels[k] === v);

describe('deploy/k8s: parsing, schemas and the kustomization', () => {
  test.each(listK8sFiles())('when %s is parsed as Kubernetes does (YAML 1.1), then every document is an object with apiVersion, kind and name', (file) => {
    const docs = readYamlFile(`${k8sDir}/${file}`);
    expect(docs.length).toBeGreaterThan(0);
    for (const doc of docs) expect(doc).toMatchObject({ apiVersion: expect.any(String), kind: expect.any(String), metadata: { name: expect.any(String) } });
  });

  test.each(resources.map(({ file, doc }) => [doc.kind, doc.metadata.name, file, doc]))(
    'when %s %s (%s) is validated against the Kubernetes schema, then it has no error and no unknown field',
    async (kind, name, file, doc) => {
      expect(await validateManifest(doc)).toEqual([]);
    },
  );

  test('when a manifest has a typo or a wrong type, then the validation reports both (the check itself works)', async () => {
    const broken = structuredClone(statefulSet);
    broken.spec.template.spec.containers[0].resources.limts = { cpu: '1' };
    broken.spec.template.spec.containers[0].ports[0].containerPort = 'driver';
    const problems = await validateManifest(broken);
    expect(problems).toEqual(expect.arrayContaining([
      expect.stringContaining('containerPort must be integer'),
      '.spec.template.spec.containers[0].resources.limts: unknown field',
    ]));
  });

  test('when the kustomization is read, then it lists every manifest in the directory exactly once, and only those', () => {
    const onDisk = readdirSync(k8sDir).filter((f) => f !== 'kustomization.yaml').sort();
    expect([...kustomization.resources].sort()).toEqual(onDisk);
    expect(new Set(kustomization.resources).size).toBe(kustomization.resources.length);
  });

  test('when rendered, then every namespaced resource is in the manager\'s default namespace, and no two resources share kind and name', () => {
    expect(kustomization.namespace).toBe(defaults.kubernetes.namespace);
    expect(findResource(resources, 'Namespace', defaults.kubernetes.namespace)).toBeDefined();
    const ids = resources.map(({ doc }) => `${doc.kind}/${doc.metadata.namespace ?? ''}/${doc.metadata.name}`);
    expect(new Set(ids).size).toBe(ids.length);
    for (const { doc } of resources.filter((r) => !['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'ValidatingWebhookConfiguration'].includes(r.doc.kind))) {
      expect(doc.metadata.namespace).toBe(defaults.kubernetes.namespace);
    }
  });

  test('when the eviction webhook is rendered, then it calls the manager\'s Service on its webhook port, for evictions in that namespace only', () => {
    const [hook] = findResource(resources, 'ValidatingWebhookConfiguration', 'rethinkdb-manager-eviction').webhooks;
    const service = findResource(resources, 'Service', 'rethinkdb-manager');
    expect(hook.clientConfig.service).toEqual({ name: service.metadata.name, namespace: defaults.kubernetes.namespace, port: 443, path: '/v1/admission/eviction' });
    expect(service.spec.ports.find((p) => p.port === 443).targetPort).toBe('webhook');
    expect(hook.namespaceSelector).toEqual({ matchLabels: { 'kubernetes.io/metadata.name': defaults.kubernetes.namespace } });
    expect(hook.rules).toEqual([{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods/eviction'], scope: 'Namespaced' }]);
    const config = findResource(resources, 'ConfigMap', 'rethinkdb-manager').data;
    const manager = findResource(resources, 'Deployment', 'rethinkdb-manager').spec.template.spec;
    expect(manager.containers[0].ports).toContainEqual({ name: 'webhook', containerPort: Number(config.WEBHOOK_PORT) });
    const mount = manager.containers[0].volumeMounts.find((v) => v.name === 'webhook-tls');
    expect(config.WEBHOOK_TLS_CERT_FILE).toBe(`${mount.mountPath}/tls.crt`);
    expect(manager.volumes.find((v) => v.name === 'webhook-tls').secret).toEqual({ secretName: 'rethinkdb-manager-webhook-tls', optional: true });
  });

  (commandExists('kubectl') ? test : test.skip)('when kubectl is installed, then `kubectl kustomize` renders the same resources as our renderer', () => {
    const byId = (docs) => Object.fromEntries(docs.map((doc) => [`${doc.kind}/${doc.metadata.name}`, doc]));
    expect(byId(runKubectlKustomize())).toEqual(byId(resources.map(({ doc }) => doc)));
  });
});

describe('deploy/k8s: containers', () => {
  test.each(containers)('when %s is deployed, then its image is pinned by a precise tag or a digest, never latest', (name, container) => {
    const { image } = container;
    const [, tag] = /:([^/@]+)(@sha256:[0-9a-f]{64})?$/.exec(image) ?? [];
    expect(tag).toBeDefined();
    expect(tag).not.toMatch(/latest/);
    expect(tag).toMatch(/^\d+\.\d+\.\d+/);
  });

  test('when the manager image is tagged, then the tag is the package version', () => {
    const pkg = JSON.parse(readFileSync(`${repoRoot}/package.json`, 'utf8'));
    expect(containersOf(manager)[0].image).toBe(`rethinkdb-k8s-manager:${pkg.version}`);
  });

  test.each(containers)('when %s runs, then it runs as a non-root user without privilege escalation', (name, container, workload) => {
    const pod = podSpecOf(workload).securityContext ?? {};
    const own = container.securityContext ?? {};
    expect(own.runAsNonRoot ?? pod.runAsNonRoot).toBe(true);
    expect(own.runAsUser ?? pod.runAsUser).toBeGreaterThan(0);
    expect(own.allowPrivilegeEscalation).toBe(false);
    expect(own.capabilities?.drop).toContain('ALL');
  });

  test.each(containers)('when %s is scheduled, then it has CPU and memory requests and limits (the monitor\'s utilization rule needs CPU limits)', (name, container) => {
    expect(container.resources).toMatchObject({
      requests: { cpu: expect.anything(), memory: expect.anything() },
      limits: { cpu: expect.anything(), memory: expect.anything() },
    });
  });

  test.each(containers)('when %s runs, then it has readiness and liveness probes', (name, container) => {
    expect(container.readinessProbe).toBeDefined();
    expect(container.livenessProbe).toBeDefined();
  });

  test.each(workloads.map(({ doc }) => [doc.kind, doc.metadata.name, doc]))('when %s %s mounts volumes, then every mount names a volume of the pod or a claim template', (kind, name, doc) => {
    const volumes = new Set([...(podSpecOf(doc).volumes ?? []), ...(doc.spec.volumeClaimTemplates ?? []).map((t) => t.metadata)].map((v) => v.name));
    for (const container of containersOf(doc)) {
      for (const mount of container.volumeMounts ?? []) expect(volumes).toContain(mount.name);
    }
  });
});

describe('deploy/k8s: the RethinkDB StatefulSet', () => {
  const spec = podSpecOf(statefulSet);
  const [rethinkdb] = spec.containers;
  const headless = findResource(resources, 'Service', statefulSet.spec.serviceName);

  test('when the manager selects RethinkDB pods with its default selector, then it selects the StatefulSet\'s pods', () => {
    const [key, value] = defaults.kubernetes.podLabelSelector.split('=');
    expect(statefulSet.spec.template.metadata.labels[key]).toBe(value);
    expect(statefulSet.spec.selector.matchLabels).toEqual({ [key]: value });
  });

  test('when peers join, then they use a headless Service that publishes not-ready pods', () => {
    expect(headless.spec).toMatchObject({ clusterIP: 'None', publishNotReadyAddresses: true, selector: statefulSet.spec.selector.matchLabels });
    expect(headless.spec.ports.map((p) => p.port)).toContain(29015);
  });

  test('when applications connect, then rethinkdb-client is a ClusterIP Service over the ready proxies, not over the servers', () => {
    const client = findResource(resources, 'Service', 'rethinkdb-client');
    expect(client.spec.clusterIP).toBeUndefined();
    expect(client.spec.publishNotReadyAddresses).toBeUndefined();
    expect(selects(client.spec.selector, proxy.spec.template.metadata.labels)).toBe(true);
    expect(selects(client.spec.selector, statefulSet.spec.template.metadata.labels)).toBe(false);
    const [port] = client.spec.ports;
    expect(port.port).toBe(28015);
    // Through the query gate beside each proxy, which relays to the proxy's driver port in the same pod.
    const gate = containersOf(proxy).find((c) => c.name === 'query-gate');
    expect(gate.ports).toContainEqual({ name: port.targetPort, containerPort: 28017 });
    const env = Object.fromEntries(gate.env.map((e) => [e.name, e.value]));
    expect(env).toMatchObject({ GATE_PORT: '28017', GATE_UPSTREAM: '127.0.0.1:28015' });
    expect(containersOf(proxy)[0].ports).toContainEqual({ name: 'driver', containerPort: 28015 });
    expect(gate.image).toBe(containersOf(findResource(resources, 'Deployment', 'rethinkdb-manager'))[0].image);
    expect(gate.command).toEqual(['node', `${DIST_DIR}/${GATE_ENTRY}`]);
  });

  test('when pods are disrupted, then a PodDisruptionBudget allows one at a time', () => {
    const pdb = findResource(resources, 'PodDisruptionBudget', 'rethinkdb');
    expect(pdb.spec).toEqual({ maxUnavailable: 1, selector: statefulSet.spec.selector });
  });

  test('when the pods run, then they use their own ServiceAccount without an automatic API token, and use the pod network', () => {
    expect(spec.serviceAccountName).toBe('rethinkdb');
    expect(spec.automountServiceAccountToken).toBe(false);
    expect(findResource(resources, 'ServiceAccount', 'rethinkdb').automountServiceAccountToken).toBe(false);
    expect(spec.hostNetwork).toBeUndefined();
    expect(rethinkdb.ports.every((p) => p.hostPort === undefined)).toBe(true);
  });

  test('when the hooks authenticate, then a projected token for audience rethinkdb-manager (600 s) is mounted where MANAGER_TOKEN_FILE points', () => {
    const tokenFile = rethinkdb.env.find((e) => e.name === 'MANAGER_TOKEN_FILE').value;
    expect(tokenFile).toBe('/var/run/secrets/rethinkdb-manager/token');
    const mount = rethinkdb.volumeMounts.find((m) => tokenFile.startsWith(`${m.mountPath}/`));
    expect(mount.readOnly).toBe(true);
    const volume = spec.volumes.find((v) => v.name === mount.name);
    expect(volume.projected.sources).toEqual([{
      serviceAccountToken: { audience: 'rethinkdb-manager', expirationSeconds: 600, path: tokenFile.slice(mount.mountPath.length + 1) },
    }]);
  });

  test('when the hooks call the manager, then MANAGER_URL is the manager Service and port', () => {
    const managerService = findResource(resources, 'Service', 'rethinkdb-manager');
    const url = new URL(rethinkdb.env.find((e) => e.name === 'MANAGER_URL').value);
    expect(url.hostname).toBe(managerService.metadata.name);
    expect(Number(url.port)).toBe(managerService.spec.ports[0].port);
    expect(managerService.spec.selector).toEqual(manager.spec.selector.matchLabels);
  });

  test('when the hook scripts need the pod name, then POD_NAME comes from the downward API', () => {
    expect(rethinkdb.env.find((e) => e.name === 'POD_NAME')).toEqual({ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } });
  });
});

describe('deploy/k8s: RethinkDB pods on separate nodes', () => {
  test('when the StatefulSet is scheduled, then no two of its pods may share a node (the PDB\'s majority argument needs one server per node)', () => {
    const statefulSet = findResource(resources, 'StatefulSet', 'rethinkdb');
    const { affinity } = podSpecOf(statefulSet);
    expect(affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution).toEqual([
      { topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: statefulSet.spec.selector.matchLabels } },
    ]);
  });
});

describe('deploy/k8s: the RethinkDB proxies', () => {
  const spec = podSpecOf(proxy);
  const [container] = spec.containers;
  const headless = findResource(resources, 'Service', statefulSet.spec.serviceName);
  const [shell, flag, script] = container.command;
  // The servers' pod DNS names through the headless Service, as the StatefulSet makes them (rethinkdb-0.rethinkdb).
  const serverNames = Array.from({ length: statefulSet.spec.replicas }, (_, i) => `${statefulSet.metadata.name}-${i}.${headless.metadata.name}`);

  // The start script as the container runs it, with getent resolving only `resolvable` and stand-ins for rethinkdb and sleep.
  function start({ resolvable = serverNames, password = 's3cret' } = {}) {
    const env = Object.fromEntries(container.env.filter((e) => e.value !== undefined).map((e) => [e.name, e.value]));
    const getent = `case "$2" in ${resolvable.length ? resolvable.join('|') : '__none__'}) return 0;; *) return 2;; esac`;
    const result = runScript(`getent() { ${getent}; }\n${script}`, {
      env: { ...env, POD_IP: '198.18.1.7', RETHINKDB_PASSWORD: password }, fakes: { rethinkdb: {}, sleep: {} },
    });
    const call = result.calls.find((c) => c.command === 'rethinkdb');
    const option = (name) => call.args[call.args.indexOf(name) + 1];
    const joins = call ? call.args.flatMap((a, i) => (call.args[i - 1] === '--join' ? [a] : [])) : [];
    return { result, call, option, joins };
  }

  test('when deployed, then two replicas of the servers\' image run, preferably on different nodes, one at a time replaced', () => {
    expect(proxy.spec.replicas).toBe(2);
    expect(proxy.spec.strategy.rollingUpdate).toEqual({ maxUnavailable: 0, maxSurge: 1 });
    expect(proxy.spec.selector.matchLabels).toEqual({ app: 'rethinkdb-proxy' });
    expect(container.image).toBe(containersOf(statefulSet)[0].image);
    const [term] = spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
    expect(term.podAffinityTerm).toEqual({ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: proxy.spec.selector.matchLabels } });
  });

  test('when the pods are disrupted, then their own PodDisruptionBudget keeps one, and it selects the proxies only', () => {
    const pdb = findResource(resources, 'PodDisruptionBudget', 'rethinkdb-proxy');
    expect(pdb.spec.minAvailable).toBe(1);
    expect(selects(pdb.spec.selector.matchLabels, proxy.spec.template.metadata.labels)).toBe(true);
    expect(selects(pdb.spec.selector.matchLabels, statefulSet.spec.template.metadata.labels)).toBe(false);
    const serverPdb = findResource(resources, 'PodDisruptionBudget', 'rethinkdb');
    expect(selects(serverPdb.spec.selector.matchLabels, proxy.spec.template.metadata.labels)).toBe(false);
  });

  test('when probed, then readiness, liveness and startup are TCP probes on the container\'s port named driver (28015)', () => {
    expect(container.ports).toEqual([{ name: 'driver', containerPort: 28015 }, { name: 'cluster', containerPort: 29015 }]);
    for (const probe of ['startupProbe', 'readinessProbe', 'livenessProbe']) expect([probe, container[probe].tcpSocket]).toEqual([probe, { port: 'driver' }]);
    // The wait for a resolvable server (up to 120 s) fits in the startup probe's window.
    expect(container.startupProbe.periodSeconds * container.startupProbe.failureThreshold).toBeGreaterThan(120);
  });

  test('when it runs, then it is secured as the servers are, carries no token and writes only to its emptyDir', () => {
    const servers = podSpecOf(statefulSet);
    expect(spec.securityContext).toEqual(servers.securityContext);
    expect(container.securityContext).toEqual(servers.containers[0].securityContext);
    expect(spec.automountServiceAccountToken).toBe(false);
    // The pod's other volume is the gate's hold token (a Secret, read-only, in the gate's container only).
    expect(spec.volumes).toEqual([{ name: 'tmp', emptyDir: {} }, { name: 'gate-hold', secret: { secretName: 'rethinkdb-gate-hold', optional: true } }]);
    expect(container.volumeMounts).toEqual([{ name: 'tmp', mountPath: '/tmp' }]);
    expect(spec.containers.find((c) => c.name === 'query-gate').volumeMounts).toEqual([{ name: 'gate-hold', mountPath: '/var/run/secrets/rethinkdb-gate-hold', readOnly: true }]);
  });

  test('when it starts, then it runs `rethinkdb proxy` on all interfaces without the web UI or a data directory, joining every server by its headless DNS name at the cluster port', () => {
    expect([shell, flag]).toEqual(['/bin/sh', '-c']);
    const { result, call, option, joins } = start();
    expect(result.exitCode).toBe(0);
    expect(call.args[0]).toBe('proxy');
    expect(option('--bind')).toBe('all');
    expect(call.args).toContain('--no-http-admin');
    expect(call.args).not.toContain('--directory');
    expect(option('--canonical-address')).toBe('198.18.1.7');
    expect(option('--log-file')).toMatch(new RegExp(`^${container.volumeMounts[0].mountPath}/`));
    const clusterPort = headless.spec.ports.find((p) => p.name === 'cluster');
    expect(containersOf(statefulSet)[0].ports).toContainEqual({ name: clusterPort.targetPort, containerPort: clusterPort.port });
    expect(joins).toEqual(serverNames.map((name) => `${name}:${clusterPort.port}`));
  });

  test('when only some servers resolve, then it joins those only (RethinkDB exits on an unresolvable --join)', () => {
    expect(start({ resolvable: [serverNames[1]] }).joins).toEqual([`${serverNames[1]}:29015`]);
  });

  test('when no server resolves, then it gives up with a message and never starts a proxy with no --join', () => {
    const { result, call } = start({ resolvable: [] });
    expect(result.exitCode).toBe(1);
    expect(call).toBeUndefined();
    expect(result.stderr).toContain('resolves after 120 s; restarting');
  });

  test('when the cluster has an admin password, then the proxy joins with --initial-password auto, and without one it passes none (a cluster without a password refuses auto)', () => {
    expect(start().option('--initial-password')).toBe('auto');
    expect(start({ password: '' }).call.args).not.toContain('--initial-password');
    const secret = container.env.find((e) => e.name === 'RETHINKDB_PASSWORD').valueFrom.secretKeyRef;
    expect(secret).toEqual(containersOf(statefulSet)[0].env.find((e) => e.name === 'RETHINKDB_PASSWORD').valueFrom.secretKeyRef);
  });
});

describe('deploy/k8s: the manager', () => {
  const spec = podSpecOf(manager);
  const [container] = spec.containers;

  test('when it runs, then two replicas elect a leader, on different nodes where there are several, and an update or a drain keeps one', () => {
    expect(manager.spec.replicas).toBe(2);
    expect(manager.spec.strategy).toEqual({ type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } });
    const [term] = spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution;
    expect(term.podAffinityTerm).toEqual({ topologyKey: 'kubernetes.io/hostname', labelSelector: { matchLabels: manager.spec.selector.matchLabels } });
    const pdb = findResource(resources, 'PodDisruptionBudget', 'rethinkdb-manager');
    expect(pdb.spec).toEqual({ minAvailable: 1, selector: { matchLabels: manager.spec.selector.matchLabels } });
    // The Lease identity and the address the followers relay to, from the downward API.
    expect(container.env.filter((e) => ['POD_NAME', 'POD_IP'].includes(e.name))).toEqual([
      { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
      { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
    ]);
    const config = loadConfig({ ...findResource(resources, 'ConfigMap', 'rethinkdb-manager').data, KUBERNETES_SERVICE_HOST: '198.19.192.1', POD_IP: '198.18.0.7' });
    expect(config.leaderElection).toMatchObject({ active: true, leaseName: 'rethinkdb-manager', advertiseHost: '198.18.0.7' });
  });

  test('when it runs, then it uses its ServiceAccount, a read-only root filesystem, and /livez and /readyz probes', () => {
    expect(spec.serviceAccountName).toBe('rethinkdb-manager');
    expect(findResource(resources, 'ServiceAccount', 'rethinkdb-manager')).toBeDefined();
    expect(container.securityContext.readOnlyRootFilesystem).toBe(true);
    expect(container.livenessProbe.httpGet.path).toBe('/livez');
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
  });

  test('when it is configured, then config comes from the ConfigMap and the password from a Secret', () => {
    expect(container.envFrom).toEqual([{ configMapRef: { name: 'rethinkdb-manager' } }]);
    expect(container.env.find((e) => e.name === 'RETHINKDB_PASSWORD').valueFrom.secretKeyRef).toEqual({ name: 'rethinkdb-admin', key: 'password' });
  });

  test('when it is stopped, then the grace period outlasts its own SHUTDOWN_GRACE_SECONDS', () => {
    const config = loadConfig({ ...findResource(resources, 'ConfigMap', 'rethinkdb-manager').data });
    expect(spec.terminationGracePeriodSeconds).toBeGreaterThan(config.deadlines.shutdownGraceSeconds);
  });
});

// A small evaluator of NetworkPolicy rules, for the cases the shipped policy meets: a peer is a pod (its labels, its
// namespace and that namespace's labels) or something outside every pod (the API server, a node); a named port is the
// destination pod's container port of that name.
function peerMatches(peers, peer, policyNamespace) {
  if (!peers || peers.length === 0) return true;
  if (peer.external) return false;
  const labelsMatch = (selector, labels) => !selector.matchExpressions && selects(selector.matchLabels ?? {}, labels);
  return peers.some((p) => !p.ipBlock
    && (p.podSelector ? labelsMatch(p.podSelector, peer.podLabels) : true)
    && (p.namespaceSelector ? labelsMatch(p.namespaceSelector, peer.namespaceLabels) : peer.namespace === policyNamespace));
}

function portMatches(ports, { port, protocol = 'TCP', podPorts }) {
  if (!ports || ports.length === 0) return true;
  return ports.some((p) => (p.protocol ?? 'TCP') === protocol
    && (typeof p.port === 'string' ? podPorts.some((c) => c.name === p.port && c.containerPort === port) : p.port === port));
}

// Whether the policy lets `peer` reach `port` on a selected pod (ingress), or a selected pod reach `port` on `peer`
// (egress; podPorts: the peer's container ports).
function admits(policy, direction, { peer, port, protocol, podPorts = [] }) {
  const rules = policy.spec[direction === 'ingress' ? 'ingress' : 'egress'] ?? [];
  return rules.some((rule) => peerMatches(direction === 'ingress' ? rule.from : rule.to, peer, policy.metadata.namespace)
    && portMatches(rule.ports, { port, protocol, podPorts }));
}

describe('deploy/k8s: the manager\'s NetworkPolicy', () => {
  const policy = findResource(resources, 'NetworkPolicy', 'rethinkdb-manager');
  const namespace = defaults.kubernetes.namespace;
  const namespaceLabels = (name) => ({ 'kubernetes.io/metadata.name': name });
  const managerPorts = containersOf(manager)[0].ports;
  const rethinkdbPorts = containersOf(statefulSet).find((c) => c.name === 'rethinkdb').ports;
  const managerPod = { podLabels: manager.spec.template.metadata.labels, namespace, namespaceLabels: namespaceLabels(namespace) };
  const rethinkdbPod = { podLabels: statefulSet.spec.template.metadata.labels, namespace, namespaceLabels: namespaceLabels(namespace) };
  const service = findResource(resources, 'Service', 'rethinkdb-manager');
  // The container port a Service port of the manager's Service leads to.
  const managerPortBehind = (servicePort) => {
    const { targetPort } = service.spec.ports.find((p) => p.port === servicePort || p.name === servicePort);
    return typeof targetPort === 'number' ? targetPort : managerPorts.find((c) => c.name === targetPort).containerPort;
  };
  const config = findResource(resources, 'ConfigMap', 'rethinkdb-manager').data;

  test('when rendered, then it selects exactly the manager\'s pods, and restricts both directions', () => {
    expect(policy.spec.podSelector).toEqual(manager.spec.selector);
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
  });

  test('when it names a port, then the pods it concerns have a container port of that name', () => {
    const named = (rules) => rules.flatMap((r) => (r.ports ?? []).map((p) => p.port)).filter((p) => typeof p === 'string');
    for (const name of named(policy.spec.ingress)) expect(managerPorts.map((c) => c.name)).toContain(name);
    const toRethinkDb = policy.spec.egress.filter((r) => r.to?.some((p) => p.podSelector?.matchLabels?.app === 'rethinkdb'));
    for (const name of named(toRethinkDb)) expect(rethinkdbPorts.map((c) => c.name)).toContain(name);
  });

  test('when a RethinkDB pod calls its hooks at MANAGER_URL, then the policy admits it, and only on the HTTP port', () => {
    const env = containersOf(statefulSet).find((c) => c.name === 'rethinkdb').env.find((e) => e.name === 'MANAGER_URL').value;
    const url = new URL(env);
    expect(url.hostname).toBe(service.metadata.name);
    const port = managerPortBehind(Number(url.port));
    expect(port).toBe(Number(config.PORT));
    expect(admits(policy, 'ingress', { peer: rethinkdbPod, port, podPorts: managerPorts })).toBe(true);
    expect(admits(policy, 'ingress', { peer: rethinkdbPod, port: 9999, podPorts: managerPorts })).toBe(false);
  });

  test('when the API server calls the eviction webhook through the Service, then the policy admits it from outside any pod', () => {
    const [hook] = findResource(resources, 'ValidatingWebhookConfiguration', 'rethinkdb-manager-eviction').webhooks;
    const port = managerPortBehind(hook.clientConfig.service.port);
    expect(port).toBe(Number(config.WEBHOOK_PORT));
    expect(admits(policy, 'ingress', { peer: { external: true }, port, podPorts: managerPorts })).toBe(true);
    expect(admits(policy, 'ingress', { peer: { external: true }, port: Number(config.PORT), podPorts: managerPorts })).toBe(false);
  });

  test('when Prometheus scrapes through the ServiceMonitor\'s port, then the policy admits it from the monitoring namespace, and not from another', () => {
    const [monitor] = readYamlFile(`${repoRoot}/deploy/monitoring/servicemonitor.yaml`);
    const port = managerPortBehind(monitor.spec.endpoints[0].port);
    const prometheus = (ns) => ({ podLabels: { app: 'prometheus' }, namespace: ns, namespaceLabels: namespaceLabels(ns) });
    expect(admits(policy, 'ingress', { peer: prometheus('monitoring'), port, podPorts: managerPorts })).toBe(true);
    expect(admits(policy, 'ingress', { peer: prometheus('default'), port, podPorts: managerPorts })).toBe(false);
  });

  test('when a follower relays to the leader, then both directions admit the HTTP and webhook ports between manager pods', () => {
    for (const port of [Number(config.PORT), Number(config.WEBHOOK_PORT)]) {
      expect(admits(policy, 'ingress', { peer: managerPod, port, podPorts: managerPorts })).toBe(true);
      expect(admits(policy, 'egress', { peer: managerPod, port, podPorts: managerPorts })).toBe(true);
    }
  });

  // The workload whose pods a RETHINKDB_HOST seed reaches, and the container port it lands on: a Service's name (its
  // selector, its port's target) or a StatefulSet pod's DNS name through its headless Service (<sts>-<i>.<service>).
  function podsBehindSeed({ host, port }) {
    const service = resources.find(({ doc }) => doc.kind === 'Service' && doc.metadata.name === host)?.doc;
    const workloads = resources.map(({ doc }) => doc).filter((doc) => ['Deployment', 'StatefulSet'].includes(doc.kind));
    if (service) {
      const workload = workloads.find((w) => selects(service.spec.selector, w.spec.template.metadata.labels));
      const { targetPort } = service.spec.ports.find((p) => p.port === port);
      return { workload, containerPort: containersOf(workload)[0].ports.find((c) => c.name === targetPort || c.containerPort === targetPort) };
    }
    const [, name, ordinal, serviceName] = /^(.+)-(\d+)\.([^.]+)$/.exec(host) ?? [];
    const workload = workloads.find((w) => w.kind === 'StatefulSet' && w.metadata.name === name && w.spec.serviceName === serviceName);
    if (!workload || Number(ordinal) >= workload.spec.replicas) throw new Error(`RETHINKDB_HOST names ${host}, which no pod of deploy/k8s answers to`);
    return { workload, containerPort: containersOf(workload)[0].ports.find((c) => c.containerPort === port) };
  }

  test('when the manager connects to its RETHINKDB_HOST seeds, then each is a server pod, and the egress admits its driver port, not its cluster port', () => {
    const { seeds } = loadConfig({ ...config, AUTH_MODE: 'none' }).rethinkdb;
    expect(seeds.length).toBeGreaterThan(0);
    for (const seed of seeds) {
      const { workload, containerPort } = podsBehindSeed(seed);
      // The manager goes to the servers themselves (manager-configmap.yaml says why), never through the proxies.
      expect([seed.host, workload.metadata.name]).toEqual([seed.host, statefulSet.metadata.name]);
      expect([seed.host, containerPort?.name]).toEqual([seed.host, 'driver']);
      expect(admits(policy, 'egress', { peer: rethinkdbPod, port: containerPort.containerPort, podPorts: rethinkdbPorts })).toBe(true);
    }
    const cluster = rethinkdbPorts.find((c) => c.name === 'cluster').containerPort;
    expect(admits(policy, 'egress', { peer: rethinkdbPod, port: cluster, podPorts: rethinkdbPorts })).toBe(false);
  });

  test('when the manager is configured, then the egress does not admit the proxies, which it does not use', () => {
    const proxyPod = { podLabels: proxy.spec.template.metadata.labels, namespace, namespaceLabels: namespaceLabels(namespace) };
    const proxyPorts = containersOf(proxy)[0].ports;
    for (const { containerPort } of proxyPorts) expect(admits(policy, 'egress', { peer: proxyPod, port: containerPort, podPorts: proxyPorts })).toBe(false);
  });

  test('when a seed names the client Service or a pod that does not exist, then the seed check refuses it (the check itself works)', () => {
    expect(podsBehindSeed({ host: 'rethinkdb-client', port: 28015 }).workload.metadata.name).toBe('rethinkdb-proxy');
    expect(() => podsBehindSeed({ host: `rethinkdb-${statefulSet.spec.replicas}.rethinkdb`, port: 28015 })).toThrow(/no pod of deploy\/k8s/);
    expect(() => podsBehindSeed({ host: 'rethinkdb-0.elsewhere', port: 28015 })).toThrow(/no pod of deploy\/k8s/);
  });

  test('when the manager resolves names and calls the Kubernetes API, then the egress admits DNS (UDP and TCP) and the API server\'s ports', () => {
    const dns = { podLabels: { 'k8s-app': 'kube-dns' }, namespace: 'kube-system', namespaceLabels: namespaceLabels('kube-system') };
    for (const protocol of ['UDP', 'TCP']) expect(admits(policy, 'egress', { peer: dns, port: 53, protocol })).toBe(true);
    for (const port of [443, 6443]) expect(admits(policy, 'egress', { peer: { external: true }, port })).toBe(true);
    expect(admits(policy, 'egress', { peer: { external: true }, port: 28015 })).toBe(false);
  });

  test('when a port is renamed or a pod comes from another namespace, then the evaluator refuses it (the check itself works)', () => {
    const renamed = managerPorts.map((c) => (c.name === 'http' ? { ...c, name: 'api' } : c));
    expect(admits(policy, 'ingress', { peer: rethinkdbPod, port: Number(config.PORT), podPorts: renamed })).toBe(false);
    const elsewhere = { ...rethinkdbPod, namespace: 'other', namespaceLabels: namespaceLabels('other') };
    expect(admits(policy, 'ingress', { peer: elsewhere, port: Number(config.PORT), podPorts: managerPorts })).toBe(false);
  });
});
