// examples/clients/resilient-connection.js on a fake driver: what is sent again, what is reported unknown, and that
// a stopping gate's answer to one query does not cut the others in flight on the same connection.

import { EventEmitter } from 'node:events';
import { OutcomeUnknownError, createResilientConnection } from '../../examples/clients/resilient-connection.js';

const stopping = () => Object.assign(new Error('Cannot run the query: the query gate is stopping and closes this connection; the query was not sent to RethinkDB. Reconnect and send it again.'), { name: 'ReqlOpFailedError' });
const closedError = () => Object.assign(new Error('Connection is closed.'), { name: 'ReqlDriverError' });

// Connections that record the queries run on them; each query's answer is a promise the test settles.
function fakeDriver() {
  const connections = [];
  const pending = [];
  const connect = async () => {
    const c = Object.assign(new EventEmitter(), { id: connections.length, open: true, closes: 0 });
    c.close = async () => { c.open = false; c.closes += 1; for (const p of pending.filter((x) => x.conn === c && !x.done)) { p.done = true; p.reject(closedError()); } };
    connections.push(c);
    return c;
  };
  const query = (name) => ({
    run: (conn) => new Promise((resolve, reject) => {
      pending.push({
        name, conn, done: false, resolve: (v) => resolve(v), reject,
      });
    }),
  });
  const settle = (name, connId, how) => {
    const p = pending.find((x) => x.name === name && x.conn.id === connId && !x.done);
    if (!p) throw new Error(`no ${name} pending on connection ${connId}`);
    p.done = true;
    if (how instanceof Error) p.reject(how); else p.resolve(how);
  };
  const sentOn = (name) => pending.filter((x) => x.name === name).map((x) => x.conn.id);
  return { connect, query, settle, sentOn, connections };
}
const tick = () => new Promise((resolve) => { setImmediate(resolve); });

describe('the resilient connection (examples/clients)', () => {
  test('when the gate answers one query "stopping" while another is in flight, then that one is sent on a new connection and the other still gets its answer', async () => {
    const d = fakeDriver();
    const db = createResilientConnection({ r: {}, connect: d.connect });
    const a = db.run(d.query('a'));
    await tick();
    const b = db.run(d.query('b'), { resend: true });
    await tick();
    d.settle('a', 0, stopping());
    await tick(); await tick();
    expect(d.connections[0].closes).toBe(0);
    d.settle('b', 0, 'b-answer');
    expect(await b).toBe('b-answer');
    expect(d.sentOn('a')).toEqual([0, 1]);
    d.settle('a', 1, 'a-answer');
    expect(await a).toBe('a-answer');
    expect(db.reconnects()).toBe(1);
    await db.close();
    expect(d.connections.map((c) => c.open)).toEqual([false, false]);
  });

  test('when the connection breaks under a write not marked resend, then it fails as OutcomeUnknownError; a read is sent again', async () => {
    const d = fakeDriver();
    const db = createResilientConnection({ r: {}, connect: d.connect });
    const write = db.run(d.query('w'));
    const read = db.run(d.query('r'), { resend: true });
    await tick(); await tick();
    d.settle('w', 0, closedError());
    await expect(write).rejects.toBeInstanceOf(OutcomeUnknownError);
    await tick(); await tick();
    // The read was cut by the broken connection's close; it went again on the new one.
    expect(d.sentOn('r')).toEqual([0, 1]);
    d.settle('r', 1, 'r-answer');
    expect(await read).toBe('r-answer');
    expect(d.sentOn('w')).toEqual([0]);
  });

  test('when the first connection is made, then it is no reconnect', async () => {
    const d = fakeDriver();
    const db = createResilientConnection({ r: {}, connect: d.connect });
    const a = db.run(d.query('a'));
    await tick();
    d.settle('a', 0, 1);
    await a;
    expect(db.reconnects()).toBe(0);
  });
});
