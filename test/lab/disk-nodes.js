// Disk "nodes" for the lab cluster (cgroup v1 blkio, root). Every server's data directory is on the machine's one
// disk, so a neighbour that writes to it slows all the servers alike, which is not a node's neighbour. Here a node's
// disk is that disk held to `writeIops` write operations a second (blkio.throttle.write_iops_device), shared by the
// server's processes and a neighbour's `dd` that writes with O_DIRECT and O_DSYNC in a loop: as a co-located pod shares a node's
// disk. The server's own fdatasync writes are issued from its threads, which v1 counts against its group (writeback
// by the kernel's flusher would not be: RethinkDB syncs its writes itself). Measured on this machine: the group did
// about 650 write operations a second under the lab's load, exactly 200 under a throttle of 200; clients' writes to
// that server's shards went from 4.5 ms to 482 ms at p99 with the neighbour, reads did not move.

import { spawn } from 'node:child_process';
import {
  existsSync, mkdirSync, readFileSync, readdirSync, readlinkSync, rmSync, rmdirSync, statSync, writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const BLKIO = '/sys/fs/cgroup/blkio';

// Neighbours still running: killed (the shell and its dd) when this process exits, however it exits (a watchdog's
// process.exit too). They are in this process's group, so a Ctrl-C reaches them as well.
const running = new Set();
const killTree = (pid) => { for (const p of processTree(pid).reverse()) { try { process.kill(p, 'SIGKILL'); } catch { /* gone */ } } };
process.once('exit', () => { for (const child of running) killTree(child.pid); });

export function diskNodesAvailable() {
  return existsSync(join(BLKIO, 'cgroup.procs')) && existsSync(join(BLKIO, 'blkio.throttle.write_iops_device'));
}

// The whole disk under a directory, as MAJOR:MINOR (a partition's disk: throttles apply to whole disks).
export function diskOf(directory) {
  const { dev } = statSync(directory);
  const major = Math.floor(dev / 256) % 4096;
  const minor = (dev % 256) + (Math.floor(dev / 1048576) % 4096) * 256;
  if (major === 0) throw new Error(`${directory} is on no block device (${major}:${minor}: overlay, tmpfs?): no disk to throttle`);
  const sys = `/sys/dev/block/${major}:${minor}`;
  if (!existsSync(join(sys, 'partition'))) return `${major}:${minor}`;
  return readFileSync(join(dirname(resolve(dirname(sys), readlinkSync(sys))), 'dev'), 'utf8').trim();
}

// The process and every process it forked, by /proc's parent links (RethinkDB forks a child of its own at start).
export function processTree(pid) {
  const parents = new Map();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch { /* gone meanwhile */ }
  }
  const tree = [pid];
  for (let i = 0; i < tree.length; i += 1) for (const [child, parent] of parents) if (parent === tree[i]) tree.push(child);
  return tree;
}

// name: this lab's cgroup folder. Each node-i is a group of its own only while its disk is throttled.
export function createDiskNodes({ name }) {
  if (!diskNodesAvailable()) throw new Error('disk nodes need cgroup v1 blkio with throttling (root, /sys/fs/cgroup/blkio)');
  const base = join(BLKIO, name);
  const nodes = new Map(); // index -> { group, device, pids, neighbour, file }

  // Throttles node-i's disk to writeIops and starts the neighbour: pids (the server's) and the neighbour share it.
  // directory: where the server's data is (the neighbour writes its file there, on the same disk).
  function throttle(index, { pids, directory, writeIops }) {
    if (nodes.has(index)) throw new Error(`node-${index}'s disk is throttled already`);
    const device = diskOf(directory);
    const group = join(base, `node-${index}`);
    mkdirSync(group, { recursive: true });
    try {
      writeFileSync(join(group, 'blkio.throttle.write_iops_device'), `${device} ${writeIops}`);
    } catch (err) {
      tryRmdir(group);
      throw err;
    }
    for (const pid of pids) {
      try { writeFileSync(join(group, 'cgroup.procs'), String(pid)); } catch { /* exited */ }
    }
    const file = join(directory, 'disk-neighbour');
    const neighbour = spawn('sh', ['-c', `echo $$ > ${group}/cgroup.procs && while :; do dd if=/dev/zero of=${file} bs=4k count=2000 oflag=direct,dsync 2>/dev/null; done`], {
      stdio: 'ignore',
    });
    running.add(neighbour);
    neighbour.once('exit', () => running.delete(neighbour));
    nodes.set(index, {
      group, device, pids, neighbour, file,
    });
  }

  // Ends node-i's throttle and neighbour: the server's processes go back to the machine's group.
  async function release(index) {
    const node = nodes.get(index);
    if (!node) return;
    nodes.delete(index);
    const exited = node.neighbour.exitCode !== null ? Promise.resolve() : new Promise((res) => { node.neighbour.once('exit', res); });
    killTree(node.neighbour.pid);
    await exited;
    try { writeFileSync(join(node.group, 'blkio.throttle.write_iops_device'), `${node.device} 0`); } catch { /* gone */ }
    // What is left in the group (the server's processes, a dd that outlived its shell) goes back to the machine's.
    let left = [];
    try { left = readFileSync(join(node.group, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean); } catch { /* gone */ }
    for (const pid of left) {
      try { writeFileSync(join(BLKIO, 'cgroup.procs'), pid); } catch { /* exited */ }
    }
    tryRmdir(node.group);
    rmSync(node.file, { force: true });
  }

  // Write operations node-i's group has done so far (blkio.throttle.io_serviced), or null when it is not throttled.
  function writes(index) {
    const node = nodes.get(index);
    if (!node) return null;
    const line = readFileSync(join(node.group, 'blkio.throttle.io_serviced'), 'utf8').split('\n').find((l) => l.startsWith(`${node.device} Write `));
    return line ? Number(line.split(' ')[2]) : 0;
  }

  async function destroy() {
    for (const index of [...nodes.keys()]) await release(index);
    tryRmdir(base);
  }

  return {
    throttle, release, writes, destroy, throttled: () => [...nodes.keys()],
  };
}

function tryRmdir(path) {
  try { rmdirSync(path); } catch { /* still has processes, or already gone */ }
}
