// A client of RethinkDB's V1_0 protocol at the byte level, for tests that send what no driver sends (a hostile
// client): it logs in with SCRAM-SHA-256 (admin, empty password by default), then writes raw frames and reads answers
// by token. login: false stops after the magic number (a half-finished handshake).

import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';

const V1_0 = 0x34c2bdc3;

export function frameOf(token, text) {
  const body = Buffer.isBuffer(text) ? text : Buffer.from(text);
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(token), 0);
  header.writeUInt32LE(body.length, 8);
  return Buffer.concat([header, body]);
}

export async function rawClient(port, { host = '127.0.0.1', user = 'admin', password = '', login = true } = {}) {
  const socket = connect(port, host);
  socket.on('error', () => {});
  await once(socket, 'connect');
  const magic = Buffer.alloc(4);
  magic.writeUInt32LE(V1_0, 0);
  socket.write(magic);
  const closed = new Promise((resolve) => { socket.once('close', () => resolve(true)); });
  // Read (and drop) what comes: a socket whose bytes are not read never sees its peer close.
  if (!login) { socket.resume(); return { socket, closed }; }
  const nonce = randomBytes(18).toString('base64');
  const firstBare = `n=${user},r=${nonce}`;
  socket.write(`${JSON.stringify({ protocol_version: 0, authentication_method: 'SCRAM-SHA-256', authentication: `n,,${firstBare}` })}\0`);
  let buffer = Buffer.alloc(0);
  const messages = async (count) => {
    while (buffer.toString('latin1').split('\0').length - 1 < count) {
      const [chunk] = await once(socket, 'data');
      buffer = Buffer.concat([buffer, chunk]);
    }
    return buffer.toString('utf8').split('\0').slice(0, count).map((m) => JSON.parse(m));
  };
  const [, first] = await messages(2);
  const attrs = Object.fromEntries(first.authentication.split(',').map((kv) => [kv[0], kv.slice(2)]));
  const salted = pbkdf2Sync(password, Buffer.from(attrs.s, 'base64'), Number(attrs.i), 32, 'sha256');
  const clientKey = createHmac('sha256', salted).update('Client Key').digest();
  const finalBare = `c=biws,r=${attrs.r}`;
  const signature = createHmac('sha256', createHash('sha256').update(clientKey).digest()).update(`${firstBare},${first.authentication},${finalBare}`).digest();
  const proof = Buffer.from(clientKey.map((b, i) => b ^ signature[i])).toString('base64');
  socket.write(`${JSON.stringify({ authentication: `${finalBare},p=${proof}` })}\0`);
  const [, , last] = await messages(3);
  if (!last.success) throw new Error(`login refused: ${JSON.stringify(last)}`);
  socket.removeAllListeners('data');
  let rest = buffer.subarray(buffer.lastIndexOf(0) + 1);
  const answers = new Map();
  const waiting = new Map();
  socket.on('data', (chunk) => {
    rest = Buffer.concat([rest, chunk]);
    while (rest.length >= 12 && rest.length >= 12 + rest.readUInt32LE(8)) {
      const token = Number(rest.readBigUInt64LE(0));
      const body = rest.subarray(12, 12 + rest.readUInt32LE(8)).toString();
      rest = rest.subarray(12 + rest.readUInt32LE(8));
      if (waiting.has(token)) { waiting.get(token)(body); waiting.delete(token); } else answers.set(token, body);
    }
  });
  return {
    socket,
    closed,
    send: (token, text) => socket.write(frameOf(token, text)),
    // The answer's JSON text for a token (null if the connection closes first).
    answer: (token) => (answers.has(token) ? Promise.resolve(answers.get(token))
      : Promise.race([new Promise((resolve) => { waiting.set(token, resolve); }), closed.then(() => null)])),
    answered: () => answers.size,
  };
}
