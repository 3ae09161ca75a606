// The gate's entry point (gate/server.js) as its own process: what an operator sees when a port is taken, a key is
// misspelt, and when it stops (ISO times, as the manager logs them). No RethinkDB is needed: nothing connects.

import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const SERVER = fileURLToPath(new URL('../../gate/server.js', import.meta.url));
const run = promisify(execFile);

async function busyPort() {
  const srv = createServer();
  await new Promise((resolve) => { srv.listen(0, '127.0.0.1', resolve); });
  return { port: srv.address().port, close: () => new Promise((resolve) => { srv.close(resolve); }) };
}

describe('the gate process', () => {
  test('when GATE_PORT is taken, then it exits 1 saying so with the key to change', async () => {
    const busy = await busyPort();
    try {
      const err = await run(process.execPath, [SERVER], {
        env: { PATH: process.env.PATH, GATE_UPSTREAM: '127.0.0.1:1', GATE_HOST: '127.0.0.1', GATE_PORT: String(busy.port), GATE_METRICS_PORT: '0' },
      }).then(() => null, (e) => e);
      expect(err?.code).toBe(1);
      expect(err.stderr).toContain(`GATE_PORT=${busy.port}: the port is in use by another process (EADDRINUSE); stop it or set GATE_PORT to a free port`);
    } finally {
      await busy.close();
    }
  });

  test('when a key is misspelt, then it starts, warns naming the key meant, logs ISO times, and a SIGTERM stops it', async () => {
    const child = spawn(process.execPath, [SERVER], {
      env: {
        PATH: process.env.PATH, GATE_UPSTREAM: '127.0.0.1:1', GATE_HOST: '127.0.0.1', GATE_PORT: '0', GATE_METRICS_PORT: '0', GATE_RETRY_BUDGET: '5',
      },
    });
    let out = '';
    child.stdout.on('data', (chunk) => { out += chunk; });
    while (!out.includes('query gate listening')) await once(child.stdout, 'data');
    const lines = out.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ level: 40, msg: 'GATE_RETRY_BUDGET is not a gate configuration key (did you mean GATE_RETRY_BUDGET_MS?); it is ignored' });
    expect(lines[0].time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit');
    expect(code).toBe(0);
    expect(out).toContain('query gate stopped');
  });
});
