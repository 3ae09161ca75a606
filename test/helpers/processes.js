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
