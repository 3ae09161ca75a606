// The query gate's hold port (gate/src/admin.js) for tests: the shared token in a file, and the port served on
// 127.0.0.1 for a gate (by default one with no upstream, which holds and releases only).

import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { createAdminHandler } from '../../gate/src/admin.js';
import { createGate } from '../../gate/src/gate.js';
import { createGateMetrics } from '../../gate/src/metrics.js';

export const realClock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };

// A token file holding `content` (written as given: '' makes an empty file); its path.
export function writeTokenFile(content) {
  const path = join(mkdtempSync(join(tmpdir(), 'gate-hold-token-')), 'token');
  writeFileSync(path, content);
  return path;
}

// Serves the hold port of `gate` (a gate with no upstream when none is given). -> { gate, metrics, server, port, close }.
export async function serveHoldPort({
  tokenFile, gate = null, metrics = createGateMetrics(), logger = pino({ level: 'silent' }), clock = realClock,
}) {
  const served = gate ?? createGate({ config: { hold: { maxMs: 5000 } }, metrics, clock, logger });
  const server = createServer(createAdminHandler({ gate: served, metrics, tokenFile, logger }));
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  const close = async () => {
    if (!gate) await served.stop(100).catch(() => {});
    server.closeAllConnections();
    await new Promise((resolve) => { server.close(resolve); });
  };
  return { gate: served, metrics, server, port: server.address().port, close };
}
