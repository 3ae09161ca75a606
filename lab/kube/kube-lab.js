// The real Kubernetes lab (lab/kube/lab.sh) for the end-to-end tests in test/kube-lab/ and the evaluation's runs on
// it (bench/evaluate/kube-lab-run.js): bring it up (or find it up), run kubectl against it, reach the RethinkDB pods with the official driver over their pod addresses (the
// host routes to every node's pod network), and take it down, checking that nothing is left behind.

import { execFile, execFileSync, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import r from 'rethinkdb';

const run = promisify(execFile);
export const REPO = fileURLToPath(new URL('../..', import.meta.url));
export const LAB_SCRIPT = `${REPO}lab/kube/lab.sh`;
export const KUBECTL = `${REPO}lab/kube/bin/kubectl`;
export const NAMESPACE = 'rethinkdb';

// lab.sh up; its last line is KUBECONFIG=<path>. Its progress goes to `log`.
export function labUp({ log = () => {} } = {}) {
  let out;
  try {
    out = execFileSync('bash', [LAB_SCRIPT, 'up'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  } catch (err) {
    // Where it stopped: the progress lines (stdout) say which step; the daemons' logs are in the lab's logs/.
    throw new Error(`lab.sh up failed (exit ${err.status}). Its last lines:\n${String(err.stdout ?? '').split('\n').slice(-15).join('\n')}\n${err.stderr ?? ''}`);
  }
  for (const line of out.trimEnd().split('\n')) log(line);
  const last = out.trimEnd().split('\n').at(-1);
  if (!last.startsWith('KUBECONFIG=')) throw new Error(`lab.sh up did not end with KUBECONFIG=: ${last}`);
  return last.slice('KUBECONFIG='.length);
}

export function labDown() {
  return execFileSync('bash', [LAB_SCRIPT, 'down'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

// lab.sh node-kill N / node-restore N: node-N dies (all its processes killed, its link down) / comes back; without
// blocking the event loop (watches keep sampling meanwhile).
export const labNode = async (verb, nodeName) => (await run('bash', [LAB_SCRIPT, `node-${verb}`, nodeName.replace(/^node-/, '')], { encoding: 'utf8' })).stdout;

// A pod that keeps one CPU busy (a shell loop) on `nodeName`, from `image` (the RethinkDB image has a shell): the noisy
// neighbour of the lab's test and of the evaluation's hotspot scenario. Labelled as the client pods are, so that
// `lab.sh` removes one left behind.
export const noisyPod = ({ name, nodeName, image }) => ({
  apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: NAMESPACE, labels: { app: 'lab-client' } },
  spec: {
    nodeName, terminationGracePeriodSeconds: 0, restartPolicy: 'Never',
    containers: [{ name: 'busy', image, imagePullPolicy: 'Never', command: ['sh', '-c', 'while :; do :; done'] }],
  },
});

export const labLeftovers = () => execFileSync('bash', [LAB_SCRIPT, 'leftovers'], { encoding: 'utf8' }).trim();

export function createKubectl(kubeconfig) {
  const env = { ...process.env, KUBECONFIG: kubeconfig };
  const kubectl = async (...args) => (await run(KUBECTL, args, { env, maxBuffer: 64 << 20 })).stdout;
  kubectl.json = async (...args) => JSON.parse(await kubectl(...args, '-o', 'json'));
  kubectl.ns = (...args) => kubectl('-n', NAMESPACE, ...args);
  kubectl.nsJson = (...args) => kubectl.json('-n', NAMESPACE, ...args);
  kubectl.env = env;
  return kubectl;
}

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// Polls fn until it returns a truthy value, or throws naming what it waited for and the last error fn threw.
export async function until(what, fn, { timeoutMs = 180000, intervalMs = 500 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) { last = err; }
    if (Date.now() > deadline) throw new Error(`${what}: not after ${timeoutMs} ms${last ? ` (last error: ${last.message})` : ''}`);
    await sleep(intervalMs);
  }
}

export const podReady = (pod) => (pod?.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True');

export async function adminPassword(kubectl) {
  const secret = await kubectl.nsJson('get', 'secret', 'rethinkdb-admin');
  return Buffer.from(secret.data.password, 'base64').toString('utf8');
}

// A driver connection to a RethinkDB pod by its address.
export async function connectPod(kubectl, podName, password) {
  const pod = await kubectl.nsJson('get', 'pod', podName);
  if (!pod.status.podIP) throw new Error(`${podName} has no address yet`);
  return r.connect({ host: pod.status.podIP, port: 28015, user: 'admin', password, timeout: 5 });
}

// A driver connection through a Ready RethinkDB pod other than `avoid`, the first that answers (none: an error).
export async function connectReadyPod(kubectl, password, { avoid = null } = {}) {
  const pods = (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items.filter((p) => p.metadata.name !== avoid && podReady(p));
  for (const pod of pods) {
    try { return await connectPod(kubectl, pod.metadata.name, password); } catch { /* the next one */ }
  }
  throw new Error(`no Ready RethinkDB pod${avoid ? ` other than ${avoid}` : ''} answers`);
}

// The node a pod of the namespace runs on.
export const nodeOf = async (kubectl, pod) => (await kubectl.nsJson('get', 'pod', pod)).spec.nodeName;

// kubectl apply of one object, without blocking the event loop (watches keep sampling meanwhile). Resolves with what
// kubectl wrote to stderr (warnings); rejects when it fails.
export function applyObject(kubectl, object) {
  return new Promise((resolve, reject) => {
    const child = spawn(KUBECTL, ['apply', '-f', '-'], { env: kubectl.env, stdio: ['pipe', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d) => { stderr += d; });
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(stderr) : reject(new Error(`kubectl apply ${object.kind} ${object.metadata?.name}: ${stderr.trim()}`))));
    child.stdin.end(JSON.stringify(object));
  });
}

export { r };

// A client pod (lab/kube/client.js) in the namespace, from the manager's image with this repository mounted
// read-only: open-loop load through the Service rethinkdb-client until `stopClientPod`.
// avoidNode: a node the client pod must not run on (a scenario that takes that node away).
export async function startClientPod(kubectl, name, {
  db = 'lab', table = 'usertable', rate = 200, keys = 1000, hosts = null, records = false, avoidNode = null, client = 'plain',
} = {}) {
  const pod = {
    apiVersion: 'v1', kind: 'Pod',
    metadata: { name, namespace: NAMESPACE, labels: { app: 'lab-client' } },
    spec: {
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 5,
      securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000 },
      ...(avoidNode ? {
        affinity: {
          nodeAffinity: {
            requiredDuringSchedulingIgnoredDuringExecution: {
              nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/hostname', operator: 'NotIn', values: [avoidNode] }] }],
            },
          },
        },
      } : {}),
      containers: [{
        name: 'client',
        image: 'rethinkdb-k8s-manager:0.1.0',
        imagePullPolicy: 'Never',
        command: ['node', '/repo/lab/kube/client.js'],
        env: [
          { name: 'RETHINKDB_PASSWORD', valueFrom: { secretKeyRef: { name: 'rethinkdb-admin', key: 'password' } } },
          { name: 'DB', value: db }, { name: 'TABLE', value: table }, { name: 'RATE', value: String(rate) }, { name: 'KEYS', value: String(keys) },
          { name: 'RECORDS', value: records ? '1' : '0' }, { name: 'CLIENT_MODE', value: client }, ...(hosts ? [{ name: 'CLIENT_HOSTS', value: hosts.join(',') }] : []),
        ],
        volumeMounts: [{ name: 'repo', mountPath: '/repo', readOnly: true }],
      }],
      volumes: [{ name: 'repo', hostPath: { path: REPO.replace(/\/$/, ''), type: 'Directory' } }],
    },
  };
  await kubectl.ns('delete', 'pod', name, '--ignore-not-found', '--wait=true');
  await applyObject(kubectl, pod);
}

// Lines of the client pod's output that are JSON (its start and its summary).
export async function clientLines(kubectl, name) {
  const out = await kubectl.ns('logs', name).catch(() => '');
  return out.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l));
}

// Tells the client to stop, waits for it to finish, and returns its summary (and, if it printed them, its records
// its start and every JSON line it printed: { summary, records, start, lines }).
export async function stopClientPod(kubectl, name, { timeoutMs = 60000, withRecords = false } = {}) {
  await kubectl.ns('exec', name, '--', 'touch', '/tmp/stop');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = await clientLines(kubectl, name);
    if (lines.some((l) => l.done)) {
      const summary = lines.find((l) => l.summary)?.summary;
      if (!withRecords) return summary;
      return {
        summary, start: lines.find((l) => l.started), records: lines.filter((l) => l.records).flatMap((l) => l.records), lines,
      };
    }
    if (Date.now() > deadline) {
      const tail = (await kubectl.ns('logs', name, '--tail=5').catch((err) => err.message)).slice(-2000);
      const phase = (await kubectl.nsJson('get', 'pod', name).catch(() => null))?.status?.phase;
      throw new Error(`client pod ${name} (${phase}) gave no summary within ${timeoutMs} ms; its last lines: ${tail}`);
    }
    await sleep(500);
  }
}
