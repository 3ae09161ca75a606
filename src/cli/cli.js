// The command-line client, wired from its parts: parse the arguments, make one request, print the answer, pick
// the exit code. The entry point (bin/rethinkdb-manager.js) passes the real fetch, streams and environment.

import {
  EXIT_CODES, USAGE, UsageError, parseCommandLine,
} from './arguments.js';
import { formatAnswer } from './format.js';
import { UnreachableError, createManagerClient } from './http-client.js';
import { errorLine, exitCodeFor, requestFor } from './requests.js';

// out and err: functions that write a string (process.stdout.write in the entry point, an array in tests).
export function createCli({
  fetch, out, err, version,
}) {
  async function run(argv, env) {
    let parsed;
    try {
      parsed = parseCommandLine(argv, env);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      err(`rethinkdb-manager: ${e.message}\n\n${USAGE}`);
      return EXIT_CODES.USAGE;
    }
    if (parsed.command === 'help') { out(USAGE); return EXIT_CODES.OK; }
    if (parsed.command === 'version') { out(`rethinkdb-manager ${version}\n`); return EXIT_CODES.OK; }
    return call(parsed);
  }

  async function call(parsed) {
    const client = createManagerClient({ fetch, ...parsed.connection });
    let answer;
    try {
      answer = await client.request(requestFor(parsed));
    } catch (e) {
      if (!(e instanceof UnreachableError)) throw e;
      err(`rethinkdb-manager: ${e.message}\n`);
      return EXIT_CODES.UNREACHABLE;
    }
    const code = exitCodeFor(parsed, answer);
    if (code === EXIT_CODES.MANAGER_ERROR) {
      // With --output json a script still gets the manager's error body on stdout, as it answered.
      if (parsed.output === 'json' && answer.body !== null) out(ensureNewline(answer.text));
      err(`rethinkdb-manager: ${errorLine(answer)}\n`);
      return code;
    }
    out(parsed.output === 'json' ? ensureNewline(answer.text) : `${formatAnswer(parsed, answer.body).join('\n')}\n`);
    if (code === EXIT_CODES.NOT_FULLY_DONE) err(`rethinkdb-manager: the action did not fully succeed: outcome ${answer.body.outcome}\n`);
    return code;
  }

  return { run };
}

function ensureNewline(text) {
  return text.endsWith('\n') ? text : `${text}\n`;
}
