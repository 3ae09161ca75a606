// Starts one real RethinkDB 2.4 server on loopback for a test file, on free ports, in a fresh data directory.
// The binary comes from RETHINKDB_BINARY, else ../shared/rethinkdb/rethinkdb beside the repository.

import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import r from 'rethinkdb';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const outputTailChars = 4000;

export function rethinkdbBinary(env = process.env) {
  return env.RETHINKDB_BINARY ?? resolve(repoRoot, '..', 'shared', 'rethinkdb', 'rethinkdb');
}

export function checkRethinkdbBinary(binary = rethinkdbBinary()) {
  if (!existsSync(binary)) {
    throw new Error(`RethinkDB server binary not found at ${binary}. Set RETHINKDB_BINARY to a RethinkDB 2.4 `
      + 'server binary (see ../shared/rethinkdb/README.md); these tests need a real server and do not skip.');
  }
}

// Ports the kernel hands out for loopback listeners; held open together so that they differ.
async function freeLoopbackPorts(count) {
  const servers = await Promise.all(Array.from({ length: count }, () => new Promise((ok, fail) => {
    const server = createServer();
    server.on('error', fail);
    server.listen(0, '127.0.0.1', () => ok(server));
  })));
  const ports = servers.map((s) => s.address().port);
  await Promise.all(servers.map((s) => new Promise((ok) => { s.close(ok); })));
  return ports;
}

// setpriv's parent-death signal makes the server die with this process, even if the jest worker is killed.
function spawnServer(binary, args) {
  const useSetpriv = !spawnSync('setpriv', ['--version']).error;
  const child = useSetpriv
    ? spawn('setpriv', ['--pdeathsig', 'KILL', binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk) => { output = (output + chunk).slice(-outputTailChars); };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  let exited = null;
  const exit = new Promise((ok) => {
    child.on('exit', (code, signal) => { exited = { code, signal }; ok(); });
    child.on('error', (err) => { exited = { error: err.message }; ok(); });
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  return {
    outputTail: () => output,
    exited: () => exited,
    // SIGTERM is a clean shutdown (1-2 s); SIGKILL after 5 s.
    async kill() {
      process.off('exit', killOnExit);
      if (!exited) child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exit;
      clearTimeout(timer);
    },
  };
}

async function waitForDriverPort(proc, port, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.exited()) throw new Error(`rethinkdb exited (${JSON.stringify(proc.exited())}) before it was ready:\n${proc.outputTail()}`);
    try {
      const conn = await r.connect({ host: '127.0.0.1', port, timeout: 2 });
      await conn.close();
      return;
    } catch {
      if (Date.now() > deadline) throw new Error(`rethinkdb not ready within ${timeoutMs} ms:\n${proc.outputTail()}`);
      await new Promise((ok) => { setTimeout(ok, 100); });
    }
  }
}

// `serve` refuses a directory that `create` has not prepared.
function createDataDirectory(binary, dataDir, serverName) {
  const result = spawnSync(binary, ['create', '-d', dataDir, '-n', serverName], { encoding: 'utf8', timeout: 30000 });
  if (result.status !== 0) {
    throw new Error(`rethinkdb create failed (${result.error?.message ?? `exit ${result.status}`}):\n${result.stdout}${result.stderr}`);
  }
}

// Resolves with { host, driverPort, clusterPort, stop } once the driver port accepts connections.
export async function startRethinkdbServer({
  binary = rethinkdbBinary(), serverName = 'rethinkdb_0', startTimeoutMs = 30000, cacheSizeMb = 256,
} = {}) {
  checkRethinkdbBinary(binary);
  const dir = mkdtempSync(join(tmpdir(), 'rethinkdb-test-'));
  let proc = null;
  const stop = async () => {
    if (proc) await proc.kill();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const dataDir = join(dir, 'data');
    createDataDirectory(binary, dataDir, serverName);
    const [driverPort, clusterPort] = await freeLoopbackPorts(2);
    proc = spawnServer(binary, ['serve', '--no-http-admin', '--bind', '127.0.0.1', '--driver-port', String(driverPort),
      '--cluster-port', String(clusterPort), '--cache-size', String(cacheSizeMb), '-d', dataDir]);
    await waitForDriverPort(proc, driverPort, startTimeoutMs);
    return { host: '127.0.0.1', driverPort, clusterPort, outputTail: () => proc.outputTail(), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
