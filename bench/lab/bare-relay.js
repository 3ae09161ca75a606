// The floor under any relay written in Node: a TCP relay with nothing in it (test/lab/tcp-relay.js: one upstream
// connection per client, bytes piped both ways, Nagle off as in the gate), in a process of its own so that its CPU
// is counted apart. `npm run bench:gate` runs the same load through it and through the gate, so that what the gate
// costs per query can be told apart from what Node's sockets cost on this machine.
// UPSTREAM=host:port; prints {"port":N} once it listens on 127.0.0.1.

import { startTcpRelay } from '../../test/lab/tcp-relay.js';

const [host, port] = (process.env.UPSTREAM ?? '').split(':');
if (!host || !Number(port)) {
  process.stderr.write('bare-relay: UPSTREAM=host:port is required\n');
  process.exit(2);
}
const relay = await startTcpRelay({ host, port: Number(port), noDelay: true });
process.stdout.write(`${JSON.stringify({ port: relay.port })}\n`);
process.on('SIGTERM', () => process.exit(0));
