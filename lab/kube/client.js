// A RethinkDB client for the Kubernetes lab, run in a pod (test/kube-lab/ starts it from the manager's image with
// this repository mounted read-only): the evaluation's open-loop YCSB load (bench/evaluate/load-generator.js)
// through the shipped client entry, the Service rethinkdb-client, so through the proxies and their query gates.
// It loads the table, runs until the file STOP_FILE exists (or MAX_SECONDS pass), and prints one JSON line, the
// summary: ops attempted, ok, failed by error kind, latency percentiles and the slowest op, the first message of each
// error kind. Environment: CLIENT_HOST (rethinkdb-client), CLIENT_PORT (28015), RETHINKDB_PASSWORD, DB, TABLE,
// RATE (ops/s, 200), KEYS (1000), MAX_SECONDS (600), STOP_FILE (/tmp/stop), RECORDS (1: print every op too),
// CLIENT_HOSTS (host:port,... instead of CLIENT_HOST: several entries, e.g. the proxies' own driver ports),
// CLIENT_MODE (plain, or resilient: each connection reconnects and sends again as examples/clients/ do).

import { existsSync } from 'node:fs';
import r from 'rethinkdb';
import { createLoadGenerator } from '../../bench/evaluate/load-generator.js';
import { summarize } from '../../bench/evaluate/stats.js';

const env = (name, fallback) => process.env[name] ?? fallback;
const credentials = { user: 'admin', password: env('RETHINKDB_PASSWORD', '') };
const entries = process.env.CLIENT_HOSTS
  ? process.env.CLIENT_HOSTS.split(',').map((hostPort, i) => {
    const [host, port] = hostPort.split(':');
    return { name: `entry-${i}`, host, port: Number(port ?? 28015), ...credentials };
  })
  : [{ name: 'client', host: env('CLIENT_HOST', 'rethinkdb-client'), port: Number(env('CLIENT_PORT', '28015')), ...credentials }];
const db = env('DB', 'lab');
const table = env('TABLE', 'usertable');
const keyCount = Number(env('KEYS', '1000'));
const maxMs = Number(env('MAX_SECONDS', '600')) * 1000;
const stopFile = env('STOP_FILE', '/tmp/stop');
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

const load = createLoadGenerator({
  r, entries, db, table, rateOpsPerSec: Number(env('RATE', '200')), readFraction: 0.5, keyCount,
  connectionsPerEntry: 4, opTimeoutMs: 5000, seed: 7, countWrites: true, client: env('CLIENT_MODE', 'plain'),
});
// The documents first, once the table takes writes: a shard left without a primary by what ran before (seen after a
// rolling restart) would otherwise end the client before it measures anything. Up to LOAD_WAIT_SECONDS (120).
const loadDeadline = Date.now() + Number(env('LOAD_WAIT_SECONDS', '120')) * 1000;
for (let attempt = 1; ; attempt += 1) {
  try {
    await load.load(keyCount);
    break;
  } catch (err) {
    if (Date.now() > loadDeadline) throw err;
    console.log(JSON.stringify({ loadRetry: attempt, error: String(err.msg ?? err.message) }));
    await sleep(1000);
  }
}
const { t0 } = await load.start();
// t0Wall: the wall clock at t0, so that whoever reads the records can place its own events (npm run evaluate -- --lab kube).
console.log(JSON.stringify({ started: true, t0, t0Wall: Date.now() }));
const began = Date.now();
while (!existsSync(stopFile) && Date.now() - began < maxMs) await sleep(250);
const {
  records, examples, reconnects, counters,
} = await load.stop();
const all = summarize(records, { t0 });
const lines = [JSON.stringify({
  summary: {
    attempted: all.attempted, ok: all.ok, failed: all.failed, failedByKind: all.failedByKind, latencyMs: all.latency,
    examples, reconnects, counters, seconds: Math.round((Date.now() - began) / 1000),
  },
})];
// RECORDS=1: every op, 80 a line (under 4 KiB: longer writes reached kubectl logs cut into lines of their own):
// [startMs, endMs, ok, kind, errorKind], times since t0.
if (env('RECORDS', '0') === '1') {
  const rows = records.map((rec) => [+(rec.startMs - t0).toFixed(1), rec.endMs === null ? null : +(rec.endMs - t0).toFixed(1), rec.ok ? 1 : 0, rec.kind, rec.errorKind]);
  for (let i = 0; i < rows.length; i += 80) lines.push(JSON.stringify({ records: rows.slice(i, i + 80) }));
}
lines.push(JSON.stringify({ done: true }));
// Exits once stdout has taken it all: process.exit right after console.log can drop what a pipe has not yet taken
// (it lost the records' tail and the done line of a 15,000-op run).
process.stdout.write(`${lines.join('\n')}\n`, () => process.exit(0));
