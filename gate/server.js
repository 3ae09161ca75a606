// The query gate's entry point (npm run gate): configuration from the environment, the gate on GATE_PORT, and
// /livez, /readyz and /metrics on GATE_METRICS_PORT; SIGTERM stops accepting, lets queries in flight finish within
// GATE_DRAIN_SECONDS, then exits.

import { createServer } from 'node:http';
import pino from 'pino';
import { loadGateConfig } from './src/config.js';
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
  const logger = pino({ level: config.logLevel, base: { service: 'rethinkdb-query-gate' } });
  const metrics = createGateMetrics();
  const gate = createGate({ config, metrics, clock, logger });
  const { port } = await gate.start();
  const probes = createServer(async (req, res) => {
    if (req.url === '/livez') { res.end('ok\n'); return; }
    if (req.url === '/readyz') { res.statusCode = gate.ready() ? 200 : 503; res.end(gate.ready() ? 'ready\n' : 'draining\n'); return; }
    if (req.url === '/metrics') { res.setHeader('content-type', metrics.registry.contentType); res.end(await metrics.registry.metrics()); return; }
    res.statusCode = 404;
    res.end('not found\n');
  });
  await new Promise((resolve, reject) => {
    probes.once('error', reject);
    probes.listen(config.metricsPort, config.host, () => { probes.off('error', reject); resolve(); });
  });
  logger.info({ port, metricsPort: probes.address().port, upstream: `${config.upstream.host}:${config.upstream.port}`, retryBudgetMs: config.retry.budgetMs }, 'query gate listening');
  let stopping = false;
  const stop = async (signal) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'stopping: no new connections; finishing the queries in flight');
    const result = await gate.stop();
    probes.close();
    logger.info(result, 'query gate stopped');
    process.exit(0);
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err) => {
  process.stderr.write(`query gate failed to start: ${err.message}\n`);
  process.exit(1);
});
