// The CLI's command line: what each accepted form means, and that every malformed one is a usage error naming the fault.

import {
  ACTIONS, DEFAULT_URL, USAGE, UsageError, parseCommandLine,
} from '../../src/cli/arguments.js';

const defaults = { connection: { url: DEFAULT_URL, token: null, timeoutMs: 60000 }, output: 'table' };

const moveFromServer = (server, extra = {}) => ({
  command: 'move-primaries-from-server', action: { name: 'move-primaries-from-server', server, ...extra }, subject: { kind: 'server', name: server }, dryRun: false,
});

describe('parseCommandLine', () => {
  test.each([
    ['status', ['status'], { command: 'status', ...defaults }],
    ['move-primaries-from-server with a reason', ['move-primaries-from-server', 'rethinkdb_1', '--reason', 'kernel upgrade'],
      { ...moveFromServer('rethinkdb_1', { reason: 'kernel upgrade' }), ...defaults }],
    ['move-primaries-from-server of a pod (looked up before the request)', ['move-primaries-from-server', 'rethinkdb-1'],
      { ...moveFromServer('rethinkdb-1'), ...defaults }],
    ['move-primaries-from-server --dry-run', ['move-primaries-from-server', 'rethinkdb_1', '--dry-run'],
      { ...moveFromServer('rethinkdb_1'), dryRun: true, ...defaults }],
    ['drain, the deprecated name, with a reason', ['drain', 'rethinkdb_1', '--reason', 'kernel upgrade'],
      { ...moveFromServer('rethinkdb_1', { reason: 'kernel upgrade' }), notice: expect.stringMatching(/^"drain" is deprecated: .*use "move-primaries-from-server"$/), ...defaults }],
    ['release without rebalancing', ['release', 'rethinkdb_1', '--no-rebalance'],
      { command: 'release', action: { name: 'release', server: 'rethinkdb_1', rebalance: false }, subject: { kind: 'server', name: 'rethinkdb_1' }, dryRun: false, ...defaults }],
    ['release --dry-run', ['release', 'rethinkdb-1', '--dry-run'],
      { command: 'release', action: { name: 'release', server: 'rethinkdb-1' }, subject: { kind: 'server', name: 'rethinkdb-1' }, dryRun: true, ...defaults }],
    ['migrate-replicas-off --wait', ['migrate-replicas-off', 'rethinkdb_3', '--wait', '--reason', 'disk'],
      { command: 'migrate-replicas-off', action: { name: 'migrate-replicas-off', server: 'rethinkdb_3', reason: 'disk' }, subject: { kind: 'server', name: 'rethinkdb_3' }, dryRun: false, wait: true, ...defaults }],
    ['add-server with two tables, --grow and a deadline', ['add-server', 'rethinkdb-3', '--table', 'app.users', '--table=app.log', '--grow', '--deadline', '300'],
      {
        command: 'add-server', action: { name: 'add-server', server: 'rethinkdb-3', tables: ['app.users', 'app.log'], grow: true, deadlineSeconds: 300 },
        subject: { kind: 'server', name: 'rethinkdb-3' }, dryRun: false, wait: false, ...defaults, connection: { ...defaults.connection, timeoutMs: 310000 },
      }],
    ['move-primaries-from-node (a node is not looked up)', ['move-primaries-from-node', 'node-2', '--dry-run'],
      { command: 'move-primaries-from-node', action: { name: 'move-primaries-from-node', node: 'node-2' }, dryRun: true, ...defaults }],
    ['plan drain (deprecated)', ['plan', 'drain', 'rethinkdb_2'], { ...moveFromServer('rethinkdb_2'), dryRun: true, notice: expect.stringContaining('deprecated'), ...defaults }],
    ['plan move-primaries-from-server', ['plan', 'move-primaries-from-server', 'rethinkdb_2'], { ...moveFromServer('rethinkdb_2'), dryRun: true, ...defaults }],
    ['plan release --no-rebalance', ['plan', 'release', 'rethinkdb_2', '--no-rebalance'],
      { command: 'release', action: { name: 'release', server: 'rethinkdb_2', rebalance: false }, subject: { kind: 'server', name: 'rethinkdb_2' }, dryRun: true, ...defaults }],
    ['plan add-server --table', ['plan', 'add-server', 'rethinkdb_3', '--table', 'app.users'],
      { command: 'add-server', action: { name: 'add-server', server: 'rethinkdb_3', tables: ['app.users'] }, subject: { kind: 'server', name: 'rethinkdb_3' }, dryRun: true, wait: false, ...defaults }],
    ['perf-warning raise of a pod', ['perf-warning', 'raise', 'rethinkdb-1', '--duration', '120', '--reason', 'batch job'],
      { command: 'perf-warning', perfWarning: { step: 'raise', pod: 'rethinkdb-1', durationSeconds: 120, reason: 'batch job' }, subject: { kind: 'pod', name: 'rethinkdb-1' }, ...defaults }],
    ['perf-warning raise of a server (looked up as a pod)', ['perf-warning', 'raise', 'rethinkdb_1'],
      { command: 'perf-warning', perfWarning: { step: 'raise', pod: 'rethinkdb_1' }, subject: { kind: 'pod', name: 'rethinkdb_1' }, ...defaults }],
    ['perf-warning raise of a node', ['perf-warning', 'raise', '--node', 'node-2'], { command: 'perf-warning', perfWarning: { step: 'raise', node: 'node-2' }, ...defaults }],
    ['perf-warning end of a pod', ['perf-warning', 'end', 'rethinkdb-1'],
      { command: 'perf-warning', perfWarning: { step: 'end', pod: 'rethinkdb-1' }, subject: { kind: 'pod', name: 'rethinkdb-1' }, ...defaults }],
    ['perf-warning end of a node', ['perf-warning', 'end', '--node', 'node-2'], { command: 'perf-warning', perfWarning: { step: 'end', node: 'node-2' }, ...defaults }],
    ['operations', ['operations'], { command: 'operations', ...defaults }],
    ['one operation', ['operations', 'abc-123'], { command: 'operations', id: 'abc-123', wait: false, ...defaults }],
    ['one operation, waited for', ['operations', 'abc-123', '--wait'], { command: 'operations', id: 'abc-123', wait: true, ...defaults }],
    ['events with a limit', ['events', '--limit', '10'], { command: 'events', limit: 10, ...defaults }],
    ['flags before the command', ['--output', 'json', 'status'], { command: 'status', ...defaults, output: 'json' }],
    ['-o json and --flag=value', ['status', '-o', 'json', '--timeout=2.5'],
      { command: 'status', connection: { ...defaults.connection, timeoutMs: 2500 }, output: 'json' }],
    ['a long deadline and no --timeout (the client waits 10 s longer)', ['move-primaries-from-server', 'rethinkdb_1', '--deadline', '120'],
      { ...moveFromServer('rethinkdb_1', { deadlineSeconds: 120 }), ...defaults, connection: { ...defaults.connection, timeoutMs: 130000 } }],
    ['a short deadline (the default timeout is already longer)', ['move-primaries-from-server', 'rethinkdb_1', '--deadline', '5'],
      { ...moveFromServer('rethinkdb_1', { deadlineSeconds: 5 }), ...defaults }],
    ['--help among other arguments', ['drain', '--help'], { command: 'help' }],
    ['--help after an unknown command', ['frobnicate', '-h'], { command: 'help' }],
    ['help', ['help'], { command: 'help' }],
    ['--version', ['--version'], { command: 'version' }],
  ])('when the command line is %s, then it is understood', (_, argv, expected) => {
    expect(parseCommandLine(argv, {})).toEqual(expected);
  });

  test.each([
    ['the environment gives them', ['status'], { RETHINKDB_MANAGER_URL: 'https://m.example:8443/x', RETHINKDB_MANAGER_TOKEN: 's3cret' },
      { url: 'https://m.example:8443/x', token: 's3cret' }],
    ['flags and the environment give them', ['status', '--url', 'http://198.18.0.1:8080', '--token', 'flag-token'],
      { RETHINKDB_MANAGER_URL: 'http://ignored', RETHINKDB_MANAGER_TOKEN: 'ignored' }, { url: 'http://198.18.0.1:8080', token: 'flag-token' }],
    ['the variables are empty', ['status'], { RETHINKDB_MANAGER_URL: '', RETHINKDB_MANAGER_TOKEN: '' }, { url: DEFAULT_URL, token: null }],
  ])('when %s, then the URL and token come from flags first, then the environment, then the default', (_, argv, env, expected) => {
    expect(parseCommandLine(argv, env).connection).toEqual({ ...expected, timeoutMs: 60000 });
  });

  test.each([
    ['no command', [], /^no command given$/],
    ['an unknown command', ['frobnicate'], /^unknown command "frobnicate"$/],
    ['an unknown flag', ['status', '--force'], /^unknown flag "--force"$/],
    ['an unknown short flag', ['status', '-x'], /^unknown flag "-x"$/],
    ['a flag without its value', ['status', '--url'], /^--url needs a value$/],
    ['a value on a switch', ['release', 'rethinkdb_1', '--no-rebalance=yes'], /^--no-rebalance takes no value$/],
    ['move-primaries-from-server without a server', ['move-primaries-from-server'], /^move-primaries-from-server needs SERVER; usage: move-primaries-from-server SERVER$/],
    ['drain without a server', ['drain'], /^drain needs SERVER; usage: drain SERVER$/],
    ['move-primaries-from-node without a node', ['move-primaries-from-node'], /^move-primaries-from-node needs NODE/],
    ['two servers', ['move-primaries-from-server', 'rethinkdb_1', 'rethinkdb_2'], /move-primaries-from-server takes SERVER, got: rethinkdb_1 rethinkdb_2/],
    ['status with an argument', ['status', 'now'], /status takes no arguments, got: now/],
    ['a flag another command takes', ['status', '--reason', 'x'], /^status does not take --reason; it takes only the global flags$/],
    ['--limit on an action', ['move-primaries-from-server', 'rethinkdb_1', '--limit', '3'], /does not take --limit; it takes --reason, --deadline, --dry-run$/],
    ['--wait on an action that starts no operation', ['move-primaries-from-server', 'rethinkdb_1', '--wait'], /does not take --wait/],
    ['--wait on a dry run', ['add-server', 'rethinkdb_3', '--dry-run', '--wait'], /--wait follows a started operation; a dry run starts none/],
    ['--table on migrate-replicas-off', ['migrate-replicas-off', 'rethinkdb_3', '--table', 'a.b'], /migrate-replicas-off does not take --table/],
    ['a table without its database', ['add-server', 'rethinkdb_3', '--table', 'users'], /--table must be DB.TABLE, got "users"/],
    ['plan of an action it does not know', ['plan', 'rebalance', 'x'], /^plan takes one of move-primaries-from-server, .*, drain; got "rebalance"$/],
    ['plan without a server', ['plan', 'drain'], /plan needs TARGET/],
    ['--no-rebalance on plan drain', ['plan', 'drain', 'rethinkdb_1', '--no-rebalance'], /^plan drain does not take --no-rebalance; it takes --reason, --deadline$/],
    ['--dry-run on plan', ['plan', 'release', 'rethinkdb_1', '--dry-run'], /^plan does not take --dry-run/],
    ['--dry-run on a perf warning (the hook has no dry run)', ['perf-warning', 'raise', 'rethinkdb-1', '--dry-run'], /perf-warning does not take --dry-run/],
    ['perf-warning without a step', ['perf-warning'], /perf-warning needs raise\|end/],
    ['perf-warning with an unknown step', ['perf-warning', 'lower', 'rethinkdb-1'], /perf-warning takes raise or end; got "lower"/],
    ['perf-warning raise with neither a pod nor a node', ['perf-warning', 'raise'], /perf-warning raise needs exactly one of POD and --node NODE/],
    ['perf-warning raise with a pod and a node', ['perf-warning', 'raise', 'rethinkdb-1', '--node', 'node-1'], /needs exactly one of POD and --node NODE/],
    ['perf-warning end with a duration', ['perf-warning', 'end', 'rethinkdb-1', '--duration', '5'], /^perf-warning end does not take --duration; it takes --node$/],
    ['perf-warning end with a reason (the route takes none)', ['perf-warning', 'end', 'rethinkdb-1', '--reason', 'x'], /^perf-warning end does not take --reason/],
    ['a duration of 0', ['perf-warning', 'raise', 'rethinkdb-1', '--duration', '0'], /--duration must be an integer from 1 to 604800, got "0"/],
    ['operations --wait without an id', ['operations', '--wait'], /operations --wait needs the operation's ID/],
    ['an output format it does not know', ['status', '--output', 'yaml'], /--output must be table or json, got "yaml"/],
    ['a zero timeout', ['status', '--timeout', '0'], /--timeout must be a number of seconds above 0/],
    ['a timeout that is not a number', ['status', '--timeout', 'soon'], /--timeout must be a number of seconds/],
    ['a limit of 0', ['events', '--limit', '0'], /--limit must be an integer from 1 to 500, got "0"/],
    ['a limit above 500', ['events', '--limit', '501'], /--limit must be an integer from 1 to 500/],
    ['a fractional deadline', ['drain', 'rethinkdb_1', '--deadline', '1.5'], /--deadline must be an integer from 1 to 86400/],
    ['a URL without a scheme', ['status', '--url', 'localhost:8080'], /--url must be an http:\/\/ or https:\/\/ URL, got "localhost:8080"/],
    ['a URL from the environment without a scheme', ['status'], /--url must be an http/, { RETHINKDB_MANAGER_URL: 'ftp://x' }],
    ['help with an argument', ['help', 'drain'], /help takes no arguments/],
  ])('when the command line has %s, then it is a usage error that says so', (_, argv, message, env = {}) => {
    expect(() => parseCommandLine(argv, env)).toThrow(UsageError);
    expect(() => parseCommandLine(argv, env)).toThrow(message);
  });

  test('when the usage is printed, then it names every command the parser takes, and the exit codes', () => {
    for (const command of ['status', 'operations', 'events', 'move-primaries-from-server', 'move-primaries-from-node', 'release', 'migrate-replicas-off', 'add-server', 'plan', 'drain', 'perf-warning raise', 'perf-warning end', 'help']) {
      expect(USAGE).toMatch(new RegExp(`^  ${command}\\b`, 'm'));
    }
    for (const name of Object.keys(ACTIONS)) expect(() => parseCommandLine([name, 'x'], {})).not.toThrow();
    expect(USAGE).toMatch(/^Exit codes:\n {2}0 .*\n {2}1 [^]*\n {2}2 .*\n {2}3 .*\n {2}4 /m);
  });
});
