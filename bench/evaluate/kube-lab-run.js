// The evaluation's runs on the real Kubernetes lab (npm run evaluate -- --lab kube; lab/kube/lab.sh): the chart as
// shipped, a client pod with the open-loop load (lab/kube/client.js), and the scenario done by Kubernetes itself.
// Arms: with or without the manager (its Deployment scaled to 0: the hooks then fail at once and the webhook, whose
// failure policy is Ignore, is skipped), with or without the query gate (the client through the Service
// rethinkdb-client, which targets the proxies' gates, or straight to the proxies' own driver ports).
// A run returns what bench/evaluate/lab-run.js returns (records on the client's clock, t0, events in seconds since
// t0), so the report, the tables and the figures are the same.

import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import {
  REPO, adminPassword, applyObject, clientLines, connectPod, connectReadyPod, createKubectl, labNode, labUp, nodeOf, noisyPod, podReady, r, startClientPod,
  stopClientPod, until,
} from '../../lab/kube/kube-lab.js';
import { failuresPerPod, watchRollout } from '../../lab/kube/rollout-watch.js';
import {
  SCALE_OUT_TABLE, SQUEEZED_CPU, managerApi, monitorDecisions, scaleIn, squeezeCpu, unsqueezeCpu,
} from '../../lab/kube/scale-out.js';

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });
const run = promisify(execFile);
const HELM = `${REPO}test/helm/bin/helm`;

// A pod's readiness and its containers' restarts, or null when it cannot be read.
async function restartsOf(kubectl, pod) {
  const p = await kubectl.nsJson('get', 'pod', pod).catch(() => null);
  return p && { ready: podReady(p), count: (p.status?.containerStatuses ?? []).reduce((n, c) => n + c.restartCount, 0), uid: p.metadata.uid };
}

// Waits until `pod` has restarted a container since `before` (restartsOf) and is Ready again.
const untilRestarted = (kubectl, pod, before, what = `${pod} restarted and Ready`) => until(what, async () => {
  const now = await restartsOf(kubectl, pod);
  return now && now.ready && now.count > before.count;
}, { timeoutMs: 300000 });

// A Ready proxy pod (a gate beside a `rethinkdb proxy`).
const readyProxyPod = async (kubectl) => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-proxy')).items.filter(podReady)[0];

// SIGKILLs, from the host (the lab's kubelets run here), every process named `comm` whose environment names the pod
// (POD_NAME, which the chart's RethinkDB containers get from the downward API, or HOSTNAME, which every container of
// a pod gets) and holds `alsoEnv` (e.g. GATE_PORT=28017: the gate, not the proxy beside it). -> the pids killed.
function killPodProcesses(pod, comm, alsoEnv = null) {
  const pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
    try {
      const env = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === comm
        && (env.includes(`POD_NAME=${pod}`) || env.includes(`HOSTNAME=${pod}`)) && (alsoEnv === null || env.includes(alsoEnv));
    } catch {
      return false;
    }
  }).map(Number);
  for (const pid of pids) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* gone meanwhile */ }
  }
  return pids;
}

// The node a pod runs on.
// Waits for rethinkdb-1 made again (another uid than `before`) and Ready, and marks it.
async function rethinkdb1Back(kubectl, mark, before) {
  await until('rethinkdb-1 made again and Ready', async () => {
    const p = await kubectl.nsJson('get', 'pod', 'rethinkdb-1').catch(() => null);
    return p !== null && p.metadata.uid !== before && podReady(p);
  }, { timeoutMs: 300000 });
  mark('rethinkdb-1 Ready');
}

// How long the scale-out scenario holds the servers squeezed.
const SCALE_OUT_HOLD_SECONDS = 240;

// What Kubernetes does in each scenario, between the client's steady start and its steady end. A scenario that
// takes a node away (avoidsNodeOf) keeps the client pod off that pod's node, so that the client measures it.
export const KUBE_SCENARIOS = {
  'planned-stop': {
    name: 'planned-stop', title: 'A RethinkDB pod deleted (kubectl delete pod), on real kubelets', durationSeconds: 120, span: ['delete rethinkdb-1', 'rethinkdb-1 Ready'],
    async act({ kubectl, mark }) {
      const before = (await kubectl.nsJson('get', 'pod', 'rethinkdb-1')).metadata.uid;
      mark('delete rethinkdb-1');
      await kubectl.ns('delete', 'pod', 'rethinkdb-1', '--wait=false');
      await rethinkdb1Back(kubectl, mark, before);
    },
  },
  // kubectl drain of rethinkdb-1's node, as an operator drains it for maintenance (--pod-selector: only the
  // RethinkDB pod, so that the client pod and the other pods there stay): the eviction goes through the manager's
  // webhook and the PDB. The pod waits Pending (its local volume is on that node) until the node is uncordoned.
  drain: {
    name: 'drain', title: 'kubectl drain of a RethinkDB pod\'s node, then uncordon, on real kubelets', durationSeconds: 900, span: ['drain', 'rethinkdb-1 Ready'],
    avoidsNodeOf: 'rethinkdb-1',
    async act({ kubectl, mark }) {
      const node = await nodeOf(kubectl, 'rethinkdb-1');
      const before = (await kubectl.nsJson('get', 'pod', 'rethinkdb-1')).metadata.uid;
      let uncordoned = false;
      try {
        mark('drain');
        await kubectl('drain', node, '--pod-selector=app=rethinkdb', '--delete-emptydir-data', '--ignore-daemonsets', '--timeout=300s');
        mark('drained');
        await sleep(10000);
        mark('uncordon');
        await kubectl('uncordon', node);
        uncordoned = true;
      } finally {
        // A drain that failed must not leave the node cordoned: the pod's local volume is there.
        if (!uncordoned) await kubectl('uncordon', node).catch(() => {});
      }
      await rethinkdb1Back(kubectl, mark, before);
    },
  },
  // rethinkdb-1's node dies (lab.sh node-kill: its kubelet, containerd and containers SIGKILLed, its link cut) and
  // comes back once Kubernetes has marked it not Ready (node-restore), as after a power cut. The other pods on that
  // node (a proxy, a manager replica) die with it; the run's notes name them.
  'node-loss': {
    name: 'node-loss', title: 'A RethinkDB pod\'s node dies, is marked not Ready, and comes back, on real kubelets', durationSeconds: 900, span: ['node killed', 'rethinkdb-1 Ready'],
    avoidsNodeOf: 'rethinkdb-1',
    async act({ kubectl, mark }) {
      const node = await nodeOf(kubectl, 'rethinkdb-1');
      const restarts = () => restartsOf(kubectl, 'rethinkdb-1');
      const before = await restarts();
      if (!before) throw new Error('rethinkdb-1 cannot be read before the node loss');
      let restored = false;
      try {
        mark('node killed');
        await labNode('kill', node);
        await until(`${node} marked not Ready`, async () => {
          const n = await kubectl.json('get', 'node', node);
          return n.status.conditions.find((c) => c.type === 'Ready')?.status !== 'True';
        }, { timeoutMs: 180000, intervalMs: 1000 });
        mark('node not Ready');
        await labNode('restore', node);
        restored = true;
        mark('node restored');
      } finally {
        if (!restored) await labNode('restore', node).catch(() => {});
      }
      // The kubelet restarts the pod's containers in place (the same pod, one more restart); the API may still show the
      // pod Ready from before the loss, so Ready counts only with the restart.
      await until('rethinkdb-1 restarted and Ready', async () => {
        const now = await restarts();
        return now && now.ready && (now.uid !== before.uid || now.count > before.count);
      }, { timeoutMs: 300000 });
      mark('rethinkdb-1 Ready');
    },
  },
  // rethinkdb-1's server killed without notice (SIGKILL to every process of its container, from the host, as the
  // kernel's OOM killer kills a container over its memory limit): no preStop runs. Its kubelet starts the container
  // again in the same pod, whose postStart hook calls POSTSTART. With the manager, its probes find the server gone and
  // the adoption makes the acting primaries the configured ones before the server is back.
  'container-kill': {
    name: 'container-kill', title: 'rethinkdb-1\'s server SIGKILLed (as an OOM kill), started again by its kubelet', durationSeconds: 300, span: ['SIGKILL', 'rethinkdb-1 Ready'],
    async act({ kubectl, mark }) {
      const before = await restartsOf(kubectl, 'rethinkdb-1');
      if (!before) throw new Error('rethinkdb-1 cannot be read before the kill');
      const killed = killPodProcesses('rethinkdb-1', 'rethinkdb');
      if (killed.length === 0) throw new Error('no rethinkdb process of pod rethinkdb-1 found on this host');
      mark('SIGKILL');
      await untilRestarted(kubectl, 'rethinkdb-1', before);
      mark('rethinkdb-1 Ready');
      await sleep(20000);
    },
  },
  // rethinkdb-1's server OOM-killed by the kernel: a query sent straight to it builds an array past the container's
  // memory limit (the chart's 2Gi), so the cgroup's OOM killer ends it, and its kubelet starts it again in the same pod.
  // The run fails unless Kubernetes reports the container's last end as OOMKilled.
  'oom-kill': {
    name: 'oom-kill', title: 'rethinkdb-1\'s server OOM-killed over its memory limit, started again by its kubelet', durationSeconds: 300, span: ['memory hog sent', 'rethinkdb-1 Ready'],
    async act({ kubectl, mark, password }) {
      const before = await restartsOf(kubectl, 'rethinkdb-1');
      if (!before) throw new Error('rethinkdb-1 cannot be read before the OOM kill');
      const conn = await connectPod(kubectl, 'rethinkdb-1', password);
      mark('memory hog sent');
      // About 150 bytes an element on the server: 40 million of them is well past 2Gi. The answer never comes.
      const hog = r.range(40000000).map((i) => [i, i, i]).coerceTo('array').count().run(conn, { arrayLimit: 100000000 }).catch((err) => err);
      await untilRestarted(kubectl, 'rethinkdb-1', before);
      mark('rethinkdb-1 Ready');
      await Promise.race([hog, sleep(1000)]);
      await conn.close({ noreplyWait: false }).catch(() => {});
      const pod = await kubectl.nsJson('get', 'pod', 'rethinkdb-1');
      const reason = (pod.status.containerStatuses ?? []).find((c) => c.name === 'rethinkdb')?.lastState?.terminated?.reason ?? null;
      if (reason !== 'OOMKilled') throw new Error(`rethinkdb-1's container last ended ${reason ?? 'without a reason'}, not OOMKilled`);
      await sleep(20000);
    },
  },
  // A noisy pod (a busy loop) on rethinkdb-1's node for 90 s: the node at its whole allocatable CPU, as metrics-server
  // reports it (lab/kube/node-ns.sh), for the monitor to find.
  hotspot: {
    name: 'hotspot', title: 'A noisy pod on a RethinkDB pod\'s node for 90 s, on real kubelets', durationSeconds: 300, span: ['noisy pod', 'noisy pod gone'],
    avoidsNodeOf: 'rethinkdb-1',
    async act({ kubectl, mark }) {
      const { spec } = await kubectl.nsJson('get', 'pod', 'rethinkdb-1');
      const noisy = noisyPod({ name: 'eval-noisy', nodeName: spec.nodeName, image: spec.containers[0].image });
      await kubectl.ns('delete', 'pod', 'eval-noisy', '--ignore-not-found', '--wait=true');
      await applyObject(kubectl, noisy);
      try {
        await until('the noisy pod runs', async () => (await kubectl.nsJson('get', 'pod', 'eval-noisy')).status.phase === 'Running', { timeoutMs: 60000 });
        mark('noisy pod');
        await sleep(90000);
      } finally {
        await kubectl.ns('delete', 'pod', 'eval-noisy', '--ignore-not-found', '--wait=true', '--grace-period=1').catch(() => {});
      }
      mark('noisy pod gone');
      await sleep(30000);
    },
  },
  // The gate tier's own events (issue 45): the proxy Deployment (a gate and a rethinkdb proxy in each pod) rolled,
  // or one of its pods deleted, under load through the Service. Only the arms with the gate: without it the clients
  // dial the proxy pods' addresses, which a rollout replaces.
  'proxy-rollout': {
    name: 'proxy-rollout', title: 'kubectl rollout restart deployment/rethinkdb-proxy (the gates), on real kubelets', durationSeconds: 300, span: ['proxy rollout', 'proxy rollout done'],
    gateOnly: true,
    async act({ kubectl, mark }) {
      mark('proxy rollout');
      await kubectl.ns('rollout', 'restart', 'deployment/rethinkdb-proxy');
      await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-proxy', '--timeout=600s');
      mark('proxy rollout done');
      await sleep(15000);
    },
  },
  'proxy-delete': {
    name: 'proxy-delete', title: 'a proxy pod (a gate) deleted, on real kubelets', durationSeconds: 300, span: ['delete a proxy pod', 'proxies Ready'],
    gateOnly: true,
    async act({ kubectl, mark }) {
      const pod = await readyProxyPod(kubectl);
      mark('delete a proxy pod');
      await kubectl.ns('delete', 'pod', pod.metadata.name, '--wait=true');
      await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-proxy', '--timeout=600s');
      mark('proxies Ready');
      await sleep(15000);
    },
  },
  // A gate that crashes: one proxy pod's query gate SIGKILLed (its node process), started again by its kubelet in the
  // same pod. Every connection through it breaks at once, queries in flight included, and its holds end with it.
  'gate-crash': {
    name: 'gate-crash', title: 'a proxy pod\'s query gate SIGKILLed, started again by its kubelet', durationSeconds: 300, span: ['SIGKILL the gate', 'the gate Ready'],
    gateOnly: true,
    async act({ kubectl, mark }) {
      const pod = await readyProxyPod(kubectl);
      const name = pod.metadata.name;
      const before = await restartsOf(kubectl, name);
      const killed = killPodProcesses(name, 'node', 'GATE_PORT=28017');
      if (killed.length !== 1) throw new Error(`expected the one gate process of ${name}, found ${killed.length}`);
      mark('SIGKILL the gate');
      await untilRestarted(kubectl, name, before, `${name}'s gate restarted and Ready`);
      mark('the gate Ready');
      await sleep(15000);
    },
  },
  // Issue 45 part 3 (seed 003): every RethinkDB server held to SQUEEZED_CPU under the load, so that all three are
  // over the monitor's 80 % (lab/kube/scale-out.js says why the lab squeezes). With the manager, the monitor scales the
  // StatefulSet out by one and the new pod's POSTSTART gives its server replicas and a primary (add-server); the pod is
  // squeezed too as soon as it exists, four servers alike. Without it, the three stay overloaded. The squeeze lasts
  // SCALE_OUT_HOLD_SECONDS either way; the run's window compares its last minute with the steady start. The table has
  // four shards (SCALE_OUT_TABLE). After the run, the lab is scaled back in and given its CPU back.
  'scale-out': {
    name: 'scale-out', title: `every RethinkDB server held to ${SQUEEZED_CPU} of CPU under load: the monitor scales the StatefulSet out by one`, durationSeconds: 600,
    span: ['servers squeezed', 'rethinkdb_3 serving'],
    table: SCALE_OUT_TABLE,
    window: { from: 'servers squeezed', to: 'squeeze ends', graceS: SCALE_OUT_HOLD_SECONDS - 60 },
    phases: [
      { name: 'three servers overloaded', from: 'servers squeezed', to: 'scale-out decided' },
      { name: 'four servers', from: 'rethinkdb_3 serving', to: 'squeeze ends' },
    ],
    async act({ kubectl, mark, password }) {
      const api = managerApi(kubectl);
      const since = new Date().toISOString();
      await squeezeCpu(kubectl, ['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
      mark('servers squeezed');
      const conn = await connectReadyPod(kubectl, password);
      const { db, table } = SCALE_OUT_TABLE;
      const seen = { decided: false, squeezed: false, serving: false };
      try {
        const endAt = Date.now() + SCALE_OUT_HOLD_SECONDS * 1000;
        while (Date.now() < endAt) {
          if (!seen.decided) {
            const [decision] = await monitorDecisions(api, 'scale-out', since).catch(() => []);
            if (decision) { seen.decided = true; mark('scale-out decided', Date.parse(decision.time)); }
          }
          if (!seen.squeezed && (await kubectl.nsJson('get', 'pod', 'rethinkdb-3').catch(() => null))?.status?.containerStatuses) {
            seen.squeezed = await squeezeCpu(kubectl, ['rethinkdb-3']).then(() => true, () => false);
            if (seen.squeezed) mark('rethinkdb-3 squeezed');
          }
          // Serving: the new server is a primary of the table, and every replica of it is ready.
          if (seen.decided && !seen.serving) {
            const config = await r.db(db).table(table).config().run(conn);
            if (config.shards.some((sh) => sh.primary_replica === 'rethinkdb_3')) {
              const status = await r.db(db).table(table).status().run(conn);
              if (status.status.all_replicas_ready) { seen.serving = true; mark('rethinkdb_3 serving'); }
            }
          }
          await sleep(500);
        }
        mark('squeeze ends');
      } finally {
        await conn.close().catch(() => {});
      }
    },
    // After the client is gone: three servers again (rethinkdb_3's replicas given away first), each with its CPU back.
    async cleanup({ kubectl, log }) {
      await unsqueezeCpu(kubectl);
      await scaleIn(kubectl, { to: 3, log });
    },
  },
  'rolling-restart': {
    name: 'rolling-restart', title: 'kubectl rollout restart statefulset/rethinkdb, on real kubelets', durationSeconds: 600, span: ['rollout restart', 'rollout done'],
    async act({ kubectl, mark }) {
      mark('rollout restart');
      await kubectl.ns('rollout', 'restart', 'statefulset/rethinkdb');
      await kubectl.ns('rollout', 'status', 'statefulset/rethinkdb', '--timeout=900s');
      mark('rollout done');
    },
  },
};

let lab = null;
async function theLab(log) {
  if (!lab) {
    const kubectl = createKubectl(labUp({ log: (line) => log({}, line) }));
    lab = { kubectl, password: await adminPassword(kubectl) };
  }
  return lab;
}

// The readiness gate (rethinkdb.readinessGate) goes with the manager: without one nobody sets the condition, and a
// restarted pod would never be Ready. Changing it rolls the StatefulSet (not measured: before the client starts).
// helm upgrade of the lab's release with its values as they are but `sets` (['--set', 'k=v', ...]).
async function helmUpgrade(kubectl, sets) {
  await run(HELM, ['upgrade', 'rethinkdb-manager', `${REPO}deploy/helm/rethinkdb-k8s-manager`, '-n', 'rethinkdb', '--reuse-values', ...sets], { env: kubectl.env });
}

async function setReadinessGate(kubectl, on, log) {
  const sts = await kubectl.nsJson('get', 'statefulset', 'rethinkdb');
  const has = (sts.spec.template.spec.readinessGates ?? []).length > 0;
  if (has === on) return;
  log({ readinessGate: on }, 'helm upgrade: the RethinkDB pods\' readiness gate, and the rollout it makes');
  await helmUpgrade(kubectl, ['--set', `rethinkdb.readinessGate=${on}`]);
  await kubectl.ns('rollout', 'status', 'statefulset/rethinkdb', '--timeout=900s');
}

// Holds on the gates (gate.hold.enabled): the proxies and the manager are made again with or without the token.
async function setHolds(kubectl, on, log) {
  const config = (await kubectl.nsJson('get', 'configmap', 'rethinkdb-manager')).data ?? {};
  if (Boolean(config.GATE_HOLD_TOKEN_FILE) === on) return;
  log({ holds: on }, 'helm upgrade: holds on the query gates');
  await helmUpgrade(kubectl, ['--set', `gate.hold.enabled=${on}`]);
  await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-proxy', '--timeout=300s');
  await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-manager', '--timeout=300s');
}

// --manager-env K=V on the lab: the chart's manager.config keys (the manager's ConfigMap), then the manager made again.
async function setManagerConfig(kubectl, managerEnv, log) {
  const entries = Object.entries(managerEnv ?? {});
  if (entries.length === 0) return;
  const current = (await kubectl.nsJson('get', 'configmap', 'rethinkdb-manager')).data ?? {};
  if (entries.every(([k, v]) => current[k] === v)) return;
  log(managerEnv, 'helm upgrade: the manager\'s configuration');
  await helmUpgrade(kubectl, entries.flatMap(([k, v]) => ['--set-string', `manager.config.${k}=${v}`]));
  await kubectl.ns('rollout', 'restart', 'deployment/rethinkdb-manager');
  await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-manager', '--timeout=300s');
}

// Until the manager's Lease is held by one of its running pods. After the Deployment is made again, the Lease still
// names the old leader until it expires (about 15 s); a hook meanwhile is relayed to a leader that is gone and waits.
// A run that started then measured that wait, not the manager: a set on 2026-11-27 lost its first PRESTOP so.
async function managerLeading(kubectl, log) {
  await until('a running manager pod holds the lease', async () => {
    const pods = (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-manager')).items
      .filter((p) => p.status?.phase === 'Running' && !p.metadata.deletionTimestamp).map((p) => p.metadata.name);
    const holder = (await kubectl.nsJson('get', 'lease', 'rethinkdb-manager').catch(() => null))?.spec?.holderIdentity ?? '';
    return pods.includes(holder.split('_')[0]);
  }, { timeoutMs: 120000 });
  log({}, 'the manager leads');
}

async function setManagerReplicas(kubectl, replicas) {
  await kubectl.ns('scale', 'deployment/rethinkdb-manager', `--replicas=${replicas}`);
  if (replicas > 0) await kubectl.ns('rollout', 'status', 'deployment/rethinkdb-manager', '--timeout=300s');
  else await until('no manager pod', async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-manager')).items.length === 0, { timeoutMs: 300000 });
}

// The scenarios' table unless one names another (scenario.table).
const USERTABLE = { db: 'ycsb', table: 'usertable', shards: 3 };

// A scenario's table: 3 replicas (one server per node), all replicas ready, primaries levelled.
async function prepareTable(kubectl, password, { db, table, shards: shardCount }) {
  const conn = await connectPod(kubectl, 'rethinkdb-0', password);
  try {
    if (!(await r.dbList().run(conn)).includes(db)) await r.dbCreate(db).run(conn);
    if (!(await r.db(db).tableList().run(conn)).includes(table)) {
      await r.db(db).tableCreate(table, { shards: shardCount, replicas: 3 }).run(conn);
    }
    await r.db(db).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(conn);
    await r.db(db).table(table).rebalance().run(conn).catch(() => {});
    await r.db(db).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(conn);
    // The same layout for every run, as the process lab pins it: shard i's primary on rethinkdb_(i mod 3), so that the
    // server a scenario stops always holds one (earlier runs and the manager's hand-backs move them).
    const config = await r.db(db).table(table).config().run(conn);
    const shards = config.shards.map((shard, i) => ({ ...shard, primary_replica: `rethinkdb_${i % 3}` }));
    const changed = await r.db(db).table(table).config().update({ shards }).run(conn);
    await r.db(db).table(table).wait({ waitFor: 'all_replicas_ready', timeout: 120 }).run(conn);
    // A handover the pinning started must be over before the load starts (its failures would count against the run).
    if (changed.replaced > 0) await sleep(10000);
  } finally { await conn.close(); }
}

export async function runOnKubeLab(scenario, arm, {
  rate, keyCount, managerEnv = {}, client = 'plain', log = () => {},
}) {
  const withHold = arm === 'manager+gate+hold';
  const withManager = arm === 'manager' || arm === 'manager+gate' || withHold;
  const withGate = arm === 'gate' || arm === 'manager+gate' || withHold;
  if (scenario.gateOnly && !withGate) throw new Error(`${scenario.name} runs only in the arms with the gate (gate, manager+gate, manager+gate+hold)`);
  const { kubectl, password } = await theLab(log);
  log({ arm }, withManager ? 'the manager: 2 replicas' : 'the manager: scaled to 0');
  // With the manager first, so that it sets the gate's condition during the rollout the change makes; without it last.
  if (withManager) {
    await setManagerReplicas(kubectl, 2);
    await setManagerConfig(kubectl, managerEnv, log);
    await setHolds(kubectl, withHold, log);
    await managerLeading(kubectl, log);
  }
  await setReadinessGate(kubectl, withManager, log);
  if (!withManager) await setManagerReplicas(kubectl, 0);
  const tableOf = scenario.table ?? USERTABLE;
  await prepareTable(kubectl, password, tableOf);
  const proxies = (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb-proxy')).items.filter(podReady);
  const hosts = withGate ? null : proxies.map((p) => `${p.status.podIP}:28015`);
  const name = `eval-${scenario.name}-${arm.replaceAll('+', '-')}`;
  const avoidNode = scenario.avoidsNodeOf ? await nodeOf(kubectl, scenario.avoidsNodeOf) : null;
  // What else runs where the scenario strikes (a proxy there takes its clients' connections with it).
  const onTheNode = avoidNode ? (await kubectl.json('get', 'pods', '-A', '--field-selector', `spec.nodeName=${avoidNode}`)).items.map((p) => p.metadata.name) : null;
  log({ hosts: hosts ?? 'rethinkdb-client:28015', avoidNode, onTheNode }, 'starting the client pod');
  await startClientPod(kubectl, name, {
    db: tableOf.db, table: tableOf.table, rate, keys: keyCount, hosts, records: true, avoidNode, client,
  });
  const wallEvents = [];
  // An event now, or at a wall time read elsewhere (the manager's time of a decision).
  const mark = (label, wall = Date.now()) => { wallEvents.push({ label, wall }); log({}, label); };
  let rows;
  let start;
  let summary;
  // Seconds the client waited for the table to take its first writes (what ran before left it unwritable).
  let loadRetries = 0;
  let watched;
  try {
    await kubectl.ns('wait', `pod/${name}`, '--for=condition=Ready', '--timeout=120s');
    await until('the client is loaded and running', async () => (await clientLines(kubectl, name)).some((l) => l.started), { timeoutMs: 300000 });
    await sleep(10000);
    const watch = watchRollout({
      r, db: tableOf.db, table: tableOf.table, connect: () => connectReadyPod(kubectl, password),
      listPods: async () => (await kubectl.nsJson('get', 'pods', '-l', 'app=rethinkdb')).items,
    });
    try {
      await scenario.act({ kubectl, mark, password });
    } finally {
      await sleep(10000);
      watched = await watch.stop();
    }
    let lines;
    ({
      records: rows, start, lines, summary,
    } = await stopClientPod(kubectl, name, { withRecords: true, timeoutMs: 120000 }));
    loadRetries = lines.filter((l) => l.loadRetry).length;
  } finally {
    // A failed run leaves no client behind; lab.sh up also puts the manager back to 2 replicas.
    await kubectl.ns('delete', 'pod', name, '--wait=false').catch(() => {});
    // What the scenario changed goes back for the next run (the scale-out's fourth server, its squeeze).
    if (scenario.cleanup) await scenario.cleanup({ kubectl, log });
  }
  const records = rows.map(([startMs, endMs, ok, kind, errorKind], i) => ({
    i, startMs, issuedMs: startMs, endMs, ok: ok === 1, kind, errorKind, entry: 'client',
  }));
  const stops = watched.podEvents.filter((e) => e.event === 'stopping');
  const events = [
    ...wallEvents.map((e) => ({ label: e.label, t: (e.wall - start.t0Wall) / 1000 })),
    ...stops.map((e) => ({ label: `${e.pod} stopping`, t: (e.at - start.t0Wall) / 1000 })),
  ].sort((a, b) => a.t - b.t);
  const rollout = {
    handoversPerShard: watched.handovers,
    secondsBelowTwoUpToDate: watched.secondsBelowTwoUpToDate,
    secondsWithoutUpToDateMajority: watched.secondsWithoutUpToDateMajority,
    // Those seconds by cause: a replica of the short shard disconnected (a server away), or every replica connected
    // (a handover's own resynchronisation).
    secondsWithoutUpToDateMajorityBy: watched.secondsWithoutUpToDateMajorityBy,
    // Each stretch with a shard below two up-to-date replicas, in seconds since t0, with the states first seen.
    belowTwo: watched.belowTwo.map((b) => ({
      from: (b.from - start.t0Wall) / 1000, to: (b.to - start.t0Wall) / 1000, serverAway: b.serverAway, shards: b.shards,
    })),
    readyTooEarly: watched.readyTooEarly,
    failedPerPod: failuresPerPod(records, stops, start.t0Wall),
    seconds: secondsBetween(wallEvents, scenario.span),
  };
  log(rollout, 'what the rollout watch saw');
  return {
    scenario: scenario.name, arm, records, t0: 0, events, examples: {}, layout: { lab: 'kube', gate: withGate, manager: withManager },
    notes: {
      lab: 'kube', t0Wall: new Date(start.t0Wall).toISOString(), entries: hosts ?? ['rethinkdb-client:28015'], client, loadRetries, rollout, ...(onTheNode ? { node: avoidNode, podsOnTheNode: onTheNode } : {}),
    },
    phases: scenario.phases ?? [], window: scenario.window ?? null, counters: summary?.counters ?? null,
  };
}

// A driver connection to any Ready RethinkDB pod.

// Seconds between the scenario's two marks ([from, to]), or null.
function secondsBetween(marks, span) {
  if (!span) return null;
  const [from, to] = span.map((label) => marks.find((m) => m.label === label)?.wall);
  return from && to ? (to - from) / 1000 : null;
}
