// Logs in with the official JavaScript driver and prints the outcome as one JSON line, then exits at once: the driver
// (rethinkdb 2.4.x) leaves its connect timer running after a refused handshake and later emits an unhandled 'error',
// so a refused login is tried in a process of its own. Usage: node test/helpers/driver-login.js PORT USER PASSWORD
import r from 'rethinkdb';

const [port, user, password] = process.argv.slice(2);
try {
  const conn = await r.connect({ host: '127.0.0.1', port: Number(port), user, password, timeout: 10 });
  process.stdout.write(`${JSON.stringify({ ok: true, server: (await conn.server()).name !== undefined })}\n`);
} catch (err) {
  process.stdout.write(`${JSON.stringify({ ok: false, error: err.name, message: err.message })}\n`);
}
process.exit(0);
