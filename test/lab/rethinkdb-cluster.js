// A real RethinkDB cluster on this machine, for the tests and the evaluation: N servers started from the binary,
// each with its own hostname (rethinkdb-i, like a StatefulSet pod), on loopback ports or one per network namespace.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import r from 'rethinkdb';
import { createCpuNodes } from './cpu-nodes.js';
import { createNetworkLab } from './netns.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const DEFAULT_BINARY = resolve(repoRoot, '../shared/rethinkdb/rethinkdb');

// The server binary: RETHINKDB_BINARY, else the copy in ../shared/rethinkdb. Throws a message saying how to provide one.
export function resolveBinary(env = process.env) {
  const path = env.RETHINKDB_BINARY || DEFAULT_BINARY;
  if (!existsSync(path)) {
    throw new Error(`no RethinkDB 2.4 server binary at ${path}: set RETHINKDB_BINARY to the path of a rethinkdb 2.4 `
      + 'server binary (the project expects ../shared/rethinkdb/rethinkdb beside the repository)');
  }
  return path;
}

const sleep = (ms) => new Promise((res) => { setTimeout(res, ms); });

async function freePort() {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', rej);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => res(port)); });
  });
}

const live = new Set();
process.once('exit', () => { for (const child of live) { try { child.kill('SIGKILL'); } catch { /* gone */ } } });

// serverArgs: more arguments for every `rethinkdb serve` (e.g. ['--cores', '1']); canonicalAddresses(server): the
// `--canonical-address` values of one server (its host and port are server.host and server.clusterPort).
// network: 'loopback' (127.0.0.1, distinct ports) or 'netns' (root: one namespace per server on a bridge,
// standard ports, addresses from 198.18.0.0/15 and silent network cuts).
export function createRethinkDbCluster({
  binary = resolveBinary(), size = 4, network = 'loopback', labIndex = 0, cacheSizeMb = 128, workDir = null, log = () => {}, coresPerNode = null, isolateNodes = [],
  serverArgs = [], canonicalAddresses = null,
} = {}) {
  if (process.getuid?.() !== 0) {
    throw new Error('the lab cluster needs root: each server gets its own hostname (unshare --uts), like a pod, and with '
      + "network: 'netns' its own network namespace");
  }
  // coresPerNode: each server in its own CPU "node" (cgroup with that quota), where a noisy neighbour can run;
  // isolateNodes: nodes with a CPU of their own, this process and the others on the rest (./cpu-nodes.js). Made
  // first: it may refuse (too few CPUs), and then no network or directory is left behind.
  const cpu = coresPerNode ? createCpuNodes({ name: `rethinkdb-lab-${labIndex}-${process.pid}`, coresPerNode, isolate: isolateNodes }) : null;
  cpu?.enterShared();
  const baseDir = workDir ?? mkdtempSync(join(tmpdir(), 'rethinkdb-lab-'));
  const lab = network === 'netns' ? createNetworkLab({ labIndex }) : null;
  const servers = [];
  const proxies = [];

  async function describe(index) {
    const name = `rethinkdb_${index}`;
    const hostname = `rethinkdb-${index}`;
    if (lab) {
      const { host, netns } = lab.addHost(index);
      return { index, name, hostname, tag: `node_${index}`, host, netns, driverPort: 28015, clusterPort: 29015, dir: join(baseDir, hostname), child: null };
    }
    return {
      index, name, hostname, tag: `node_${index}`, host: '127.0.0.1', netns: null,
      driverPort: await freePort(), clusterPort: await freePort(), dir: join(baseDir, hostname), child: null,
    };
  }

  function joinArgs(except) {
    return servers.filter((s) => s.index !== except.index && s.child).flatMap((s) => ['--join', `${s.host}:${s.clusterPort}`]);
  }

  // Starts (or restarts, on its data directory) server `s`; resolves once its driver port answers.
  async function launch(s, { join: joinTo = true, retryOnPortClash = true } = {}) {
    if (!existsSync(s.dir)) {
      mkdirSync(dirname(s.dir), { recursive: true });
      await run(binary, ['create', '-d', s.dir, '-n', s.name, '-t', s.tag]);
    }
    const serve = [binary, 'serve', '-d', s.dir, '--bind', s.host, '--driver-port', String(s.driverPort), '--cluster-port', String(s.clusterPort),
      '--no-http-admin', '--cache-size', String(cacheSizeMb), ...serverArgs,
      ...(canonicalAddresses ? canonicalAddresses(s).flatMap((a) => ['--canonical-address', a]) : []), ...(joinTo ? joinArgs(s) : [])];
    spawnAs(s, placeArgv(s, serve));
    log({ server: s.name, host: s.host, driverPort: s.driverPort }, 'rethinkdb server starting');
    try {
      await waitForDriverPort(s, 30000);
    } catch (err) {
      // Loopback ports are picked free and released before the server binds them, so another process can take
      // one first: that server starts again once on new ports.
      if (!retryOnPortClash || s.netns || !/already in use/i.test(logTail(s))) throw new Error(`${err.message}\n${logTail(s)}`);
      await s.exited;
      Object.assign(s, { driverPort: await freePort(), clusterPort: await freePort() });
      await launch(s, { join: joinTo, retryOnPortClash: false });
    }
  }

  // Starts argv as the lab's process `s` (a server or a proxy), its output in <hostname>.log; s.exited resolves when
  // it ends, and it is killed if this process exits first.
  function spawnAs(s, argv) {
    const out = openSync(join(baseDir, `${s.hostname}.log`), 'a');
    const child = spawn(argv[0], argv.slice(1), { stdio: ['ignore', out, out] });
    s.child = child;
    live.add(child);
    s.exited = new Promise((res) => child.once('exit', (code, signal) => { live.delete(child); if (s.child === child) s.child = null; res({ code, signal }); }));
  }

  // The command line that runs `command` as process `s` of the lab: its own UTS namespace (so that
  // server_status.network.hostname is the pod-like name), its network namespace, its CPU node.
  function placeArgv(s, command) {
    const inner = ['unshare', '--uts', 'sh', '-c', `hostname ${s.hostname} && exec "$@"`, 'sh', ...command];
    const placed = s.netns ? ['ip', 'netns', 'exec', s.netns, ...inner] : inner;
    // Into its CPU node first, from here: `ip netns exec` mounts a /sys of its own, without the cgroup hierarchies.
    return cpu && !s.proxy ? ['sh', '-c', `${cpu.enterPodScript(s.index)} && exec "$@"`, 'sh', ...placed] : placed;
  }

  function logTail(s) {
    const path = join(baseDir, `${s.hostname}.log`);
    return existsSync(path) ? `${s.hostname}.log: ${readFileSync(path, 'utf8').slice(-600)}` : '';
  }

  async function waitForDriverPort(s, timeoutMs) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      if (!s.child) throw new Error(`${s.name} exited while starting; see ${join(baseDir, `${s.hostname}.log`)}`);
      try {
        const conn = await r.connect({ host: s.host, port: s.driverPort, timeout: 2 });
        // Another process may hold the port (then this server exits): only this server's answer counts.
        const answer = await conn.server().finally(() => conn.close().catch(() => {}));
        if (s.proxy ? answer.proxy === true : answer.name === s.name) return;
        throw new Error(`port ${s.driverPort} answers as ${answer.name ?? 'a proxy'}`);
      } catch (err) {
        if (Date.now() > until) throw new Error(`${s.name} did not accept driver connections within ${timeoutMs} ms: ${err.message}`);
        await sleep(100);
      }
    }
  }

  // Until `expected` servers see each other (server_status as read through a live server).
  async function waitForServers(expected, timeoutMs = 30000) {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const count = await withConnection((c) => r.db('rethinkdb').table('server_status').count().run(c)).catch(() => -1);
      if (count === expected) return;
      if (Date.now() > until) throw new Error(`expected ${expected} connected servers, saw ${count} after ${timeoutMs} ms`);
      await sleep(100);
    }
  }

  async function start() {
    for (let i = 0; i < size; i += 1) servers.push(await describe(i));
    for (const s of servers) await launch(s);
    await waitForServers(size);
    return api;
  }

  // A connection to a running server (the first one, unless `index` names one).
  async function connect(index = null) {
    const s = index === null ? servers.find((x) => x.child) : servers[index];
    if (!s?.child) throw new Error('no running server to connect to');
    return r.connect({ host: s.host, port: s.driverPort, timeout: 5 });
  }

  async function withConnection(fn, index = null) {
    const conn = await connect(index);
    try { return await fn(conn); } finally { await conn.close().catch(() => {}); }
  }

  // Creates tables and fills them: [{ db, table, shards, replicas, docs, docBytes }]; waits until all are ready.
  async function createTables(specs) {
    return withConnection(async (c) => {
      for (const spec of specs) {
        const dbs = await r.dbList().run(c);
        if (!dbs.includes(spec.db)) await r.dbCreate(spec.db).run(c);
        await r.db(spec.db).tableCreate(spec.table, { shards: spec.shards, replicas: spec.replicas }).run(c);
        await r.db(spec.db).table(spec.table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
        await fill(c, spec);
        // Split points from the data: the default ones suit uuid keys and would put every "userN" key in one shard.
        await r.db(spec.db).table(spec.table).rebalance().run(c);
        await r.db(spec.db).table(spec.table).wait({ waitFor: 'all_replicas_ready', timeout: 60 }).run(c);
      }
    });
  }

  async function fill(c, { db, table, docs = 0, docBytes = 100 }) {
    const pad = 'x'.repeat(docBytes);
    for (let from = 0; from < docs; from += 1000) {
      const batch = [];
      for (let i = from; i < Math.min(docs, from + 1000); i += 1) batch.push({ id: `user${i}`, field0: pad });
      await r.db(db).table(table).insert(batch, { conflict: 'replace', durability: 'soft' }).run(c);
    }
  }

  // The shard index of each string key, from the table's split points (_debug_table_status: btree keys, "S" + the
  // string for string keys, compared bytewise).
  async function shardOfKeys(db, table, keys) {
    const splits = await withConnection(async (c) => {
      const dbId = (await r.db('rethinkdb').table('db_config').filter({ name: db }).nth(0).run(c)).id;
      const [status] = await r.db('rethinkdb').table('_debug_table_status').filter({ name: table, db: dbId }).coerceTo('array').run(c);
      return status.shard_scheme.split_points.map((p) => Buffer.from(p.data ?? p));
    });
    return keys.map((key) => {
      const encoded = Buffer.from(`S${key}`);
      const index = splits.findIndex((split) => Buffer.compare(encoded, split) < 0);
      return index === -1 ? splits.length : index;
    });
  }

  // A query router (`rethinkdb proxy --join ...`): it holds no data and is no replica, and parses and routes the
  // queries of the clients that enter through it, like a proxy pod on a node of its own. It runs outside the CPU
  // nodes (no neighbour shares its CPU), in network namespace `index` with netns. It is not one of `servers`.
  // Returns { name, host, driverPort }.
  async function addProxy({ index = 20 + proxies.length } = {}) {
    const hostname = `rethinkdb-proxy-${proxies.length}`;
    const placement = lab ? { ...pick(lab.addHost(index), 'host', 'netns'), driverPort: 28015, clusterPort: 29015 }
      : { host: '127.0.0.1', netns: null, driverPort: await freePort(), clusterPort: await freePort() };
    const p = { index, name: hostname, hostname, proxy: true, child: null, ...placement };
    spawnAs(p, placeArgv(p, [binary, 'proxy', '--bind', p.host, '--driver-port', String(p.driverPort), '--cluster-port', String(p.clusterPort),
      '--no-http-admin', '--log-file', join(baseDir, `${hostname}.server.log`), ...joinArgs(p)]));
    proxies.push(p);
    await waitForDriverPort(p, 30000);
    return { name: p.name, host: p.host, driverPort: p.driverPort };
  }

  // SIGTERM (clean stop) or SIGKILL (crash); resolves when the process is gone.
  async function stopServer(index, signal = 'SIGTERM') {
    const s = servers[index];
    if (!s.child) return { alreadyStopped: true };
    const { exited } = s;
    s.child.kill(signal);
    return exited;
  }

  // Sends a signal and returns at once: SIGSTOP freezes a server (it keeps its connections, answers nothing), SIGCONT
  // thaws it.
  function signalServer(index, signal) {
    const s = servers[index];
    if (!s.child) throw new Error(`${s.name} is not running`);
    s.child.kill(signal);
  }

  // Starts a stopped server again on its own data directory (the same server returns).
  async function restartServer(index) {
    const s = servers[index];
    if (s.child) throw new Error(`${s.name} is running`);
    await launch(s);
  }

  // A new server (fresh data directory) joins the cluster; returns its index.
  async function addServer() {
    const s = await describe(servers.length);
    servers.push(s);
    await launch(s);
    return s.index;
  }

  // Wipes a stopped server's data: it comes back as a new server with a new id (a replacement pod).
  function wipeServer(index) {
    const s = servers[index];
    if (s.child) throw new Error(`${s.name} is running`);
    rmSync(s.dir, { recursive: true, force: true });
  }

  function cutNetwork(index) { requireLab('cutNetwork').cut(servers[index].index); }
  // Server `index` cut off from every other server and proxy of the lab, not from the host's side (clients entering
  // there, gates, the manager).
  function partitionServer(index) {
    const peers = [...servers, ...proxies].filter((s) => s !== servers[index]).map((s) => s.index);
    requireLab('partitionServer').partition(servers[index].index, peers);
  }
  function healPartition(index) { requireLab('healPartition').heal(servers[index].index); }
  function restoreNetwork(index) { requireLab('restoreNetwork').restore(servers[index].index); }
  // A neighbour saturating server `index`'s link (./netns.js, congest), and its end (resolves with the bytes it sent).
  const congestNetwork = (index, options) => requireLab('congestNetwork').congest(servers[index].index, options);
  const uncongestNetwork = (index) => requireLab('uncongestNetwork').uncongest(servers[index].index);
  function requireLab(what) {
    if (!lab) throw new Error(`${what} needs network: 'netns' (a namespace per server)`);
    return lab;
  }

  async function destroy() {
    await Promise.all([...servers, ...proxies].map(async (s) => {
      if (!s.child) return;
      const { exited } = s;
      s.child.kill('SIGKILL');
      await exited;
    }));
    lab?.destroy();
    await cpu?.destroy();
    if (!workDir) rmSync(baseDir, { recursive: true, force: true });
  }

  const api = {
    start, connect, withConnection, createTables, shardOfKeys, addProxy, stopServer, signalServer, restartServer, addServer, wipeServer, cutNetwork, restoreNetwork, partitionServer, healPartition,
    congestNetwork, uncongestNetwork, waitForServers, destroy, servers, baseDir, network, cpu, pidOf: (i) => servers[i].child?.pid ?? null,
    running: (i) => Boolean(servers[i].child),
  };
  return api;
}

const pick = (o, ...keys) => Object.fromEntries(keys.map((k) => [k, o[k]]));

function run(cmd, args) {
  return new Promise((res, rej) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d) => { err += d; });
    child.on('error', rej);
    child.on('exit', (code) => (code === 0 ? res() : rej(new Error(`${cmd} ${args.join(' ')} failed (${code}): ${err}`))));
  });
}
