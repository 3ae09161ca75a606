// A TCP relay: one upstream connection per client connection, bytes piped both ways. Used as a cuttable link in front
// of the API server (test/kube-real/leader-election.test.js: cut() closes every connection and refuses new ones, as
// a network partition does to the manager's calls; restore() lets them through again), and as the floor under any
// relay written in Node (bench/lab/bare-relay.js, with Nagle off as in the gate).

import { connect, createServer } from 'node:net';

export async function startTcpRelay({
  port: targetPort, host: targetHost = '127.0.0.1', listenHost = '127.0.0.1', noDelay = false,
}) {
  const sockets = new Set();
  let cut = false;
  const server = createServer((client) => {
    if (cut) { client.destroy(); return; }
    const upstream = connect(targetPort, targetHost);
    if (noDelay) {
      client.setNoDelay(true);
      upstream.setNoDelay(true);
    }
    sockets.add(client);
    sockets.add(upstream);
    const drop = () => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream); };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream).pipe(client);
  });
  await new Promise((resolve) => { server.listen(0, listenHost, resolve); });
  return {
    port: server.address().port,
    cut() { cut = true; for (const s of sockets) s.destroy(); sockets.clear(); },
    restore() { cut = false; },
    close: () => new Promise((resolve) => { for (const s of sockets) s.destroy(); server.close(resolve); }),
  };
}
