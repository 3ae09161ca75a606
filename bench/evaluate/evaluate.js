// `npm run evaluate`: the paper's Section IV on real RethinkDB servers started from the binary. Each scenario runs
// with and without the manager, paired and repeated, the order interleaved; prints a table of medians and ratios,
// writes SVG figures and a JSON record. Options: --scenarios a,b --runs N --rate OPS --keys N --out DIR --network.

import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { KUBE_SCENARIOS, runOnKubeLab } from './kube-lab-run.js';
import { runOnce } from './lab-run.js';
import {
  ARMS, compareAllArms, compareArms, figurePanels, formatArmsTable, formatRolloutTable, formatTable, rolloutRows, runFigures,
} from './report.js';
import { SCENARIOS } from './scenarios.js';
import { renderFigure } from './svg.js';

const RUN_TIMEOUT_SECONDS = 180;

function options() {
  const { values } = parseArgs({
    options: {
      scenarios: { type: 'string', default: 'planned-stop,prestop-then-cut,hotspot-proxy,long-hotspot-crash' },
      runs: { type: 'string', default: '3' },
      rate: { type: 'string', default: '200' },
      keys: { type: 'string', default: '20000' },
      seed: { type: 'string', default: '1' },
      out: { type: 'string', default: 'evaluation' },
      network: { type: 'string', default: process.getuid?.() === 0 ? 'netns' : 'loopback' },
      'manager-env': { type: 'string', default: '' },
      'node-cpus': { type: 'string', default: 'isolated' },
      arms: { type: 'string', default: 'none,manager' },
      lab: { type: 'string', default: 'process' },
      client: { type: 'string', default: 'plain' },
      help: { type: 'boolean', default: false },
    },
  });
  if (values.help) {
    process.stdout.write(`usage: npm run evaluate -- [--scenarios ${Object.keys(SCENARIOS).join(',')}] [--runs 3] [--rate 200] `
      + '[--keys 20000] [--seed 1] [--out evaluation] [--network netns|loopback] [--manager-env K=V,K=V] [--node-cpus isolated|shared] '
      + `[--arms ${ARMS.join(',')}] [--lab process|kube] [--client plain|resilient]\n`
      + '  --client resilient: the clients reconnect and send again as examples/clients/resilient-connection.js does\n'
      + `  --lab kube: on the real Kubernetes lab (npm run lab:up), scenarios ${Object.keys(KUBE_SCENARIOS).join(', ')}\n`);
    process.exit(0);
  }
  if (!['process', 'kube'].includes(values.lab)) throw new Error(`--lab is process or kube, not "${values.lab}"`);
  if (!['plain', 'resilient'].includes(values.client)) throw new Error(`--client is plain or resilient, not "${values.client}"`);
  const known = values.lab === 'kube' ? KUBE_SCENARIOS : SCENARIOS;
  const names = values.lab === 'kube' && values.scenarios === 'planned-stop,prestop-then-cut,hotspot-proxy,long-hotspot-crash'
    ? Object.keys(KUBE_SCENARIOS) : values.scenarios.split(',');
  const scenarios = names.map((name) => {
    if (!known[name]) throw new Error(`unknown scenario "${name}" on the ${values.lab} lab (known: ${Object.keys(known).join(', ')})`);
    return known[name];
  });
  if (!['isolated', 'shared'].includes(values['node-cpus'])) throw new Error(`--node-cpus is isolated or shared, not "${values['node-cpus']}"`);
  // Said before the first run, not when the first scenario with CPU nodes is reached.
  if (values['node-cpus'] === 'isolated' && availableParallelism() < 2) {
    throw new Error(`--node-cpus isolated gives the hot node a CPU of its own and needs 2 CPUs; this machine has ${availableParallelism()} (use --node-cpus shared)`);
  }
  const arms = values.arms.split(',').filter(Boolean);
  for (const arm of arms) if (!ARMS.includes(arm)) throw new Error(`unknown arm "${arm}" (known: ${ARMS.join(', ')})`);
  const managerEnv = Object.fromEntries(values['manager-env'].split(',').filter(Boolean).map((kv) => kv.split('=')));
  return {
    scenarios, runs: Number(values.runs), rate: Number(values.rate), keyCount: Number(values.keys), seed: Number(values.seed),
    out: resolve(values.out), network: values.network, managerEnv, nodeCpus: values['node-cpus'], arms, lab: values.lab, client: values.client,
  };
}

// Pair i runs every arm with seed + i; which arm goes first rotates, so drift over time hits all alike (two arms
// alternate).
function schedule(scenarios, runs, armList = ['none', 'manager']) {
  const plan = [];
  for (let i = 0; i < runs; i += 1) {
    for (const scenario of scenarios) {
      const arms = armList.map((_, k) => armList[(k + i) % armList.length]);
      for (const arm of arms) plan.push({ scenario, arm, pair: i });
    }
  }
  return plan;
}

async function main() {
  const opts = options();
  mkdirSync(opts.out, { recursive: true });
  const plan = schedule(opts.scenarios.filter((s) => !s.needs || s.needs === opts.network), opts.runs, opts.arms);
  const figures = [];
  const firstRuns = {};
  const started = Date.now();
  for (const [index, step] of plan.entries()) {
    const label = `[${index + 1}/${plan.length}] ${step.scenario.name} ${step.arm} pair ${step.pair + 1}`;
    process.stderr.write(`${label}: running (${Math.round((Date.now() - started) / 1000)} s elapsed)\n`);
    const log = (fields, msg) => process.stderr.write(`  ${label}: ${msg} ${JSON.stringify(fields)}\n`);
    // A run that hangs (a server that never answers) ends the evaluation rather than stalling it forever.
    const watchdog = setTimeout(() => {
      process.stderr.write(`${label}: no result within ${RUN_TIMEOUT_SECONDS} s; stopping (the servers are killed on exit)\n`);
      process.exit(2);
    }, (step.scenario.durationSeconds + RUN_TIMEOUT_SECONDS) * 1000);
    const run = await (opts.lab === 'kube' ? runOnKubeLab : runOnce)(step.scenario, step.arm, { ...opts, seed: opts.seed + step.pair, log });
    clearTimeout(watchdog);
    const f = { ...runFigures(run), pair: step.pair, layout: run.layout, examples: run.examples };
    figures.push(f);
    process.stderr.write(`${label}: ${f.failed} failed of ${f.attempted}, p99 ${f.p99Ms?.toFixed(1)} ms ${JSON.stringify(f.failedByKind)} by phase ${f.failedAfterEvent.map((p) => `${p.after}: ${p.failed}`).join(', ')} ${f.phases.map((ph) => `${ph.name}: ${ph.seconds?.toFixed(1) ?? '-'} s, p99 ${ph.p99Ms?.toFixed(1) ?? '-'} ms (max ${ph.maxMs?.toFixed(0) ?? '-'}) ${JSON.stringify(ph.p99ByKind)}, ${ph.failed ?? '-'} failed; `).join('')}slowest ${f.slowest.map((o) => `${o.ms} ms ${o.kind}${o.ok ? '' : ` ${o.errorKind}`} ${o.after ? `${o.after.byS} s after ${o.after.event}` : `at ${o.atS} s`}`).join(', ')}; ${JSON.stringify(run.notes)}\n`);
    firstRuns[step.scenario.name] ??= {};
    firstRuns[step.scenario.name][step.arm] ??= run;
  }
  const rows = compareArms(figures);
  const armRows = compareAllArms(figures);
  // The manager-against-none table where both ran; every arm's figures always.
  const rollouts = rolloutRows(figures);
  const table = [
    ...(opts.arms.includes('none') && opts.arms.includes('manager') ? [formatTable(rows)] : []), formatArmsTable(armRows),
    ...(rollouts.length > 0 ? [formatRolloutTable(rollouts)] : []),
  ].join('\n\n');
  process.stdout.write(`\n${table}\n`);
  for (const [name, runs] of Object.entries(firstRuns)) {
    const svg = renderFigure({ title: `${(opts.lab === 'kube' ? KUBE_SCENARIOS : SCENARIOS)[name].title} (first pair)`, panels: figurePanels(runs), xLabel: 'seconds' });
    writeFileSync(join(opts.out, `${name}.svg`), svg);
  }
  const record = {
    at: new Date().toISOString(), options: { ...opts, scenarios: opts.scenarios.map((s) => s.name) }, rows, arms: armRows, runs: figures,
  };
  writeFileSync(join(opts.out, 'evaluation.json'), `${JSON.stringify(record, null, 1)}\n`);
  writeFileSync(join(opts.out, 'evaluation.md'), `${table}\n`);
  process.stderr.write(`wrote ${opts.out}/evaluation.json, evaluation.md and one SVG per scenario\n`);
}

main().catch((err) => { process.stderr.write(`evaluate failed: ${err.stack ?? err.message}\n`); process.exit(1); });
