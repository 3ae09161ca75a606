// The monitor's scale-out on the Kubernetes lab (test/kube-lab/kubelet.test.js and the evaluation's scale-out scenario,
// bench/evaluate/kube-lab-run.js): what makes every server overloaded on a 2-CPU machine, what a test reads of the
// manager while it scales, and the scale-in that puts the lab back at three servers.
//
// The lab's four nodes share this machine's 2 CPUs, so a load it can make overloads three RethinkDB servers only if each
// is held to a small CPU limit. squeezeCpu resizes running pods in place (the pods/resize subresource: the container's
// cgroup quota changes, nothing restarts), and the monitor reads each server's use against that limit, as it would on a
// cluster whose servers run at their limits. The pod a scale-out adds starts with the StatefulSet's own resources, so
// the scenario squeezes it too, as soon as it exists: four servers alike.

import { podReady, until } from './kube-lab.js';

// A table with more shards than servers, so that a fourth server can take a primary: with three shards on four servers
// levelling by count gives it none (1, 1, 1, 0 is level), and the reads it could take stay where they are.
export const SCALE_OUT_TABLE = { db: 'ycsb', table: 'scaleout', shards: 4 };

// The CPU limit (and request) the lab's servers are held to: 200m is what a load of about 300 ops/s through the gates
// (half writes) keeps above the monitor's 80 % on each of three servers, measured on this machine.
export const SQUEEZED_CPU = '200m';

const resources = (cpu) => ({ requests: { cpu }, limits: { cpu } });

async function resize(kubectl, pod, res) {
  await kubectl.ns('patch', 'pod', pod, '--subresource', 'resize', '--patch', JSON.stringify({ spec: { containers: [{ name: 'rethinkdb', resources: res }] } }));
}

// Holds each pod's rethinkdb container to `cpu` (request and limit), and waits until its status says so.
export async function squeezeCpu(kubectl, pods, cpu = SQUEEZED_CPU) {
  for (const pod of pods) await resize(kubectl, pod, resources(cpu));
  await until(`${pods.join(', ')} resized to ${cpu}`, async () => {
    const all = await Promise.all(pods.map((p) => kubectl.nsJson('get', 'pod', p)));
    return all.every((p) => (p.status.containerStatuses ?? []).find((c) => c.name === 'rethinkdb')?.resources?.limits?.cpu === cpu);
  }, { timeoutMs: 60000, intervalMs: 500 });
}

// Gives every RethinkDB pod back the StatefulSet template's CPU (what the chart set).
export async function unsqueezeCpu(kubectl) {
  const sts = await kubectl.nsJson('get', 'statefulset', 'rethinkdb');
  const template = sts.spec.template.spec.containers.find((c) => c.name === 'rethinkdb').resources;
  const cpu = { requests: { cpu: template.requests.cpu }, limits: { cpu: template.limits.cpu } };
  const pods = (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items;
  for (const pod of pods) {
    const now = pod.spec.containers.find((c) => c.name === 'rethinkdb').resources;
    if (now.limits?.cpu !== cpu.limits.cpu || now.requests?.cpu !== cpu.requests.cpu) await resize(kubectl, pod.metadata.name, cpu);
  }
}

// The manager's API as an operator (the chart's rethinkdb-manager-operator ServiceAccount), sent to the pod that holds
// the lease: (method, path, body?) -> { status, body }.
export function managerApi(kubectl) {
  let token = null;
  return async (method, path, body = undefined) => {
    token ??= (await kubectl.ns('create', 'token', 'rethinkdb-manager-operator', '--audience', 'rethinkdb-manager')).trim();
    const holder = (await kubectl.nsJson('get', 'lease', 'rethinkdb-manager')).spec.holderIdentity.split('_')[0];
    const ip = (await kubectl.nsJson('get', 'pod', holder)).status.podIP;
    const res = await fetch(`http://${ip}:8080${path}`, {
      method, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    let parsed;
    try { parsed = JSON.parse(text); } catch { parsed = text; }
    return { status: res.status, body: parsed };
  };
}

// The monitor's decisions of one type since `sinceIso`, from GET /v1/monitor (the last 20 across polls).
export async function monitorDecisions(api, type, sinceIso) {
  const { status, body } = await api('GET', '/v1/monitor');
  if (status !== 200) throw new Error(`GET /v1/monitor answered ${status}: ${JSON.stringify(body).slice(0, 300)}`);
  return body.lastDecisions.filter((d) => d.type === type && d.time >= sinceIso);
}

// Scales the StatefulSet back in to `to` pods the way an operator does (docs/monitor.md, "Scaling in"): each server
// beyond `to` first gives its replicas away (migrate-replicas-off, through the manager), then its pod goes. A move the
// manager cannot make yet (every server without a replica of that shard is kept off, e.g. under a performance warning
// that its monitor clears a minute after the load is gone) is tried again, for up to `migrateTimeoutMs`. The pods'
// volume claims stay (the StatefulSet keeps them), so a later scale-out finds its volume on the same node.
export async function scaleIn(kubectl, { to = 3, log = () => {}, migrateTimeoutMs = 300000 } = {}) {
  const api = managerApi(kubectl);
  const sts = await kubectl.nsJson('get', 'statefulset', 'rethinkdb');
  for (let ordinal = sts.spec.replicas - 1; ordinal >= to; ordinal -= 1) {
    const server = `rethinkdb_${ordinal}`;
    let last = null;
    await until(`${server}'s replicas all given away`, async () => {
      const answer = await api('POST', '/v1/actions/migrate-replicas-off', { server, reason: 'lab: scale in after the scale-out' });
      if (answer.status === 404) return true; // the server never joined
      if (answer.status === 200) {
        last = { outcome: answer.body.outcome, skipped: answer.body.skipped };
        return answer.body.outcome === 'nothing_to_do';
      }
      if (answer.status !== 202) throw new Error(`scale in: migrate-replicas-off ${server} answered ${answer.status}: ${JSON.stringify(answer.body).slice(0, 600)}`);
      const id = answer.body.operation.id;
      const op = await until(`the migration of ${server}'s replicas ends`, async () => {
        const { body } = await api('GET', `/v1/operations/${id}`);
        return body.status !== 'running' && body;
      }, { timeoutMs: 600000, intervalMs: 1000 });
      last = { status: op.status, outcome: op.report?.outcome, skipped: op.report?.skipped, notDone: op.report?.notDone, error: op.error };
      log({ server, ...last }, 'scale in: migrate-replicas-off');
      return op.status === 'succeeded' && op.report?.outcome === 'completed';
    }, { timeoutMs: migrateTimeoutMs, intervalMs: 5000 }).catch((err) => { throw new Error(`${err.message}; the last try: ${JSON.stringify(last).slice(0, 800)}`); });
  }
  await kubectl.ns('scale', 'statefulset/rethinkdb', `--replicas=${to}`);
  await until(`the StatefulSet back at ${to} pods`, async () => {
    const pods = (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items;
    return pods.length === to && pods.every(podReady);
  }, { timeoutMs: 300000, intervalMs: 1000 });
}
