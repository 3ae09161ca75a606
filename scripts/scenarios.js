// `npm run scenarios [ID ...]`: replays the paper's scenarios on the sandbox and prints their timelines.
// Each run also writes its steps as JSON to scenario-records/ID.json (or SCENARIO_RECORDS_DIR).

import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SCENARIOS, formatTimeline, runScenario } from '../src/sandbox/scenarios.js';

const ids = process.argv.slice(2).length > 0 ? process.argv.slice(2) : SCENARIOS.map((s) => s.id);
const dir = process.env.SCENARIO_RECORDS_DIR ?? 'scenario-records';
mkdirSync(dir, { recursive: true });
for (const id of ids) {
  const result = await runScenario(id);
  process.stdout.write(`${formatTimeline(result)}\n\n`);
  writeFileSync(join(dir, `${id}.json`), `${JSON.stringify(result, null, 2)}\n`);
}
process.stdout.write(`records written to ${dir}/\n`);
