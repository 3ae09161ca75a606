// Why the chart advertises 127.0.0.1 beside each pod's IP (`--canonical-address "$POD_IP" --canonical-address
// 127.0.0.1`), on real 2.4.4 servers in network namespaces. When a server is killed and a connection to its cluster
// port is then accepted and closed before RethinkDB's handshake (a container restarting at the same IP), every peer's
// reconnect loop erases that address as a permanent error; with no address left, the next round fails
// `Guarantee failed: [peer.ips().size() > 0]` (src/rpc/connectivity/cluster.cc:397; auto_reconnect.cc:119-122 erase
// from the loop's copy but test the coroutine's; rethinkdb/rethinkdb#6880) and the peer exits. The loopback address
// is never erased (a connection to it fails, or reaches the peer itself: a temporary error), so the set never empties.

import { spawn } from 'node:child_process';
import { jest } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRethinkDbCluster } from '../lab/rethinkdb-cluster.js';

jest.setTimeout(120000);

let cluster = null;
afterEach(async () => {
  await cluster?.destroy();
  cluster = null;
});

const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// In the killed server's network namespace, on its cluster port: accept each connection and reset it at once, for ms.
async function acceptAndReset(server, ms) {
  const script = [
    'import socket, struct, time',
    's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)',
    `s.bind((${JSON.stringify(server.host)}, ${server.clusterPort})); s.listen(64); s.settimeout(0.1)`,
    `end = time.time() + ${ms / 1000}; n = 0`,
    'while time.time() < end:',
    '    try:',
    '        c, _ = s.accept(); c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)); c.close(); n += 1',
    '    except socket.timeout:',
    '        pass',
    'print(n)',
  ].join('\n');
  const child = spawn('ip', ['netns', 'exec', server.netns, 'python3', '-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  await new Promise((resolve) => { child.on('exit', resolve); });
  return Number(out.trim());
}

async function killThenReset(canonicalAddresses) {
  cluster = createRethinkDbCluster({ size: 3, network: 'netns', labIndex: 10, canonicalAddresses });
  await cluster.start();
  await cluster.stopServer(1, 'SIGKILL');
  // 8 s: the reconnect loop backs off by 1.5x from 50 ms, and once (a full npm test run, 2026-11-28) no attempt
  // reached the address within 3 s, so the test proved nothing and failed its precondition.
  const accepted = await acceptAndReset(cluster.servers[1], 8000);
  expect(accepted).toBeGreaterThan(0);
  // The reconnect loop backs off from 50 ms by 1.5x: its next rounds fall well within this.
  await sleep(15000);
  const log = (i) => readFileSync(join(cluster.baseDir, `rethinkdb-${i}.log`), 'utf8');
  return { running: [0, 2].map((i) => cluster.running(i)), logs: [0, 2].map(log) };
}

describe('a peer\'s reconnect after its address reset a connection', () => {
  test('when each server advertises its IP alone, then the other servers crash (RethinkDB 2.4.4\'s guarantee), which is what the chart avoids', async () => {
    const { running, logs } = await killThenReset((s) => [s.host]);
    expect(running).toEqual([false, false]);
    for (const text of logs) expect(text).toContain('Guarantee failed: [peer.ips().size() > 0]');
  });

  test('when each server also advertises 127.0.0.1, then the others keep running, and the killed server rejoins when it restarts', async () => {
    const { running, logs } = await killThenReset((s) => [s.host, '127.0.0.1']);
    expect(running).toEqual([true, true]);
    for (const text of logs) expect(text).not.toContain('Guarantee failed');
    await cluster.restartServer(1);
    await cluster.waitForServers(3, 30000);
  });
});
