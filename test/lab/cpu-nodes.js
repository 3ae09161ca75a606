// CPU "nodes" for the lab cluster (cgroup v1, root): each server runs in <lab>/node-i/pod, under a node cgroup
// whose CFS quota is the node's capacity (coresPerNode). A noisy neighbour is busy-looping processes in
// <lab>/node-i/noisy: they share the node's quota with the server, as a co-located pod shares a node's CPUs,
// so the server is throttled and slowed while its own CPU use drops. Usage is read from cpuacct, as the kubelet's
// cAdvisor reads it for the metrics API.
//
// A quota bounds how much CPU a node uses, not where it runs: without more, a neighbour's busy loops run on every
// CPU of the machine in bursts (one per CPU until the node's quota is spent), and every other node's threads wait
// behind them. Measured on this 2-core machine (hotspot-floor-out: rethinkdb_1 in no replica set at all, clients
// through a proxy), p99 of reads that never touch rethinkdb_1 was 15.9 ms under the neighbour with shared CPUs, and
// 2.6 and 3.6 ms with its node isolated. Real nodes do not share CPUs. So `isolate` gives the listed nodes CPUs of their own (cpuset, the last
// CPUs of the machine), and every other node and the lab's own processes (load generator, proxy, manager: moved by
// enterShared) share the rest. On a 2-CPU machine that rest is one CPU, more crowded than before: the isolation keeps
// the neighbour off the other nodes, it does not give them more room. The process goes back to the root cpuset on
// destroy (not to one it may have started in).

import { spawn } from 'node:child_process';
import {
  existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

const ROOT = '/sys/fs/cgroup';
const CONTROLLERS = ['cpu', 'cpuacct'];
const PERIOD_US = 100000;
const CPUSET = join(ROOT, 'cpuset');

// Busy loops still running: killed when this process exits, however it exits (a watchdog's process.exit too).
const running = new Set();
process.once('exit', () => { for (const child of running) { try { child.kill('SIGKILL'); } catch { /* gone */ } } });

export function cpuNodesAvailable() {
  return CONTROLLERS.every((c) => existsSync(join(ROOT, c, 'cgroup.procs')));
}

// The CPUs of a cpuset list such as '0-1,4'.
export function parseCpuList(text) {
  return text.trim().split(',').filter(Boolean).flatMap((part) => {
    const [from, to = from] = part.split('-').map(Number);
    return Array.from({ length: to - from + 1 }, (_, i) => from + i);
  });
}

// Pure: which CPUs each cpuset group gets. The isolated nodes take one CPU each from the end; the rest is shared.
// Null when the machine has too few CPUs to leave at least one shared.
export function planCpuIsolation(cpus, isolate) {
  if (isolate.length === 0 || cpus.length <= isolate.length) return null;
  const own = cpus.slice(cpus.length - isolate.length);
  return { shared: cpus.slice(0, cpus.length - isolate.length), nodes: new Map(isolate.map((index, i) => [index, [own[i]]])) };
}

// name: the lab's cgroup directory (unique per lab); coresPerNode: each node's CPU capacity in cores; isolate: node
// indexes that get a CPU of their own (see above).
export function createCpuNodes({ name, coresPerNode, isolate = [] }) {
  if (!cpuNodesAvailable()) throw new Error(`CPU nodes need cgroup v1 cpu and cpuacct hierarchies under ${ROOT} (and root)`);
  const noise = new Map();
  const dir = (controller, ...parts) => join(ROOT, controller, name, ...parts);
  const isolation = isolate.length > 0 ? planCpuIsolation(parseCpuList(readFileSync(join(CPUSET, 'cpuset.cpus'), 'utf8')), isolate) : null;
  if (isolate.length > 0 && !isolation) throw new Error(`isolating nodes ${isolate.join(', ')} needs more CPUs than this machine's ${readFileSync(join(CPUSET, 'cpuset.cpus'), 'utf8').trim()}`);
  if (isolation) setUpCpusets();

  function setUpCpusets() {
    const mems = readFileSync(join(CPUSET, 'cpuset.mems'), 'utf8').trim();
    const group = (sub, cpus) => {
      const path = join(CPUSET, name, ...(sub ? [sub] : []));
      mkdirSync(path, { recursive: true });
      writeFileSync(join(path, 'cpuset.cpus'), cpus.join(','));
      writeFileSync(join(path, 'cpuset.mems'), mems);
    };
    group(null, [...isolation.shared, ...[...isolation.nodes.values()].flat()]);
    group('shared', isolation.shared);
    for (const [index, cpus] of isolation.nodes) group(`node-${index}`, cpus);
  }

  // The cpuset group a node's processes join: its own if isolated, else the shared one; none without isolation.
  const cpusetOf = (index) => (isolation ? join(CPUSET, name, isolation.nodes.has(index) ? `node-${index}` : 'shared', 'cgroup.procs') : null);
  const enterScript = (index, sub) => [
    ...CONTROLLERS.map((c) => dir(c, `node-${index}`, sub, 'cgroup.procs')), ...(isolation ? [cpusetOf(index)] : []),
  ].map((procs) => `echo $$ > ${procs}`).join(' && ');

  // Moves a process of the lab's own (the load generator's, and what it spawns later) onto the shared CPUs.
  function enterShared(pid = process.pid) {
    if (isolation) writeFileSync(join(CPUSET, name, 'shared', 'cgroup.procs'), String(pid));
  }

  function ensure(index) {
    const node = `node-${index}`;
    for (const c of CONTROLLERS) {
      for (const sub of ['pod', 'noisy']) mkdirSync(dir(c, node, sub), { recursive: true });
    }
    writeFileSync(dir('cpu', node, 'cpu.cfs_period_us'), String(PERIOD_US));
    writeFileSync(dir('cpu', node, 'cpu.cfs_quota_us'), String(Math.round(coresPerNode * PERIOD_US)));
  }

  // Shell code that moves the shell (and so what it execs) into node-i's pod cgroup.
  function enterPodScript(index) {
    ensure(index);
    return enterScript(index, 'pod');
  }

  // Starts `processes` busy loops in node-i's noisy cgroup. cores: instead, one process busy that many cores on
  // average (busy for cores x 100 ms, then asleep for the rest of each 100 ms): a neighbour that leaves the node part of
  // its quota, so that the node is busy without being starved.
  function startNoise(index, { processes = 2, cores = null } = {}) {
    ensure(index);
    const enter = enterScript(index, 'noisy');
    const duty = cores === null ? null
      : `const b=Math.round(${cores}*100),w=new Int32Array(new SharedArrayBuffer(4));for(;;){const t=Date.now();while(Date.now()-t<b);Atomics.wait(w,0,0,100-b)}`;
    const command = duty ? `exec ${JSON.stringify(process.execPath)} -e '${duty}'` : "exec sh -c 'while :; do :; done'";
    const children = Array.from({ length: duty ? 1 : processes }, () => spawn('sh', ['-c', `${enter} && ${command}`], { stdio: 'ignore' }));
    for (const child of children) { running.add(child); child.once('exit', () => running.delete(child)); }
    noise.set(index, [...(noise.get(index) ?? []), ...children]);
  }

  // Kills node-i's busy loops; resolves once they have exited (a cgroup with a process left in it cannot be removed).
  function stopNoise(index) {
    const children = noise.get(index) ?? [];
    noise.delete(index);
    const exited = children.map((child) => (child.exitCode !== null || child.signalCode !== null
      ? Promise.resolve() : new Promise((res) => { child.once('exit', res); })));
    for (const child of children) child.kill('SIGKILL');
    return Promise.all(exited);
  }

  // Cumulative CPU time in ns: of the whole node (server and neighbours) and of the server's pod alone.
  function usage(index) {
    const read = (...parts) => Number(readFileSync(dir('cpuacct', `node-${index}`, ...parts, 'cpuacct.usage'), 'utf8'));
    return { nodeNs: read(), podNs: read('pod') };
  }

  // Cumulative CFS throttling of the node (its quota spent before the period ended): periods and nanoseconds.
  function throttling(index) {
    const stat = Object.fromEntries(readFileSync(dir('cpu', `node-${index}`, 'cpu.stat'), 'utf8').trim().split('\n').map((line) => line.split(' ')));
    return { periods: Number(stat.nr_periods), throttledPeriods: Number(stat.nr_throttled), throttledNs: Number(stat.throttled_time) };
  }

  // After the servers are gone: remove the cgroups (a cgroup with processes left in it stays).
  async function destroy() {
    await Promise.all([...noise.keys()].map((index) => stopNoise(index)));
    for (const c of CONTROLLERS) {
      const base = dir(c);
      if (!existsSync(base)) continue;
      for (const node of readdir(base)) {
        for (const sub of ['pod', 'noisy']) tryRmdir(join(base, node, sub));
        tryRmdir(join(base, node));
      }
      tryRmdir(base);
    }
    if (isolation) {
      // This process goes back to the machine's cpuset, so that the lab's can be removed.
      try { writeFileSync(join(CPUSET, 'cgroup.procs'), String(process.pid)); } catch { /* already there */ }
      for (const sub of ['shared', ...[...isolation.nodes.keys()].map((i) => `node-${i}`)]) tryRmdir(join(CPUSET, name, sub));
      tryRmdir(join(CPUSET, name));
    }
  }

  const cpus = isolation ? { shared: isolation.shared, isolated: Object.fromEntries([...isolation.nodes].map(([i, c]) => [`node-${i}`, c])) } : null;
  return { coresPerNode, cpus, enterPodScript, enterShared, startNoise, stopNoise, usage, throttling, destroy };
}

function readdir(path) {
  return readdirSync(path, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name.startsWith('node-')).map((d) => d.name);
}

function tryRmdir(path) {
  try { rmdirSync(path); } catch { /* still has processes, or already gone */ }
}
