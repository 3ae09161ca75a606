// The command-line client, wired from its parts: parse the arguments, look up a SERVER or POD argument, make the
// request, print the answer (and, with --wait, follow the operation it started), pick the exit code. The entry point
// (bin/rethinkdb-manager.js) passes the real fetch, streams and environment.

import {
  EXIT_CODES, USAGE, UsageError, parseCommandLine,
} from './arguments.js';
import { formatAnswer, formatOperation } from './format.js';
import { UnreachableError, createManagerClient } from './http-client.js';
import { LookupError, resolveSubject } from './names.js';
import {
  CLUSTER_REQUEST, errorLine, exitCodeFor, operationRequest, requestFor, shortfall, withSubject,
} from './requests.js';

// How often --wait asks for the operation.
export const WAIT_POLL_INTERVAL_MS = 2000;

const defaultSleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

// out and err: functions that write a string (process.stdout.write in the entry point, an array in tests).
// sleep(ms): the pause between two polls of --wait (tests pass one that does not wait).
export function createCli({
  fetch, out, err, version, sleep = defaultSleep, pollIntervalMs = WAIT_POLL_INTERVAL_MS,
}) {
  const say = (line) => err(`rethinkdb-manager: ${line}\n`);

  async function run(argv, env) {
    let parsed;
    try {
      parsed = parseCommandLine(argv, env);
    } catch (e) {
      if (!(e instanceof UsageError)) throw e;
      // One line and a hint; the whole usage is for --help.
      say(`${e.message} (try --help)`);
      return EXIT_CODES.USAGE;
    }
    if (parsed.command === 'help') { out(USAGE); return EXIT_CODES.OK; }
    if (parsed.command === 'version') { out(`rethinkdb-manager ${version}\n`); return EXIT_CODES.OK; }
    if (parsed.notice) say(parsed.notice);
    const client = createManagerClient({ fetch, ...parsed.connection });
    try {
      return await call(client, parsed);
    } catch (e) {
      if (!(e instanceof UnreachableError)) throw e;
      say(e.message);
      return EXIT_CODES.UNREACHABLE;
    }
  }

  async function call(client, parsed) {
    let command = parsed;
    if (parsed.subject) {
      const resolved = await resolve(client, parsed.subject);
      if (resolved.code !== undefined) return resolved.code;
      command = withSubject(parsed, resolved.name);
    }
    const answer = await client.request(requestFor(command));
    const code = exitCodeFor(command, answer);
    if (code === EXIT_CODES.MANAGER_ERROR) return managerError(command, answer);
    const operationId = command.wait ? startedOperation(command, answer.body) : null;
    // With --wait, stdout gets the operation as it finished; before it, in a table, what the action answered. With
    // --output json that is one JSON document: the operation's.
    if (!(operationId && (command.output === 'json' || command.command === 'operations'))) print(command, answer);
    if (operationId) return follow(client, command, operationId);
    if (code === EXIT_CODES.NOT_FULLY_DONE) say(shortfall(command, answer.body));
    return code;
  }

  // { name }: the server (or pod) a SERVER (or POD) argument names, from GET /v1/cluster; or { code }: the exit code
  // when it names none, or the cluster could not be read.
  async function resolve(client, subject) {
    const answer = await client.request(CLUSTER_REQUEST);
    if (answer.status >= 400 || answer.body === null || typeof answer.body !== 'object') {
      say(`cannot look up ${subject.kind} "${subject.name}": ${errorLine(answer)}`);
      return { code: EXIT_CODES.MANAGER_ERROR };
    }
    try {
      const { name, line } = resolveSubject(subject, answer.body);
      if (line) say(line);
      return { name };
    } catch (e) {
      if (!(e instanceof LookupError)) throw e;
      say(`error: ${e.code}: ${e.message}`);
      return { code: EXIT_CODES.MANAGER_ERROR };
    }
  }

  function managerError(command, answer) {
    // With --output json a script still gets the manager's error body on stdout, as it answered.
    if (command.output === 'json' && answer.body !== null) out(ensureNewline(answer.text));
    say(errorLine(answer));
    return EXIT_CODES.MANAGER_ERROR;
  }

  function print(command, answer) {
    out(command.output === 'json' ? ensureNewline(answer.text) : `${formatAnswer(command, answer.body).join('\n')}\n`);
  }

  // --wait: GET the operation until it no longer runs, then print it; its status gives the exit code.
  async function follow(client, command, id) {
    const asOperation = { command: 'operations', id, output: command.output };
    say(`waiting for operation ${id} to finish (interrupting stops the wait, not the operation)`);
    for (;;) {
      const answer = await client.request(operationRequest(id));
      if (exitCodeFor(asOperation, answer) === EXIT_CODES.MANAGER_ERROR) return managerError(asOperation, answer);
      if (answer.body.status !== 'running') {
        out(command.output === 'json' ? ensureNewline(answer.text) : `${command.command === 'operations' ? '' : '\n'}${formatOperation(answer.body).join('\n')}\n`);
        const short = shortfall(asOperation, answer.body);
        if (short) say(short);
        return short ? EXIT_CODES.NOT_FULLY_DONE : EXIT_CODES.OK;
      }
      await sleep(pollIntervalMs);
    }
  }

  return { run };
}

// The operation a --wait follows: the one named (operations ID), or the one an action's 202 started.
function startedOperation(command, body) {
  if (command.command === 'operations') return body.status === 'running' ? command.id : null;
  return body.operation?.id ?? null;
}

function ensureNewline(text) {
  return text.endsWith('\n') ? text : `${text}\n`;
}
