#!/usr/bin/env node
// Entry point of the command-line client: `rethinkdb-manager COMMAND`, or `kubectl rethinkdb COMMAND` when installed
// on PATH as kubectl-rethinkdb. Only this file touches the process (argv, environment, streams, exit code).

import { createCli } from '../src/cli/cli.js';
import { VERSION } from '../src/lib/version.js';

const cli = createCli({
  fetch: globalThis.fetch,
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  version: VERSION,
});

process.exitCode = await cli.run(process.argv.slice(2), process.env);
