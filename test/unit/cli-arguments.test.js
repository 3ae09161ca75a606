// The CLI's command line: what each accepted form means, and that every malformed one is a usage error naming the fault.

import { DEFAULT_URL, UsageError, parseCommandLine } from '../../src/cli/arguments.js';

const defaults = { connection: { url: DEFAULT_URL, token: null, timeoutMs: 60000 }, output: 'table' };

describe('parseCommandLine', () => {
  test.each([
    ['status', ['status'], { command: 'status', ...defaults }],
    ['drain with a reason', ['drain', 'rethinkdb_1', '--reason', 'kernel upgrade'],
      { command: 'drain', action: { name: 'drain', server: 'rethinkdb_1', reason: 'kernel upgrade' }, dryRun: false, ...defaults }],
    ['release without rebalancing', ['release', 'rethinkdb_1', '--no-rebalance'],
      { command: 'release', action: { name: 'release', server: 'rethinkdb_1', rebalance: false }, dryRun: false, ...defaults }],
    ['plan drain', ['plan', 'drain', 'rethinkdb_2'], { command: 'plan', action: { name: 'drain', server: 'rethinkdb_2' }, dryRun: true, ...defaults }],
    ['plan release --no-rebalance', ['plan', 'release', 'rethinkdb_2', '--no-rebalance'],
      { command: 'plan', action: { name: 'release', server: 'rethinkdb_2', rebalance: false }, dryRun: true, ...defaults }],
    ['operations', ['operations'], { command: 'operations', ...defaults }],
    ['one operation', ['operations', 'abc-123'], { command: 'operations', id: 'abc-123', ...defaults }],
    ['events with a limit', ['events', '--limit', '10'], { command: 'events', limit: 10, ...defaults }],
    ['flags before the command', ['--output', 'json', 'status'], { command: 'status', ...defaults, output: 'json' }],
    ['-o json and --flag=value', ['status', '-o', 'json', '--timeout=2.5'],
      { command: 'status', connection: { ...defaults.connection, timeoutMs: 2500 }, output: 'json' }],
    ['drain with a long deadline and no --timeout (the client waits 10 s longer)', ['drain', 'rethinkdb_1', '--deadline', '120'],
      { command: 'drain', action: { name: 'drain', server: 'rethinkdb_1', deadlineSeconds: 120 }, dryRun: false, ...defaults, connection: { ...defaults.connection, timeoutMs: 130000 } }],
    ['drain with a short deadline (the default timeout is already longer)', ['drain', 'rethinkdb_1', '--deadline', '5'],
      { command: 'drain', action: { name: 'drain', server: 'rethinkdb_1', deadlineSeconds: 5 }, dryRun: false, ...defaults }],
    ['--help among other arguments', ['drain', '--help'], { command: 'help' }],
    ['help', ['help'], { command: 'help' }],
    ['--version', ['--version'], { command: 'version' }],
  ])('when the command line is %s, then it is understood', (_, argv, expected) => {
    expect(parseCommandLine(argv, {})).toEqual(expected);
  });

  test.each([
    ['the environment gives them', ['status'], { RETHINKDB_MANAGER_URL: 'https://m.example:8443/x', RETHINKDB_MANAGER_TOKEN: 's3cret' },
      { url: 'https://m.example:8443/x', token: 's3cret' }],
    ['flags and the environment give them', ['status', '--url', 'http://10.0.0.1:8080', '--token', 'flag-token'],
      { RETHINKDB_MANAGER_URL: 'http://ignored', RETHINKDB_MANAGER_TOKEN: 'ignored' }, { url: 'http://10.0.0.1:8080', token: 'flag-token' }],
    ['the variables are empty', ['status'], { RETHINKDB_MANAGER_URL: '', RETHINKDB_MANAGER_TOKEN: '' }, { url: DEFAULT_URL, token: null }],
  ])('when %s, then the URL and token come from flags first, then the environment, then the default', (_, argv, env, expected) => {
    expect(parseCommandLine(argv, env).connection).toEqual({ ...expected, timeoutMs: 60000 });
  });

  test.each([
    ['no command', [], /no command given/],
    ['an unknown command', ['frobnicate'], /unknown command "frobnicate" \(commands: status, drain, release, plan, operations, events, help\)/],
    ['an unknown flag', ['status', '--force'], /Unknown option '--force'/],
    ['a flag without its value', ['status', '--url'], /--url/],
    ['drain without a server', ['drain'], /drain needs SERVER \(usage: drain SERVER\)/],
    ['drain with two servers', ['drain', 'rethinkdb_1', 'rethinkdb_2'], /drain takes SERVER, got: rethinkdb_1 rethinkdb_2/],
    ['status with an argument', ['status', 'now'], /status takes no arguments, got: now/],
    ['a flag another command takes', ['status', '--reason', 'x'], /status does not take --reason \(it takes only the global flags\)/],
    ['--limit on drain', ['drain', 'rethinkdb_1', '--limit', '3'], /drain does not take --limit \(it takes --reason, --deadline\)/],
    ['plan of an action it does not know', ['plan', 'rebalance', 'x'], /plan takes drain or release, got "rebalance"/],
    ['plan without a server', ['plan', 'drain'], /plan needs SERVER/],
    ['--no-rebalance on plan drain', ['plan', 'drain', 'rethinkdb_1', '--no-rebalance'], /--no-rebalance goes with plan release only/],
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
});
