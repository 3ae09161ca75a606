// `npm run scenarios [ID ...]`: replays the paper's scenarios on the sandbox and prints their timelines.
// Each run also writes its steps as JSON to scenario-records/ID.json (or SCENARIO_RECORDS_DIR).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  SCENARIOS, formatTimeline, parseScenarioArgs, runScenario,
} from '../src/sandbox/scenarios.js';

const usage = `usage: npm run scenarios [-- ID ...]   replays the paper's scenarios on the sandbox (all when no ID is given)\n${
  SCENARIOS.map((s) => `  ${s.id}  ${s.title}`).join('\n')}\n`;
const parsed = parseScenarioArgs(process.argv.slice(2));
if (parsed.help) {
  process.stdout.write(usage);
  process.exit(0);
}
if (parsed.error) {
  process.stderr.write(`npm run scenarios: ${parsed.error}\n(npm run scenarios -- --help lists them)\n`);
  process.exit(2);
}
const { ids } = parsed;
const dir = process.env.SCENARIO_RECORDS_DIR ?? 'scenario-records';
mkdirSync(dir, { recursive: true });
for (const id of ids) {
  const result = await runScenario(id);
  process.stdout.write(`${formatTimeline(result)}\n\n`);
  writeFileSync(join(dir, `${id}.json`), `${JSON.stringify(result, null, 2)}\n`);
}
process.stdout.write(`records written to ${dir}/\n`);
