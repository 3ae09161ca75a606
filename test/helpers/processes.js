// Child processes and loopback ports for the tests that run real servers (etcd, kube-apiserver, the manager itself).

import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:net';

const stderrTailChars = 4000;

// A child that dies with this process: setpriv sets the parent-death signal, so even a killed jest worker leaves
// nothing behind. Keeps the tail of stderr for error messages; onStdout gets stdout's chunks (else it is ignored).
// kill(signal) sends `signal` (SIGTERM by default) and SIGKILL after graceMs; it resolves with how the child exited.
export function startProcess(name, bin, args, { env = process.env, cwd = undefined, onStdout = null, graceMs = 5000 } = {}) {
  const useSetpriv = !spawnSync('setpriv', ['--version']).error;
  const options = { env, cwd, stdio: ['ignore', onStdout ? 'pipe' : 'ignore', 'pipe'] };
  const child = useSetpriv ? spawn('setpriv', ['--pdeathsig', 'KILL', bin, ...args], options) : spawn(bin, args, options);
  let stderr = '';
  let exited = null;
  child.stderr.on('data', (chunk) => { stderr = (stderr + chunk).slice(-stderrTailChars); });
  if (onStdout) child.stdout.on('data', onStdout);
  const exit = new Promise((resolve) => {
    child.on('exit', (code, signal) => { exited = { code, signal }; resolve(exited); });
    child.on('error', (err) => { exited = { code: null, signal: null, error: err.message }; resolve(exited); });
  });
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  return {
    name,
    stderrTail: () => stderr,
    exited: () => exited,
    async kill(signal = 'SIGTERM') {
      process.off('exit', killOnExit);
      if (!exited) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exit;
      clearTimeout(timer);
      return result;
    },
  };
}

// A port picked free is released before the process binds it, so another process may take it first. Runs
// start(port) on a fresh free port until it succeeds, or until `attempts` tries, while retryable(err) says the port
// may have been the cause.
export async function onFreshPort(start, { attempts = 3, retryable }) {
  for (let attempt = 1; ; attempt += 1) {
    const [port] = await freeLoopbackPorts(1);
    try {
      return await start(port);
    } catch (err) {
      if (attempt >= attempts || !retryable(err)) throw err;
    }
  }
}

// Ports the kernel hands out for loopback listeners; held open together so that they differ.
export async function freeLoopbackPorts(count) {
  const servers = await Promise.all(Array.from({ length: count }, () => new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  })));
  const ports = servers.map((s) => s.address().port);
  await Promise.all(servers.map((s) => new Promise((resolve) => { s.close(resolve); })));
  return ports;
}
