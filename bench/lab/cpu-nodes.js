// CPU "nodes" for the lab cluster (cgroup v1, root): each server runs in <lab>/node-i/pod, under a node cgroup
// whose CFS quota is the node's capacity (coresPerNode). A noisy neighbour is busy-looping processes in
// <lab>/node-i/noisy: they share the node's quota with the server, as a co-located pod shares a node's CPUs,
// so the server is throttled and slowed while its own CPU use drops. Usage is read from cpuacct, as the kubelet's
// cAdvisor reads it for the metrics API.

import { spawn } from 'node:child_process';
import {
  existsSync, mkdirSync, readFileSync, readdirSync, rmdirSync, writeFileSync,
} from 'node:fs';
import { join } from 'node:path';

const ROOT = '/sys/fs/cgroup';
const CONTROLLERS = ['cpu', 'cpuacct'];
const PERIOD_US = 100000;

// Busy loops still running: killed when this process exits, however it exits (a watchdog's process.exit too).
const running = new Set();
process.once('exit', () => { for (const child of running) { try { child.kill('SIGKILL'); } catch { /* gone */ } } });

export function cpuNodesAvailable() {
  return CONTROLLERS.every((c) => existsSync(join(ROOT, c, 'cgroup.procs')));
}

// name: the lab's cgroup directory (unique per lab); coresPerNode: each node's CPU capacity in cores.
export function createCpuNodes({ name, coresPerNode }) {
  if (!cpuNodesAvailable()) throw new Error(`CPU nodes need cgroup v1 cpu and cpuacct hierarchies under ${ROOT} (and root)`);
  const noise = new Map();
  const dir = (controller, ...parts) => join(ROOT, controller, name, ...parts);

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
    return CONTROLLERS.map((c) => `echo $$ > ${dir(c, `node-${index}`, 'pod', 'cgroup.procs')}`).join(' && ');
  }

  // Starts `processes` busy loops in node-i's noisy cgroup.
  function startNoise(index, { processes = 2 } = {}) {
    ensure(index);
    const enter = CONTROLLERS.map((c) => `echo $$ > ${dir(c, `node-${index}`, 'noisy', 'cgroup.procs')}`).join(' && ');
    const children = Array.from({ length: processes }, () => spawn('sh', ['-c', `${enter} && exec sh -c 'while :; do :; done'`], { stdio: 'ignore' }));
    for (const child of children) { running.add(child); child.once('exit', () => running.delete(child)); }
    noise.set(index, [...(noise.get(index) ?? []), ...children]);
  }

  function stopNoise(index) {
    for (const child of noise.get(index) ?? []) child.kill('SIGKILL');
    noise.delete(index);
  }

  // Cumulative CPU time in ns: of the whole node (server and neighbours) and of the server's pod alone.
  function usage(index) {
    const read = (...parts) => Number(readFileSync(dir('cpuacct', `node-${index}`, ...parts, 'cpuacct.usage'), 'utf8'));
    return { nodeNs: read(), podNs: read('pod') };
  }

  // After the servers are gone: remove the cgroups (a cgroup with processes left in it stays).
  function destroy() {
    for (const index of [...noise.keys()]) stopNoise(index);
    for (const c of CONTROLLERS) {
      const base = dir(c);
      if (!existsSync(base)) continue;
      for (const node of readdir(base)) {
        for (const sub of ['pod', 'noisy']) tryRmdir(join(base, node, sub));
        tryRmdir(join(base, node));
      }
      tryRmdir(base);
    }
  }

  return { coresPerNode, enterPodScript, startNoise, stopNoise, usage, destroy };
}

function readdir(path) {
  return readdirSync(path, { withFileTypes: true }).filter((d) => d.isDirectory() && d.name.startsWith('node-')).map((d) => d.name);
}

function tryRmdir(path) {
  try { rmdirSync(path); } catch { /* still has processes, or already gone */ }
}
