// Network namespaces for the lab cluster (root only): a bridge on the host and one namespace per server, each with
// its own address from 198.18.0.0/15 (RFC 2544, benchmarking), like pods on a pod network. A "cut" drops every
// packet to and from one namespace without resetting any connection: a node that vanishes from the network.

import { execFileSync } from 'node:child_process';

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

  function cleanup() {
    for (const line of tryList()) {
      if (line.startsWith(`rk${labIndex}-`)) tryRun('ip', ['netns', 'del', line]);
    }
    tryRun('ip', ['link', 'del', bridge]);
  }

  function tryList() {
    try { return ip('netns', 'list').split('\n').map((l) => l.split(' ')[0]).filter(Boolean); } catch { return []; }
  }

  return {
    addHost, cut, restore, partition, heal, destroy: cleanup, bridge, subnet,
  };
}
