// Reads the deployment files (Kubernetes manifests, Compose file, Dockerfiles) and checks them without a
// cluster: YAML as Kubernetes parses it, schema validation with unknown-field detection, a kustomization
// renderer for the subset we use, the Helm chart rendered by the pinned helm, and a runner for the manifests'
// shell scripts with stand-in commands.

import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

export const repoRoot = fileURLToPath(new URL('../../', import.meta.url));
export const k8sDir = join(repoRoot, 'deploy/k8s');
export const helmChartDir = join(repoRoot, 'deploy/helm/rethinkdb-k8s-manager');
export const HELM_BIN = process.env.HELM_BIN ?? join(repoRoot, 'test/helm/bin/helm');

// A Dockerfile's instructions: continuation lines joined, comments and blank lines dropped.
export function dockerInstructions(text) {
  return text.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
}

// The instructions of a Dockerfile's final stage: from its last FROM on.
export function finalStageOf(instructions) {
  return instructions.slice(instructions.findLastIndex((l) => /^FROM\s/i.test(l)));
}

// The key=value (or key="value", with JSON escapes) pairs of every `instruction` (ENV, LABEL) of a Dockerfile's final
// stage.
export function finalStagePairs(text, instruction) {
  const pairs = {};
  const start = new RegExp(`^${instruction}\\s+`, 'i');
  for (const line of finalStageOf(dockerInstructions(text)).filter((l) => start.test(l))) {
    for (const [, key, value] of line.replace(start, '').matchAll(/([\w.-]+)=("(?:[^"\\]|\\.)*"|\S*)/g)) {
      pairs[key] = value.startsWith('"') ? JSON.parse(value) : value;
    }
  }
  return pairs;
}

// The environment a Dockerfile's final stage sets.
export const imageEnv = (text) => finalStagePairs(text, 'ENV');

// What the image runs: its final stage's last CMD, in exec form (a JSON array), e.g. ["node", "dist/server.mjs"].
export function imageCommand(text) {
  const cmd = finalStageOf(dockerInstructions(text)).filter((l) => /^CMD\s/i.test(l)).at(-1);
  return cmd ? JSON.parse(cmd.replace(/^CMD\s+/i, '')) : null;
}

// Kubernetes reads YAML 1.1 (sigs.k8s.io/yaml): `on`, `yes` and `no` are booleans there, so parse the same way.
export function parseYamlDocuments(text, source) {
  const docs = parseAllDocuments(text, { version: '1.1', prettyErrors: true });
  for (const doc of docs) {
    if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors.map((e) => e.message).join('; ')}`);
  }
  return docs.map((doc) => doc.toJS()).filter((value) => value !== null);
}

export function readYamlFile(path) {
  return parseYamlDocuments(readFileSync(path, 'utf8'), path);
}

export function listK8sFiles() {
  return readdirSync(k8sDir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort();
}

// What `kubectl kustomize` does for the fields our kustomization uses (resources, namespace); anything else
// fails loudly so that a new feature is not silently ignored.
const SUPPORTED_KUSTOMIZATION_FIELDS = new Set(['apiVersion', 'kind', 'namespace', 'resources']);
export const CLUSTER_SCOPED_KINDS = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass', 'ValidatingWebhookConfiguration']);

export function renderKustomization(dir = k8sDir) {
  const [kustomization] = readYamlFile(join(dir, 'kustomization.yaml'));
  const unsupported = Object.keys(kustomization).filter((k) => !SUPPORTED_KUSTOMIZATION_FIELDS.has(k));
  if (unsupported.length > 0) throw new Error(`renderKustomization does not implement: ${unsupported.join(', ')}`);
  const resources = kustomization.resources.flatMap((file) => readYamlFile(join(dir, file)).map((doc) => ({ file, doc })));
  for (const { doc } of resources) {
    if (kustomization.namespace && !CLUSTER_SCOPED_KINDS.has(doc.kind)) doc.metadata.namespace = kustomization.namespace;
    if (kustomization.namespace && doc.kind === 'Namespace') doc.metadata.name = kustomization.namespace;
  }
  return { kustomization, resources };
}

export function findResource(resources, kind, name) {
  const found = resources.find(({ doc }) => doc.kind === kind && doc.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in deploy/k8s`);
  return found.doc;
}

// Every container of a workload (Deployment, StatefulSet), init containers included.
export function podSpecOf(doc) {
  return doc.spec.template.spec;
}

export function containersOf(doc) {
  const spec = podSpecOf(doc);
  return [...(spec.initContainers ?? []), ...spec.containers];
}

// Validates a manifest against the Kubernetes schema of its apiVersion/kind (kubernetes-models, offline), and
// reports fields the schema does not know: the compiled validators never reject extra properties, so every
// property read during validation is recorded and the ones never read are unknown (a typo like `limts`).
export async function validateManifest(doc) {
  const model = await modelFor(doc.apiVersion, doc.kind);
  const problems = [];
  try {
    new model(doc).validate();
  } catch (err) {
    problems.push(err.message);
  }
  const reads = new WeakMap();
  try {
    model.prototype.validate.call(trackReads(doc, reads));
  } catch {
    // Already reported above.
  }
  return [...problems, ...unknownFields(doc, reads, '')];
}

// Kinds of API groups that Kubernetes itself does not serve come from their own kubernetes-models package.
const MODEL_PACKAGES = { 'monitoring.coreos.com': '@kubernetes-models/prometheus-operator' };

async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : [null, apiVersion];
  const models = MODEL_PACKAGES[group] ?? 'kubernetes-models';
  const path = group ? `${models}/${group}/${version}/${kind}` : `${models}/${version}/${kind}`;
  const mod = await import(path);
  if (!mod[kind]) throw new Error(`no schema for ${apiVersion} ${kind}`);
  return mod[kind];
}

function trackReads(value, reads) {
  if (value === null || typeof value !== 'object') return value;
  if (!reads.has(value)) reads.set(value, new Set());
  return new Proxy(value, {
    get(target, key) {
      reads.get(target).add(key);
      return trackReads(Reflect.get(target, key), reads);
    },
  });
}

function unknownFields(value, reads, path) {
  if (value === null || typeof value !== 'object' || !reads.has(value)) return [];
  if (Array.isArray(value)) return value.flatMap((item, i) => unknownFields(item, reads, `${path}[${i}]`));
  const read = reads.get(value);
  return Object.entries(value).flatMap(([key, child]) => (read.has(key)
    ? unknownFields(child, reads, `${path}.${key}`)
    : [`${path}.${key}: unknown field`]));
}

// Runs a manifest's `sh -c` script with stand-ins for the commands it calls, as the container's /bin/sh would.
// Each stand-in appends its arguments (separated by \\x1f, one call per line) to a log and exits with the given code.
export function runScript(script, { env = {}, fakes = {}, timeoutMs = 10000 } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'deploy-script-'));
  const logFile = join(dir, 'calls.log');
  writeFileSync(logFile, '');
  // A fake answers { stdout, exitCode } (or runs `shell`, with its arguments in "$@", then exits), or with `sequence`
  // its Nth call answers the Nth entry (the last one from then on).
  for (const [name, { exitCode = 0, stdout = '', sequence = [{ exitCode, stdout }] }] of Object.entries(fakes)) {
    const fake = join(dir, name);
    const counter = join(dir, `${name}.calls`);
    writeFileSync(counter, '0');
    const answer = ({ stdout: out = '', exitCode: code = 0, shell = '' }) => `${shell ? `${shell}; ` : ''}${out ? `printf '%s\\n' ${shellQuote(out)}; ` : ''}exit ${code}`;
    writeFileSync(fake, [
      '#!/bin/sh',
      `{ printf '%s' ${shellQuote(name)}; for a in "$@"; do printf '\\037%s' "$a"; done; printf '\\n'; } >> ${shellQuote(logFile)}`,
      `n=$(cat ${shellQuote(counter)}); echo $((n + 1)) > ${shellQuote(counter)}`,
      'case $n in',
      ...sequence.slice(0, -1).map((entry, i) => `  ${i}) ${answer(entry)} ;;`),
      `  *) ${answer(sequence.at(-1))} ;;`,
      'esac',
      '',
    ].join('\n'));
    chmodSync(fake, 0o755);
  }
  const result = spawnSync('/bin/sh', ['-c', script], {
    env: { PATH: `${dir}:/usr/bin:/bin`, ...env }, encoding: 'utf8', timeout: timeoutMs,
  });
  const calls = readFileSync(logFile, 'utf8').split('\n').filter(Boolean).map((line) => {
    const [command, ...args] = line.split('\x1f');
    return { command, args };
  });
  rmSync(dir, { recursive: true, force: true });
  return { exitCode: result.status, stdout: result.stdout, stderr: result.stderr, calls };
}

function shellQuote(text) {
  return `'${String(text).replaceAll("'", "'\\''")}'`;
}

// The method, URL and headers of one curl call, from its arguments (the options our hooks use).
export function parseCurlArgs(args) {
  const withValue = new Set(['-X', '--request', '-H', '--header', '--max-time', '-m', '--connect-timeout', '-d', '--data', '-o', '--output', '-w', '--write-out']);
  const call = { method: 'GET', headers: {}, options: {}, urls: [] };
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i];
    if (withValue.has(arg)) {
      const value = args[i += 1];
      if (arg === '-X' || arg === '--request') call.method = value;
      else if (arg === '-H' || arg === '--header') {
        const at = value.indexOf(':');
        call.headers[value.slice(0, at).trim().toLowerCase()] = value.slice(at + 1).trim();
      } else call.options[arg] = value;
    } else if (arg.startsWith('-')) call.options[arg] = true;
    else call.urls.push(arg);
  }
  return call;
}

export function commandExists(name) {
  return spawnSync('/bin/sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).status === 0;
}

export function runKubectlKustomize(dir = k8sDir) {
  return parseYamlDocuments(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', timeout: 60000 }), 'kubectl kustomize');
}

// Runs the helm that test/helm/build-helm.sh builds (npm test's pretest), with no user config or cache: a chart
// test never reads ~/.config/helm or a repository. Returns { status, stdout, stderr }; fails if helm is missing.
export function runHelm(args) {
  if (!existsSync(HELM_BIN)) throw new Error(`helm not found at ${HELM_BIN}: build it with test/helm/build-helm.sh (npm test runs it first)`);
  const home = mkdtempSync(join(tmpdir(), 'helm-home-'));
  try {
    const env = {
      PATH: process.env.PATH, HELM_CONFIG_HOME: join(home, 'config'), HELM_CACHE_HOME: join(home, 'cache'), HELM_DATA_HOME: join(home, 'data'),
    };
    const result = spawnSync(HELM_BIN, args, { env, encoding: 'utf8', timeout: 60000 });
    if (result.error) throw result.error;
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}

// `helm template` of the chart, parsed as Kubernetes does. namespace: the release's (every object's namespace);
// valuesFiles and set: as helm's -f and --set. Throws with helm's message when it refuses the values.
export function renderHelmChart({ namespace = 'rethinkdb', valuesFiles = [], set = {} } = {}) {
  const args = ['template', 'rethinkdb-k8s-manager', helmChartDir, '--namespace', namespace,
    ...valuesFiles.flatMap((file) => ['--values', file]), ...Object.entries(set).flatMap(([key, value]) => ['--set', `${key}=${value}`])];
  const { status, stdout, stderr } = runHelm(args);
  if (status !== 0) throw new Error(`helm ${args.join(' ')} exited ${status}: ${stderr.trim()}`);
  return parseYamlDocuments(stdout, 'helm template');
}

// kind/namespace/name: the identity Kubernetes gives an object (namespace empty for a cluster-scoped one).
export const objectId = (doc) => `${doc.kind}/${doc.metadata.namespace ?? ''}/${doc.metadata.name}`;

// Objects by their identity (objectId): two renders are compared key by key.
export function objectsById(docs) {
  const byId = new Map();
  for (const doc of docs) {
    const id = objectId(doc);
    if (byId.has(id)) throw new Error(`${id} is rendered twice`);
    byId.set(id, doc);
  }
  return byId;
}

// Where two JSON-like values differ, as paths (.spec.replicas, .containers[0].image); [] when they are equal.
export function differences(a, b, path = '') {
  if (Object.is(a, b)) return [];
  const bothArrays = Array.isArray(a) && Array.isArray(b);
  const bothObjects = a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b);
  if (bothArrays) {
    return Array.from({ length: Math.max(a.length, b.length) }, (_, i) => differences(a[i], b[i], `${path}[${i}]`)).flat();
  }
  if (bothObjects) {
    return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort().flatMap((key) => differences(a[key], b[key], `${path}.${key}`));
  }
  return [path || '.'];
}

// The chart's checksum of the manager's ConfigMap (checksum/config on the Deployment's pod template: a Helm-only way
// to restart the manager when its configuration changes) has no counterpart in the kustomize base, where the README
// says to restart the Deployment after editing the ConfigMap. The comparisons of the two leave it out.
export function withoutHelmChecksum(object) {
  if (object?.kind !== 'Deployment' || !object.spec?.template?.metadata?.annotations?.['checksum/config']) return object;
  const copy = structuredClone(object);
  delete copy.spec.template.metadata.annotations['checksum/config'];
  if (Object.keys(copy.spec.template.metadata.annotations).length === 0) delete copy.spec.template.metadata.annotations;
  return copy;
}
