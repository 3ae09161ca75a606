// Manager replicas as real processes (node src/server.js by default, or the image's bundle): what a leader-election test
// kills with SIGKILL or cuts off from the API server (through test/lab/tcp-relay.js), and a kubeconfig file for it.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onFreshPort, startProcess } from './processes.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

// A kubeconfig file (JSON is YAML) for a server URL, its CA and a bearer token.
export function writeKubeconfig(dir, name, { server, ca, token }) {
  const file = join(dir, `${name}.kubeconfig`);
  writeFileSync(file, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server, 'certificate-authority-data': Buffer.from(ca).toString('base64') } }],
    users: [{ name, user: { token } }],
    contexts: [{ name, context: { cluster: 'test', user: name } }],
    'current-context': name,
  }), { mode: 0o600 });
  return file;
}

// node src/server.js with `env` (on top of a minimal environment), its JSON log lines kept. Resolves once /livez answers.
// args and cwd: another entry point, such as the image's bundle (node dist/server.mjs in its folder). The port is
// picked free and released before the manager binds it, so another process may take it first: a manager that exits
// with EADDRINUSE is started again on another port (twice at most).
export async function startManagerProcess(options) {
  return onFreshPort((port) => startOnce({ ...options, port }), { retryable: (err) => err.code === 'EADDRINUSE' });
}

async function startOnce({
  name, env, args = [join(root, 'src', 'server.js')], cwd = root, startTimeoutMs = 30000, port,
}) {
  const fullEnv = {
    PATH: process.env.PATH, HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', POD_NAME: name, ...env,
  };
  const lines = [];
  let partial = '';
  const child = startProcess(name, process.execPath, args, {
    env: fullEnv,
    cwd,
    graceMs: 30000,
    onStdout: (chunk) => {
      const parts = (partial + chunk).split('\n');
      partial = parts.pop();
      for (const line of parts) {
        try { lines.push(JSON.parse(line)); } catch { lines.push({ msg: line }); }
      }
    },
  });
  const url = `http://127.0.0.1:${port}`;
  const started = Date.now();
  for (;;) {
    const ok = await fetch(`${url}/livez`).then((r) => r.ok).catch(() => false);
    if (ok) break;
    // A manager that exited (a start-up error) is not waited for.
    const exited = child.exited();
    if (exited || Date.now() - started > startTimeoutMs) {
      await child.kill('SIGKILL');
      const what = exited ? `exited before /livez answered (${JSON.stringify(exited)})` : `did not answer /livez within ${startTimeoutMs} ms`;
      const error = new Error(`manager ${name} ${what}; stderr: ${child.stderrTail()}; log: ${JSON.stringify(lines.slice(-5))}`);
      if (exited && lines.some((l) => l.code === 'EADDRINUSE')) error.code = 'EADDRINUSE';
      throw error;
    }
    await new Promise((resolve) => { setTimeout(resolve, 100); });
  }
  return {
    name,
    url,
    logs: () => lines,
    stderr: () => child.stderrTail(),
    kill: (signal = 'SIGKILL') => child.kill(signal),
    async json(path, { method = 'GET', body } = {}) {
      const res = await fetch(`${url}${path}`, {
        method, headers: body ? { 'content-type': 'application/json' } : {}, body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      let parsed = null;
      try { parsed = JSON.parse(text); } catch { parsed = text; }
      return { status: res.status, body: parsed, servedBy: res.headers.get('x-rethinkdb-manager-served-by') };
    },
  };
}
