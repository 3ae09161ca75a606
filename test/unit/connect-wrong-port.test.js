// RETHINKDB_HOST pointed at another of RethinkDB's ports: the driver says only "operation timed out" (the web UI's
// HTTP port) or throws where nothing catches it (the cluster port, which greets every connection). The manager's
// connection says which port it reached instead (src/rethinkdb/connect.js), and does not die.

import { createServer as createHttpServer } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import pino from 'pino';
import r from 'rethinkdb';
import { loadConfig } from '../../src/config.js';
import { createSystemClock } from '../../src/lib/clock.js';
import { createRethinkDbStore, wrongPortOf } from '../../src/rethinkdb/connect.js';

const servers = [];
afterAll(() => Promise.all(servers.map((s) => new Promise((resolve) => { s.closeAllConnections?.(); s.close(resolve); }))));

async function listen(server) {
  await new Promise((resolve) => { server.listen(0, '127.0.0.1', resolve); });
  servers.push(server);
  return server.address().port;
}

async function lastErrorAt(port) {
  const config = loadConfig({ RETHINKDB_HOST: `127.0.0.1:${port}`, RETHINKDB_CONNECT_TIMEOUT_SECONDS: '1', AUTH_MODE: 'none' });
  const { connections, close } = createRethinkDbStore({ r, config, clock: createSystemClock(), logger: pino({ level: 'silent' }) });
  try {
    for (let i = 0; i < 60 && !connections.status().lastError; i += 1) await new Promise((resolve) => { setTimeout(resolve, 100); });
    return connections.status().lastError;
  } finally {
    await close();
  }
}

describe('RETHINKDB_HOST at the wrong port', () => {
  test('when it is an HTTP port (the web UI), then the error says so and names the driver port', async () => {
    const port = await listen(createHttpServer((req, res) => res.end('<html>RethinkDB</html>')));
    expect(await lastErrorAt(port)).toMatch(new RegExp(`operation timed out\\. 127\\.0\\.0\\.1:${port} answers HTTP: .*driver port \\(28015\\)`));
  });

  test('when it is the cluster port, then the connection is refused with a sentence, and the process lives on', async () => {
    // What RethinkDB 2.4.4's cluster port sends at once to every connection.
    const port = await listen(createTcpServer((socket) => { socket.on('error', () => {}); socket.write('RethinkDB cluster\n\x05\0\0\0\0\0\0\x002.4.0'); }));
    expect(await lastErrorAt(port)).toMatch(/it is RethinkDB's cluster port \(29015\).*driver port \(28015\)/);
  });

  test.each([
    ['HTTP/1.0 200 OK\r\n', /answers HTTP/],
    ['RethinkDB cluster\n\x05', /cluster port/],
    ['ERROR: Received an unsupported protocol version.', null],
    ['', null],
  ])('the first bytes %j name the port: %s', (bytes, expected) => {
    const found = wrongPortOf(Buffer.from(bytes, 'latin1'));
    if (expected) expect(found).toMatch(expected); else expect(found).toBeNull();
  });
});
