// Network namespaces for the lab cluster (root only): a bridge on the host and one namespace per server, each with
// its own address from 198.18.0.0/15 (RFC 2544, benchmarking), like pods on a pod network. A "cut" drops every
// packet to and from one namespace without resetting any connection: a node that vanishes from the network.

import { execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';

function ip(...args) {
  return execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
}

function tryRun(cmd, args) {
  try { execFileSync(cmd, args, { stdio: 'ignore' }); return true; } catch { return false; }
}

// labIndex separates concurrent labs: bridge rkbrK, subnet 198.18.K.0/24, namespaces rkK-i.
export function createNetworkLab({ labIndex = 0 } = {}) {
  if (process.getuid?.() !== 0) throw new Error("network: 'netns' needs root (ip netns, veth pairs, a bridge)");
  const bridge = `rkbr${labIndex}`;
  const subnet = `198.18.${labIndex}`;
  const hosts = new Map();
  const congested = new Map(); // index -> the neighbour saturating its link (congest)
  cleanup();
  ip('link', 'add', bridge, 'type', 'bridge');
  ip('addr', 'add', `${subnet}.1/24`, 'dev', bridge);
  ip('link', 'set', bridge, 'up');

  function names(index) {
    return { netns: `rk${labIndex}-${index}`, hostSide: `rk${labIndex}h${index}` };
  }

  function addHost(index) {
    const { netns, hostSide } = names(index);
    const host = `${subnet}.${10 + index}`;
    if (!hosts.has(index)) {
      tryRun('ip', ['netns', 'del', netns]);
      // A lab killed a moment ago may leave its veth behind while the kernel is still tearing its namespace down.
      tryRun('ip', ['link', 'del', hostSide]);
      ip('netns', 'add', netns);
      ip('link', 'add', hostSide, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', netns);
      ip('link', 'set', hostSide, 'master', bridge);
      ip('link', 'set', hostSide, 'up');
      ip('-n', netns, 'addr', 'add', `${host}/24`, 'dev', 'eth0');
      ip('-n', netns, 'link', 'set', 'eth0', 'up');
      ip('-n', netns, 'link', 'set', 'lo', 'up');
      ip('-n', netns, 'route', 'add', 'default', 'via', `${subnet}.1`);
      hosts.set(index, { netns, hostSide, host });
    }
    return hosts.get(index);
  }

  // Silently drops all traffic of host `index`, both ways: its veth's host end goes down, so the bridge forwards
  // nothing to it and its own packets go nowhere; no connection is reset (this kernel has no netem qdisc).
  function cut(index) {
    ip('link', 'set', hosts.get(index).hostSide, 'down');
  }

  function restore(index) {
    const { hostSide } = hosts.get(index);
    ip('link', 'set', hostSide, 'up');
    ip('link', 'set', hostSide, 'master', bridge);
  }

  // A partition: host `index` stops hearing from, and reaching, the `peers` (other lab hosts' indexes), silently (its
  // own firewall drops the packets both ways); the host's side (the bridge: clients, gates, the manager) still reaches
  // it. heal() removes the rules.
  function partition(index, peers) {
    const { netns } = hosts.get(index);
    for (const peer of peers) {
      const { host } = hosts.get(peer);
      execFileSync('ip', ['netns', 'exec', netns, 'iptables', '-A', 'INPUT', '-s', host, '-j', 'DROP'], { stdio: 'ignore' });
      execFileSync('ip', ['netns', 'exec', netns, 'iptables', '-A', 'OUTPUT', '-d', host, '-j', 'DROP'], { stdio: 'ignore' });
    }
  }

  function heal(index) {
    const { netns } = hosts.get(index);
    execFileSync('ip', ['netns', 'exec', netns, 'iptables', '-F'], { stdio: 'ignore' });
  }

  // A neighbour that saturates host `index`'s link: the link (its veth, both ends) shaped to `rate` by a token bucket
  // (tbf: this kernel has no netem, fq_codel or sfq), and a process in its namespace sending bulk TCP to a sink on the
  // bridge's address, as a co-located pod uploading would. Measured here at 20mbit: the neighbour reached 17.6 Mbit/s;
  // r.expr(1) to that server went from 0.3 to 10 ms at p50, clients' reads through it from 0.5 to 12 ms. The link
  // alone at 20mbit changes nothing (the lab's load uses 1-2 Mbit/s). Resolves once the sink listens and the sender is
  // started (it connects within a moment).
  async function congest(index, { rate = '20mbit' } = {}) {
    const { netns, hostSide } = hosts.get(index);
    const shape = ['root', 'tbf', 'rate', rate, 'burst', '32kb', 'latency', '200ms'];
    try {
      execFileSync('tc', ['qdisc', 'replace', 'dev', hostSide, ...shape], { stdio: 'ignore' });
      execFileSync('ip', ['netns', 'exec', netns, 'tc', 'qdisc', 'replace', 'dev', 'eth0', ...shape], { stdio: 'ignore' });
    } catch (err) {
      unshape(index);
      throw err;
    }
    let received = 0;
    const sockets = new Set();
    const sink = createServer((socket) => {
      sockets.add(socket);
      socket.on('data', (chunk) => { received += chunk.length; });
      socket.on('error', () => {});
      socket.on('close', () => sockets.delete(socket));
    });
    await new Promise((res) => { sink.listen(0, `${subnet}.1`, res); });
    const { port } = sink.address();
    const flood = `const s=require('net').connect(${port},'${subnet}.1');const b=Buffer.alloc(65536);const w=()=>{while(s.write(b));};s.on('drain',w);s.on('connect',w);s.on('error',()=>process.exit(0));`;
    const sender = spawn('ip', ['netns', 'exec', netns, process.execPath, '-e', flood], { stdio: 'ignore' });
    congested.set(index, {
      sink, sockets, sender, received: () => received,
    });
  }

  // Stops the neighbour and unshapes the link; resolves with the bytes the sink received.
  async function uncongest(index) {
    const entry = congested.get(index);
    if (!entry) return 0;
    congested.delete(index);
    const exited = entry.sender.exitCode !== null ? Promise.resolve() : new Promise((res) => { entry.sender.once('exit', res); });
    entry.sender.kill('SIGKILL');
    await exited;
    for (const socket of entry.sockets) socket.destroy();
    await new Promise((res) => { entry.sink.close(res); });
    unshape(index);
    return entry.received();
  }

  function unshape(index) {
    const { netns, hostSide } = hosts.get(index);
    tryRun('tc', ['qdisc', 'del', 'dev', hostSide, 'root']);
    tryRun('ip', ['netns', 'exec', netns, 'tc', 'qdisc', 'del', 'dev', 'eth0', 'root']);
  }

  function cleanup() {
    for (const entry of congested.values()) {
      entry.sender.kill('SIGKILL');
      for (const socket of entry.sockets) socket.destroy();
      entry.sink.close();
    }
    congested.clear();
    for (const line of tryList()) {
      if (line.startsWith(`rk${labIndex}-`)) tryRun('ip', ['netns', 'del', line]);
    }
    tryRun('ip', ['link', 'del', bridge]);
  }

  function tryList() {
    try { return ip('netns', 'list').split('\n').map((l) => l.split(' ')[0]).filter(Boolean); } catch { return []; }
  }

  return {
    addHost, cut, restore, partition, heal, congest, uncongest, destroy: cleanup, bridge, subnet,
  };
}
