// The command line of rethinkdb-manager (also run as the kubectl plugin `kubectl rethinkdb`), read without I/O:
// parseCommandLine(argv, env) returns what to do, or throws a UsageError that the entry point turns into exit code 2.

import { parseArgs } from 'node:util';

// Exit codes scripts can rely on; docs/cli.md lists the same.
export const EXIT_CODES = Object.freeze({
  OK: 0, MANAGER_ERROR: 1, USAGE: 2, UNREACHABLE: 3, NOT_FULLY_DONE: 4,
});

export const DEFAULT_URL = 'http://localhost:8080';
// Above the manager's default action deadline (ACTION_DEADLINE_SECONDS, 20 s), so that a demotion can answer in time.
export const DEFAULT_TIMEOUT_SECONDS = 60;
// When --deadline is given without --timeout, the client waits this much longer than the deadline.
const DEADLINE_MARGIN_SECONDS = 10;

export const USAGE = `Usage: rethinkdb-manager COMMAND [ARGS] [FLAGS]
       kubectl rethinkdb COMMAND [ARGS] [FLAGS]

SERVER is a RethinkDB server (rethinkdb_1) or the pod that runs it (rethinkdb-1); POD is a pod or its server.
The client looks the name up in GET /v1/cluster first, and says on stderr what a pod or server name resolved to.

Reading:
  status                        shard map per table (configured and acting primary, replicas, readiness),
                                then servers (role, primaries, replicas, pod, node, draining mark)
  operations [ID] [--wait]      recent operations, newest first; or one operation with its steps
                                (--wait: poll it until it finishes)
  events [--limit N]            audit records, newest first

Acting on a server (each also takes --reason, --deadline and --dry-run):
  move-primaries-from-server SERVER
                                hand every primary on SERVER to other servers and mark it draining; its
                                replicas stay (POST /v1/actions/move-primaries-from-server)
  release SERVER [--no-rebalance]
                                clear SERVER's draining mark and rebalance primaries
                                (POST /v1/actions/release-server)
  migrate-replicas-off SERVER [--wait]
                                move every replica off SERVER, one shard at a time, after demoting its
                                primaries; starts an operation (POST /v1/actions/migrate-replicas-off)
  add-server SERVER [--table DB.TABLE]... [--grow] [--wait]
                                give SERVER a fair share of replicas, then of primaries; starts an
                                operation (POST /v1/actions/add-server)
  plan ACTION TARGET [FLAGS]    ACTION TARGET --dry-run: the plan, nothing changes
  drain SERVER                  deprecated name of move-primaries-from-server (it never evicted pods)

Acting on a node (also takes --reason, --deadline and --dry-run):
  move-primaries-from-node NODE hand every primary of the RethinkDB pods on NODE to servers on other nodes
                                (POST /v1/actions/move-primaries-from-node)

Perf warnings:
  perf-warning raise POD|--node NODE [--duration SECONDS] [--reason TEXT]
                                demote the pod's (or the node's pods') primaries and keep new ones away;
                                a long warning also migrates replicas off (POST /v1/hooks/perfwarning)
  perf-warning end POD|--node NODE
                                end the warning now; primaries come back (DELETE /v1/hooks/perfwarning)

  help                          this text

Flags:
  --url URL                     the manager (env RETHINKDB_MANAGER_URL; default ${DEFAULT_URL})
  --token TOKEN                 bearer token (env RETHINKDB_MANAGER_TOKEN; prefer the variable: a flag shows in ps)
  --output table|json, -o       human-readable tables (default) or the manager's JSON as it answered
  --timeout SECONDS             give up waiting for an answer after this long (default ${DEFAULT_TIMEOUT_SECONDS},
                                or --deadline + ${DEADLINE_MARGIN_SECONDS}); with --wait, for each request
  --reason TEXT                 actions, perf-warning raise: why (logged and audited by the manager)
  --deadline SECONDS            actions: the action's deadline (the manager's default otherwise)
  --dry-run                     actions: the plan (?dryRun=true); nothing changes
  --wait                        migrate-replicas-off, add-server, operations ID: poll the operation until it
                                finishes, then print it; the exit code is its outcome's
  --no-rebalance                release: only clear the draining mark
  --table DB.TABLE              add-server: only this table (repeat the flag for more)
  --grow                        add-server: add the server as an extra replica instead of taking replicas
  --node NODE                   perf-warning: every RethinkDB pod on NODE instead of one POD
  --duration SECONDS            perf-warning raise: how long it lasts (1-604800; a long one migrates replicas)
  --limit N                     events: at most N records (1-500; the manager's default is 100)
  --help, -h                    this text
  --version                     the client's version

Exit codes:
  0  success (an action completed, had nothing to do, was planned or started; an operation succeeded or runs)
  1  the manager answered an error (4xx/5xx; its code and message go to stderr) or something not the manager's
     JSON; or SERVER/POD is neither a server nor a pod the manager lists (SERVER_NOT_FOUND, POD_NOT_FOUND)
  2  usage error (unknown command or flag, missing or extra argument, bad value)
  3  the manager could not be reached, or did not answer within --timeout
  4  an action or operation answered but did not fully succeed (outcome or status partial, timed_out or failed)
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
  'dry-run': { type: 'boolean' },
  wait: { type: 'boolean' },
  'no-rebalance': { type: 'boolean' },
  table: { type: 'string', multiple: true },
  grow: { type: 'boolean' },
  node: { type: 'string' },
  duration: { type: 'string' },
  limit: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean' },
};
const GLOBAL_OPTIONS = ['url', 'token', 'output', 'timeout', 'help', 'version'];

// The actions: the manager's route (POST /v1/actions/ROUTE), the body field the argument fills, whether that is a
// server (looked up, so that a pod's name works too), the flags besides --dry-run, and whether it starts an operation.
export const ACTIONS = Object.freeze({
  'move-primaries-from-server': { route: 'move-primaries-from-server', field: 'server', options: ['reason', 'deadline'] },
  'move-primaries-from-node': { route: 'move-primaries-from-node', field: 'node', options: ['reason', 'deadline'] },
  release: { route: 'release-server', field: 'server', options: ['reason', 'deadline', 'no-rebalance'] },
  'migrate-replicas-off': { route: 'migrate-replicas-off', field: 'server', options: ['reason', 'deadline'], operation: true },
  'add-server': { route: 'add-server', field: 'server', options: ['reason', 'deadline', 'table', 'grow'], operation: true },
});
// Old names that still work, with the one-line notice stderr gets.
const DEPRECATED = {
  drain: {
    action: 'move-primaries-from-server',
    notice: '"drain" is deprecated: it only moves primaries (kubectl drain evicts pods); use "move-primaries-from-server"',
  },
};
const actionOfName = (name) => (ACTIONS[name] ? name : DEPRECATED[name]?.action);

const argumentOf = (action) => (ACTIONS[action].field === 'node' ? 'NODE' : 'SERVER');
const actionFlags = (action) => [...ACTIONS[action].options, 'dry-run', ...(ACTIONS[action].operation ? ['wait'] : [])];

// Each command: its positional arguments (a trailing '?' marks an optional one) and the flags it accepts.
const COMMANDS = {
  status: { args: [], options: [] },
  ...Object.fromEntries(Object.keys(ACTIONS).map((name) => [name, { args: [argumentOf(name)], options: actionFlags(name) }])),
  ...Object.fromEntries(Object.entries(DEPRECATED).map(([name, { action }]) => [name, { args: [argumentOf(action)], options: actionFlags(action) }])),
  // The flags of every plannable action; which of them the named action takes is checked once it is known.
  plan: { args: ['ACTION', 'TARGET'], options: [...new Set(Object.values(ACTIONS).flatMap((a) => a.options))] },
  'perf-warning': { args: ['raise|end', 'POD?'], options: ['node', 'duration', 'reason'] },
  operations: { args: ['ID?'], options: ['wait'] },
  events: { args: [], options: ['limit'] },
  help: { args: [], options: [] },
};
const PLANNABLE = [...Object.keys(ACTIONS), ...Object.keys(DEPRECATED)];
const PERF_WARNING_OPTIONS = { raise: ['node', 'duration', 'reason'], end: ['node'] };

export function parseCommandLine(argv, env = {}) {
  const { values, positionals } = parseTokens(argv);
  if (values.help) return { command: 'help' };
  if (values.version) return { command: 'version' };
  const [name, ...args] = positionals;
  if (name === undefined) throw new UsageError('no command given');
  const spec = COMMANDS[name];
  if (!spec) throw new UsageError(`unknown command "${name}"`);
  checkOptions(name, spec.options, values);
  checkArgumentCount(name, spec, args);
  if (name === 'help') return { command: 'help' };
  const parsed = commandArguments(name, args, values);
  return {
    ...parsed, connection: connectionOf(values, env, parsed.action?.deadlineSeconds), output: outputOf(values.output),
  };
}

function parseTokens(argv) {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    if (typeof err.code === 'string' && err.code.startsWith('ERR_PARSE_ARGS')) throw new UsageError(parseErrorMessage(err));
    throw err;
  }
}

// Node's messages, shortened to what was wrong (its hint about '--' does not apply to this command line).
function parseErrorMessage(err) {
  const flag = /'(-[^' ]+)/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && flag) return `unknown flag "${flag}"`;
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && flag) {
    return /does not take/.test(err.message) ? `${flag} takes no value` : `${flag} needs a value`;
  }
  return err.message.split('. ')[0];
}

function checkOptions(label, options, values) {
  const accepted = new Set([...GLOBAL_OPTIONS, ...options]);
  const refused = Object.keys(values).filter((name) => !accepted.has(name));
  if (refused.length > 0) {
    const allowed = options.length > 0 ? options.map((o) => `--${o}`).join(', ') : 'only the global flags';
    throw new UsageError(`${label} does not take ${refused.map((o) => `--${o}`).join(', ')}; it takes ${allowed}`);
  }
}

function checkArgumentCount(command, spec, args) {
  const required = spec.args.filter((a) => !a.endsWith('?'));
  const shape = spec.args.map((a) => (a.endsWith('?') ? `[${a.slice(0, -1)}]` : a)).join(' ');
  if (args.length < required.length) throw new UsageError(`${command} needs ${required.slice(args.length).join(' ')}; usage: ${command} ${shape}`);
  if (args.length > spec.args.length) throw new UsageError(`${command} takes ${spec.args.length === 0 ? 'no arguments' : shape}, got: ${args.join(' ')}`);
}

function commandArguments(name, args, values) {
  if (actionOfName(name)) return actionCommand(name, args[0], values, { dryRun: values['dry-run'] === true });
  switch (name) {
    case 'plan': {
      const [action, target] = args;
      if (!PLANNABLE.includes(action)) throw new UsageError(`plan takes one of ${PLANNABLE.join(', ')}; got "${action}"`);
      checkOptions(`plan ${action}`, ACTIONS[actionOfName(action)].options, values);
      return actionCommand(action, target, values, { dryRun: true });
    }
    case 'perf-warning':
      return perfWarningCommand(args, values);
    case 'operations':
      if (args[0] === undefined && values.wait) throw new UsageError('operations --wait needs the operation\'s ID; usage: operations ID --wait');
      return args[0] === undefined ? { command: 'operations' } : { command: 'operations', id: args[0], wait: values.wait === true };
    case 'events':
      return values.limit === undefined ? { command: 'events' } : { command: 'events', limit: integerFlag('limit', values.limit, 1, 500) };
    default:
      return { command: name };
  }
}

// An action: its name as the CLI says it, the fields of its body (the request is made in requests.js), and what its
// argument names: a server (or pod) that the client looks up before the request, or a node that the manager checks.
function actionCommand(name, target, values, { dryRun }) {
  const command = actionOfName(name);
  const { field, operation } = ACTIONS[command];
  if (dryRun && values.wait) throw new UsageError('--wait follows a started operation; a dry run starts none');
  return {
    command,
    action: {
      name: command,
      [field]: target,
      ...(values.reason !== undefined ? { reason: values.reason } : {}),
      ...(values.deadline !== undefined ? { deadlineSeconds: integerFlag('deadline', values.deadline, 1, 86400) } : {}),
      ...(values['no-rebalance'] ? { rebalance: false } : {}),
      ...(values.table !== undefined ? { tables: tablesFlag(values.table) } : {}),
      ...(values.grow ? { grow: true } : {}),
    },
    ...(field === 'server' ? { subject: { kind: 'server', name: target } } : {}),
    dryRun,
    ...(operation ? { wait: values.wait === true } : {}),
    ...(DEPRECATED[name] ? { notice: DEPRECATED[name].notice } : {}),
  };
}

function perfWarningCommand([step, pod], values) {
  const options = PERF_WARNING_OPTIONS[step];
  if (!options) throw new UsageError(`perf-warning takes raise or end; got "${step}"`);
  checkOptions(`perf-warning ${step}`, options, values);
  if ((pod === undefined) === (values.node === undefined)) {
    throw new UsageError(`perf-warning ${step} needs exactly one of POD and --node NODE; usage: perf-warning ${step} POD|--node NODE`);
  }
  return {
    command: 'perf-warning',
    perfWarning: {
      step,
      ...(pod !== undefined ? { pod } : { node: values.node }),
      ...(values.duration !== undefined ? { durationSeconds: integerFlag('duration', values.duration, 1, 604800) } : {}),
      ...(values.reason !== undefined ? { reason: values.reason } : {}),
    },
    ...(pod !== undefined ? { subject: { kind: 'pod', name: pod } } : {}),
  };
}

function tablesFlag(tables) {
  const bad = tables.find((t) => !/^[^.\s]+\.[^.\s]+$/.test(t));
  if (bad !== undefined) throw new UsageError(`--table must be DB.TABLE, got "${bad}"`);
  return tables;
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
