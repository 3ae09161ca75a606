// The query gate's own JavaScript per query (node bench/gate-session.bench.js): one session (gate/src/session.js)
// between two fake sockets that write nowhere, fed a point read and its answer 400,000 times in each of 3 rounds. No
// syscall, no network, no server: what it prints is the CPU the gate's code costs per query and answer, apart from
// what Node's sockets cost (npm run bench:gate measures the whole, against a bare relay). Prints numbers; asserts
// nothing.

import { EventEmitter } from 'node:events';
import pino from 'pino';
import { createSession } from '../gate/src/session.js';
import { createGateMetrics } from '../gate/src/metrics.js';
import { V1_0 } from '../gate/src/protocol.js';

const N = Number(process.env.GATE_SESSION_BENCH_QUERIES ?? 400000);

class FakeSocket extends EventEmitter {
  destroyed = false;
  write() { return true; }
  cork() {}
  uncork() {}
  pause() {}
  resume() {}
  end() {}
  destroy() { this.destroyed = true; }
}

const frame = (token, text) => {
  const body = Buffer.from(text);
  const header = Buffer.alloc(12);
  header.writeBigUInt64LE(BigInt(token), 0);
  header.writeUInt32LE(body.length, 8);
  return Buffer.concat([header, body]);
};

const client = new FakeSocket();
const upstream = new FakeSocket();
createSession({
  client, connectUpstream: () => upstream, config: { maxFrameBytes: 1 << 24, retry: { minMs: 20, maxMs: 200, budgetMs: 3000 }, hold: {} },
  metrics: createGateMetrics(), clock: { now: () => Date.now() }, logger: pino({ level: 'silent' }),
});
const magic = Buffer.alloc(4);
magic.writeUInt32LE(V1_0, 0);
client.emit('data', Buffer.concat([magic, Buffer.from('{"a":1}\0{"b":2}\0')]));
upstream.emit('data', Buffer.from('{"success":true}\0{"success":true}\0{"success":true}\0'));

// The same point read as the throughput load of bench/gate.bench.js, and an answer of its size.
const queries = [];
const answers = [];
for (let i = 0; i < 1000; i += 1) {
  queries.push(frame(i + 1, `[1,[16,[[15,[[14,["bench"]],"kv"]],"k${i}"]],{}]`));
  answers.push(frame(i + 1, `{"t":1,"r":[{"id":"k${i}","v":"${'x'.repeat(100)}"}],"n":[]}`));
}
for (let round = 1; round <= 3; round += 1) {
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < N; i += 1) {
    client.emit('data', queries[i % 1000]);
    upstream.emit('data', answers[i % 1000]);
  }
  await new Promise((resolve) => { setImmediate(resolve); });
  const cpu = process.cpuUsage(cpu0);
  process.stdout.write(`round ${round}: ${N} queries and answers, ${((cpu.user + cpu.system) / N).toFixed(2)} µs CPU each\n`);
}
