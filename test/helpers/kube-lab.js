// The real Kubernetes lab (lab/kube/lab.sh) for the end-to-end tests in test/kube-lab/: bring it up (or find it
// up), run kubectl against it, reach the RethinkDB pods with the official driver over their pod addresses (the
// host routes to every node's pod network), and take it down, checking that nothing is left behind.

import { execFile, execFileSync } from 'node:child_process';
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
  const out = execFileSync('bash', [LAB_SCRIPT, 'up'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  for (const line of out.trimEnd().split('\n')) log(line);
  const last = out.trimEnd().split('\n').at(-1);
  if (!last.startsWith('KUBECONFIG=')) throw new Error(`lab.sh up did not end with KUBECONFIG=: ${last}`);
  return last.slice('KUBECONFIG='.length);
}

export function labDown() {
  return execFileSync('bash', [LAB_SCRIPT, 'down'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

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

export { r };
