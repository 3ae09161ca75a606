// The command line of rethinkdb-manager (also run as the kubectl plugin `kubectl rethinkdb`), read without I/O:
// parseCommandLine(argv, env) returns what to do, or throws a UsageError that the entry point turns into exit code 2.

import { parseArgs } from 'node:util';

// Exit codes scripts can rely on; the README's "Command-line client" section lists the same.
export const EXIT_CODES = Object.freeze({
  OK: 0, MANAGER_ERROR: 1, USAGE: 2, UNREACHABLE: 3, NOT_FULLY_DONE: 4,
});

export const DEFAULT_URL = 'http://localhost:8080';
// Above the manager's default action deadline (ACTION_DEADLINE_SECONDS, 20 s), so that a drain can answer in time.
export const DEFAULT_TIMEOUT_SECONDS = 60;
// When --deadline is given without --timeout, the client waits this much longer than the deadline.
const DEADLINE_MARGIN_SECONDS = 10;

export const USAGE = `Usage: rethinkdb-manager COMMAND [ARGS] [FLAGS]
       kubectl rethinkdb COMMAND [ARGS] [FLAGS]

Commands:
  status                        shard map per table (configured and acting primary, replicas, readiness),
                                then servers (role, primaries, replicas, pod, node, draining mark)
  drain SERVER                  demote every primary on SERVER and mark it draining
                                (POST /v1/actions/move-primaries-from-server)
  release SERVER                clear SERVER's draining mark and rebalance primaries
                                (POST /v1/actions/release-server)
  plan drain|release SERVER     what drain or release would do (?dryRun=true); nothing changes
  operations [ID]               recent operations, or one operation with its steps
  events                        audit records, newest first
  help                          this text

Flags:
  --url URL                     the manager (env RETHINKDB_MANAGER_URL; default ${DEFAULT_URL})
  --token TOKEN                 bearer token (env RETHINKDB_MANAGER_TOKEN; prefer the variable: a flag shows in ps)
  --output table|json, -o       human-readable tables (default) or the manager's JSON as it answered
  --timeout SECONDS             give up waiting for the answer after this long (default ${DEFAULT_TIMEOUT_SECONDS},
                                or --deadline + ${DEADLINE_MARGIN_SECONDS})
  --reason TEXT                 drain, release, plan: why (logged and audited by the manager)
  --deadline SECONDS            drain, release, plan: the action's deadline (the manager's default otherwise)
  --no-rebalance                release, plan release: only clear the draining mark
  --limit N                     events: at most N records (1-500; the manager's default is 100)
  --help, -h                    this text
  --version                     the client's version

Exit codes:
  0  success (an action completed, had nothing to do, or was planned)
  1  the manager answered an error (4xx/5xx; its code and message go to stderr) or something not the manager's JSON
  2  usage error (unknown command or flag, missing or extra argument, bad value)
  3  the manager could not be reached, or did not answer within --timeout
  4  an action answered but did not fully succeed (outcome partial, timed_out or failed)
`;

export class UsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UsageError';
  }
}

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  output: { type: 'string', short: 'o' },
  timeout: { type: 'string' },
  reason: { type: 'string' },
  deadline: { type: 'string' },
  'no-rebalance': { type: 'boolean' },
  limit: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
};
const GLOBAL_OPTIONS = ['url', 'token', 'output', 'timeout', 'help', 'version'];

// Each command: its positional arguments (a trailing '?' marks an optional one) and the flags it accepts.
const COMMANDS = {
  status: { args: [], options: [] },
  drain: { args: ['SERVER'], options: ['reason', 'deadline'] },
  release: { args: ['SERVER'], options: ['reason', 'deadline', 'no-rebalance'] },
  plan: { args: ['ACTION', 'SERVER'], options: ['reason', 'deadline', 'no-rebalance'] },
  operations: { args: ['ID?'], options: [] },
  events: { args: [], options: ['limit'] },
  help: { args: [], options: [] },
};
const PLANNABLE = ['drain', 'release'];

export function parseCommandLine(argv, env = {}) {
  const { values, positionals } = parseTokens(argv);
  if (values.help) return { command: 'help' };
  if (values.version) return { command: 'version' };
  const [command, ...args] = positionals;
  if (command === undefined) throw new UsageError('no command given');
  const spec = COMMANDS[command];
  if (!spec) throw new UsageError(`unknown command "${command}" (commands: ${Object.keys(COMMANDS).join(', ')})`);
  checkOptionsFor(command, spec, values);
  checkArgumentCount(command, spec, args);
  if (command === 'help') return { command: 'help' };
  const parsed = commandArguments(command, args, values);
  return {
    command, ...parsed, connection: connectionOf(values, env, parsed.action?.deadlineSeconds), output: outputOf(values.output),
  };
}

function parseTokens(argv) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    if (typeof err.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS')) throw new UsageError(err.message);
    throw err;
  }
}

function checkOptionsFor(command, spec, values) {
  const accepted = new Set([...GLOBAL_OPTIONS, ...spec.options]);
  const refused = Object.keys(values).filter((name) => !accepted.has(name));
  if (refused.length > 0) {
    const allowed = spec.options.length > 0 ? spec.options.map((o) => `--${o}`).join(', ') : 'only the global flags';
    throw new UsageError(`${command} does not take ${refused.map((o) => `--${o}`).join(', ')} (it takes ${allowed})`);
  }
}

function checkArgumentCount(command, spec, args) {
  const required = spec.args.filter((a) => !a.endsWith('?'));
  const shape = spec.args.map((a) => (a.endsWith('?') ? `[${a.slice(0, -1)}]` : a)).join(' ');
  if (args.length < required.length) throw new UsageError(`${command} needs ${required.slice(args.length).join(' ')} (usage: ${command} ${shape})`);
  if (args.length > spec.args.length) throw new UsageError(`${command} takes ${spec.args.length === 0 ? 'no arguments' : shape}, got: ${args.join(' ')}`);
}

function commandArguments(command, args, values) {
  switch (command) {
    case 'drain':
    case 'release':
      return { action: actionOf(command, args[0], values), dryRun: false };
    case 'plan':
      if (!PLANNABLE.includes(args[0])) throw new UsageError(`plan takes ${PLANNABLE.join(' or ')}, got "${args[0]}"`);
      if (args[0] === 'drain' && values['no-rebalance']) throw new UsageError('--no-rebalance goes with plan release only');
      return { action: actionOf(args[0], args[1], values), dryRun: true };
    case 'operations':
      return args[0] === undefined ? {} : { id: args[0] };
    case 'events':
      return values.limit === undefined ? {} : { limit: integerFlag('limit', values.limit, 1, 500) };
    default:
      return {};
  }
}

// The action's name as the CLI says it and the fields of its body; the request is made in requests.js.
function actionOf(name, server, values) {
  return {
    name,
    server,
    ...(values.reason !== undefined ? { reason: values.reason } : {}),
    ...(values.deadline !== undefined ? { deadlineSeconds: integerFlag('deadline', values.deadline, 1, 86400) } : {}),
    ...(values['no-rebalance'] ? { rebalance: false } : {}),
  };
}

function connectionOf(values, env, deadlineSeconds) {
  const url = values.url ?? nonEmpty(env.RETHINKDB_MANAGER_URL) ?? DEFAULT_URL;
  if (!/^https?:\/\/[^/]/.test(url) || !URL.canParse(url)) throw new UsageError(`--url must be an http:// or https:// URL, got "${url}"`);
  const token = values.token ?? nonEmpty(env.RETHINKDB_MANAGER_TOKEN) ?? null;
  if (values.timeout !== undefined) return { url, token, timeoutMs: secondsFlag('timeout', values.timeout) * 1000 };
  const waitSeconds = deadlineSeconds === undefined ? 0 : deadlineSeconds + DEADLINE_MARGIN_SECONDS;
  return { url, token, timeoutMs: Math.max(DEFAULT_TIMEOUT_SECONDS, waitSeconds) * 1000 };
}

function outputOf(output = 'table') {
  if (output !== 'table' && output !== 'json') throw new UsageError(`--output must be table or json, got "${output}"`);
  return output;
}

function integerFlag(name, text, min, max) {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < min || n > max) throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got "${text}"`);
  return n;
}

function secondsFlag(name, text) {
  const n = Number(text);
  if (text.trim() === '' || !Number.isFinite(n) || n <= 0 || n > 86400) throw new UsageError(`--${name} must be a number of seconds above 0 (at most 86400), got "${text}"`);
  return n;
}

function nonEmpty(value) {
  return typeof value === 'string' && value !== '' ? value : undefined;
}
