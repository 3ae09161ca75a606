// The entry point (node src/server.js) when it cannot listen: which port and why, and a non-zero exit.

import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { listenFailureMessage } from '../../src/lib/listen-errors.js';

const root = fileURLToPath(new URL('../..', import.meta.url));

function runServer(env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['src/server.js'], { cwd: root, env: { PATH: process.env.PATH, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c) => { out += c; });
    child.stderr.on('data', (c) => { out += c; });
    const killer = setTimeout(() => child.kill('SIGKILL'), 15000);
    child.on('exit', (code, signal) => { clearTimeout(killer); resolve({ code, signal, out }); });
  });
}

describe('node src/server.js', () => {
  test('when its HTTP port is in use, then it says which port and exits 1 (no TypeError)', async () => {
    const holder = createServer();
    await new Promise((resolve) => { holder.listen(0, '127.0.0.1', resolve); });
    const { port } = holder.address();
    try {
      const { code, out } = await runServer({ PORT: String(port), HOST: '127.0.0.1' });
      expect(code).toBe(1);
      const fatal = out.split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((l) => l.level === 60);
      expect(fatal).toMatchObject({ msg: 'cannot listen', code: 'EADDRINUSE', err: `the HTTP port 127.0.0.1:${port} is already in use (another process listens there; set a free port)` });
      expect(out).not.toMatch(/TypeError/);
    } finally {
      holder.close();
    }
  });

  test.each([
    ['EADDRINUSE', /port 0\.0\.0\.0:80 is already in use/],
    ['EACCES', /port 0\.0\.0\.0:80 needs privileges/],
    ['EADDRNOTAVAIL', /address 0\.0\.0\.0:80 is not an address of this host/],
    ['EOTHER', /the HTTP server cannot listen on 0\.0\.0\.0:80: boom/],
  ])('when listening fails with %s, then the message says so', (code, expected) => {
    expect(listenFailureMessage(Object.assign(new Error('boom'), { code }), { what: 'HTTP', host: '0.0.0.0', port: 80 })).toMatch(expected);
  });
});
