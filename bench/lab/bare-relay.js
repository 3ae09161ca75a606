// The floor under any relay written in Node: a TCP relay with nothing in it (one upstream connection per client,
// bytes piped both ways, Nagle off as in the gate). `npm run bench:gate` runs the same load through it and through the
// gate, so that what the gate costs per query can be told apart from what Node's sockets cost on this machine.
// UPSTREAM=host:port; prints {"port":N} once it listens on 127.0.0.1.

import net from 'node:net';

const [host, port] = (process.env.UPSTREAM ?? '').split(':');
if (!host || !Number(port)) {
  process.stderr.write('bare-relay: UPSTREAM=host:port is required\n');
  process.exit(2);
}
const server = net.createServer((client) => {
  client.setNoDelay(true);
  const upstream = net.connect({ host, port: Number(port) });
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  const end = () => { client.destroy(); upstream.destroy(); };
  for (const socket of [client, upstream]) { socket.on('error', end); socket.on('close', end); }
});
server.listen(0, '127.0.0.1', () => process.stdout.write(`${JSON.stringify({ port: server.address().port })}\n`));
process.on('SIGTERM', () => process.exit(0));
