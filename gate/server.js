// The query gate's entry point (npm run gate): configuration from the environment, the gate on GATE_PORT, and
// /livez, /readyz, /metrics and the manager's holds (/v1/holds, src/admin.js) on GATE_METRICS_PORT. SIGTERM turns
// /readyz false and keeps serving for GATE_SHUTDOWN_DELAY_SECONDS, then stops accepting, lets queries in flight finish
// within GATE_DRAIN_SECONDS, and exits; a second SIGTERM or SIGINT skips what is left of the delay.

import { createServer } from 'node:http';
import pino from 'pino';
import { loadGateConfig } from './src/config.js';
import { createAdminHandler } from './src/admin.js';
import { createGate } from './src/gate.js';
import { createGateMetrics } from './src/metrics.js';

const clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => { setTimeout(resolve, ms); }) };

async function main() {
  let config;
  try {
    config = loadGateConfig(process.env);
  } catch (err) {
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }
  // ISO times, as the manager logs them.
  const logger = pino({ level: config.logLevel, base: { service: 'rethinkdb-query-gate' }, timestamp: pino.stdTimeFunctions.isoTime });
  for (const warning of config.warnings) logger.warn(warning);
  const metrics = createGateMetrics();
  const gate = createGate({ config, metrics, clock, logger });
  const { port } = await gate.start().catch((err) => { throw portError(err, 'GATE_PORT', config.port); });
  const probes = createServer(createAdminHandler({ gate, metrics, tokenFile: config.hold.tokenFile, logger }));
  // A request must arrive whole within 10 s (Node's default is 300 s): a slow caller holds no connection for long.
  probes.requestTimeout = 10000;
  probes.headersTimeout = 10000;
  await new Promise((resolve, reject) => {
    const onError = (err) => reject(portError(err, 'GATE_METRICS_PORT', config.metricsPort));
    probes.once('error', onError);
    probes.listen(config.metricsPort, config.host, () => { probes.off('error', onError); resolve(); });
  });
  logger.info({ port, metricsPort: probes.address().port, upstream: `${config.upstream.host}:${config.upstream.port}`, retryBudgetMs: config.retry.budgetMs, holds: config.hold.tokenFile ? 'on' : 'off (GATE_HOLD_TOKEN_FILE is not set)' }, 'query gate listening');
  let leaving = false;
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    if (!leaving && config.shutdownDelaySeconds > 0) {
      leaving = true;
      logger.info({ signal, shutdownDelaySeconds: config.shutdownDelaySeconds }, 'leaving: not ready, still serving, so that the Service stops sending new connections here');
      await gate.leave();
      if (stopping) return;
    }
    stopping = true;
    logger.info({ signal, drainSeconds: config.drainSeconds }, 'stopping: no new connections; each connection closes once nothing of it is in flight');
    const result = await gate.stop();
    probes.close();
    logger.info(result, 'query gate stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

// A port that cannot be bound, said with the key that chose it.
function portError(err, key, port) {
  if (err.code === 'EADDRINUSE') return new Error(`${key}=${port}: the port is in use by another process (EADDRINUSE); stop it or set ${key} to a free port`);
  if (err.code === 'EACCES') return new Error(`${key}=${port}: not allowed to listen there (EACCES); ports below 1024 need privileges, set ${key}`);
  return err;
}

main().catch((err) => {
  process.stderr.write(`query gate failed to start: ${err.message}\n`);
  process.exit(1);
});
