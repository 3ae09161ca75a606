// The query gate's pure protocol decisions (gate/src/protocol.js): which queries may be sent again after OP_FAILED,
// how a response's type is read without parsing it, how frames are cut.

import {
  QUERY, classifyQuery, createFrameReader, errorClassOf, errorTypeOf, peekResponseType, retryDelayMs, splitNullTerminated, tokenKey,
} from '../../gate/src/protocol.js';

// Terms as drivers send them: [type, args, optargs]. 15 TABLE, 14 DB, 16 GET, 56 INSERT, 53 UPDATE, 2 MAKE_ARRAY.
const table = [15, [[14, ['ycsb']], 'usertable']];
const insert = (doc) => [56, [table, doc]];

describe('classifyQuery', () => {
  test.each([
    ['a read', [QUERY.START, [16, [table, 'k1']], {}], true, 'read-only'],
    ['one insert', [QUERY.START, insert({ id: 'k1' }), {}], true, 'one write of one row'],
    ['one update with a nested read in its document', [QUERY.START, [53, [[16, [table, 'k1']], { n: [16, [table, 'k2']] }]], {}], true, 'one write of one row'],
    ['two inserts in one array', [QUERY.START, [2, [insert({ id: 'a' }), insert({ id: 'b' })]], {}], false, '2 write terms'],
    ['an insert inside an object', [QUERY.START, { a: insert({ id: 'a' }), b: insert({ id: 'b' }) }, {}], false, '2 write terms'],
    ['a forEach', [QUERY.START, [68, [table, [69, [[2, [1]], insert({ id: 'c' })]]]], {}], false, 'forEach'],
    ['a changefeed', [QUERY.START, [152, [table]], {}], false, 'changes'],
    ['r.http', [QUERY.START, [153, ['http://198.18.0.1/']], {}], false, 'r.http'],
    ['a reconfigure', [QUERY.START, [176, [table]], { shards: 2 }], false, 'reconfigure'],
    ['a noreply insert', [QUERY.START, insert({ id: 'k1' }), { noreply: true }], false, 'noreply'],
    ['a noreply insert, noreply as a DATUM term', [QUERY.START, insert({ id: 'k1' }), { noreply: [1, true] }], false, 'noreply'],
    ['a write to a system table', [QUERY.START, [56, [[15, [[14, ['rethinkdb']], 'users']], { id: 'u', password: 'p' }]], {}], false, 'the rethinkdb system database'],
    ['a setWriteHook', [QUERY.START, [189, [table, null]], {}], false, 'setWriteHook'],
    ['a CONTINUE', [QUERY.CONTINUE], false, 'not a START'],
    ['a STOP', [QUERY.STOP], false, 'not a START'],
    ['garbage', { not: 'a query' }, false, 'not a query'],
  ])('when the query is %s, then retryable is %s', (_, query, retryable, reason) => {
    expect(classifyQuery(query)).toMatchObject({ retryable, reason });
  });

  // Holds (gate/src/holds.js) cover a write by the tables it names.
  const update = (t) => [53, [[16, [t, 'k']], { f: 1 }]];
  test.each([
    ['a read of ycsb.usertable', [QUERY.START, [16, [table, 'k1']], {}], ['ycsb.usertable'], false, false],
    ['an update of ycsb.usertable', [QUERY.START, update(table), {}], ['ycsb.usertable'], false, true],
    ['a majority read (global optarg)', [QUERY.START, [16, [table, 'k1']], { read_mode: 'majority' }], ['ycsb.usertable'], false, true],
    ['a majority read (table optarg)', [QUERY.START, [16, [[15, [[14, ['ycsb']], 'usertable'], { read_mode: 'majority' }], 'k1']], {}], ['ycsb.usertable'], false, true],
    ['a write to a table without a db: the query\'s db optarg', [QUERY.START, update([15, ['t']]), { db: [14, ['app']] }], ['app.t'], false, true],
    ['a write to a table without a db and no db optarg: test', [QUERY.START, update([15, ['t']]), {}], ['test.t'], false, true],
    ['a join of two tables', [QUERY.START, [48, [[15, [[14, ['a']], 'x']], [15, [[14, ['b']], 'y']], [69, [[2, [1, 2]], true]]]], {}], ['a.x', 'b.y'], false, false],
    ['a write to a table named by a computed string', [QUERY.START, update([15, [[14, ['a']], [24, ['x', 'y']]]]), {}], [], true, true],
    ['a write to a table of a computed db', [QUERY.START, update([15, [[14, [[24, ['a', 'b']]]], 'x']]), {}], [], true, true],
    ['a table without a db, the db optarg computed', [QUERY.START, [15, ['t']], { db: [14, [[24, ['a', 'b']]]] }], [], true, false],
    ['no table at all', [QUERY.START, [103, []], {}], [], false, false],
    ['a changefeed (never retried, its table still named)', [QUERY.START, [152, [table]], {}], ['ycsb.usertable'], false, false],
  ])('when the query is %s, then its tables are %j', (_, query, tables, unknownTables, writes) => {
    expect(classifyQuery(query)).toMatchObject({ tables, unknownTables, writes });
  });
});

describe('responses', () => {
  const body = (object) => Buffer.from(JSON.stringify(object));
  test('the type is read from the first bytes, without parsing', () => {
    expect(peekResponseType(body({ t: 1, r: [1] }))).toBe(1);
    expect(peekResponseType(body({ t: 18, e: 4100000, r: ['x'] }))).toBe(18);
    expect(peekResponseType(Buffer.from('garbage'))).toBeNull();
    // Not the server's own form: read through the pattern all the same.
    expect(peekResponseType(Buffer.from('{ "t" : 3, "r": []}'))).toBe(3);
    expect(peekResponseType(Buffer.from('{"t":2}'))).toBe(2);
    expect(peekResponseType(Buffer.from('{"t":x}'))).toBeNull();
    expect(peekResponseType(Buffer.from('{"t":'))).toBeNull();
  });
  test('an error\'s type and the class of its text', () => {
    const changing = body({ t: 18, e: 4100000, r: ['Cannot perform write: The primary replica is currently changing from one replica to another.'] });
    expect(errorTypeOf(changing)).toBe(4100000);
    expect(errorClassOf(changing)).toBe('primary_changing');
    expect(errorClassOf(body({ t: 18, e: 4100000, r: ['Cannot perform read: primary replica for shard ["", +inf) not available'] }))).toBe('primary_not_available');
    expect(errorTypeOf(Buffer.from('{'))).toBeNull();
  });
});

describe('frames and the handshake', () => {
  const frame = (token, text) => {
    const header = Buffer.alloc(12);
    header.writeBigUInt64LE(BigInt(token), 0);
    header.writeUInt32LE(Buffer.byteLength(text), 8);
    return Buffer.concat([header, Buffer.from(text)]);
  };

  test('when frames arrive split and joined anyhow, then each comes out whole, once', () => {
    const reader = createFrameReader({ maxFrameBytes: 1024 });
    const bytes = Buffer.concat([frame(1, '[1,[1]]'), frame(2, '[2]'), frame(3, '[1,"x"]')]);
    const out = [];
    for (let i = 0; i < bytes.length; i += 5) out.push(...reader.push(bytes.subarray(i, i + 5)));
    expect(out.map((f) => [f.key, f.body.toString()])).toEqual([[1, '[1,[1]]'], [2, '[2]'], [3, '[1,"x"]']]);
    expect(reader.buffered()).toBe(0);
  });

  test.each([
    ['0', 0], ['1', 1], ['2^32 + 5', 2 ** 32 + 5], ['2^53 - 1', Number.MAX_SAFE_INTEGER],
    ['2^53', '9007199254740992'], ['2^64 - 1', '18446744073709551615'],
  ])('when a token is %s, then its key is one value for it and no other token\'s', (_, key) => {
    const header = Buffer.alloc(8);
    header.writeBigUInt64LE(BigInt(key), 0);
    expect(tokenKey(header)).toBe(key);
  });

  test('when an 8 MB frame arrives in 16 KB chunks, then it comes out whole, once', () => {
    const reader = createFrameReader({ maxFrameBytes: 16 * 1024 * 1024 });
    const big = frame(4, JSON.stringify([1, 'y'.repeat(8 * 1024 * 1024)]));
    const out = [];
    for (let i = 0; i < big.length; i += 16384) out.push(...reader.push(big.subarray(i, i + 16384)));
    expect(out).toHaveLength(1);
    expect(out[0].raw.equals(big)).toBe(true);
  });

  test('when a frame says it is longer than the limit, then the reader refuses it before buffering it', () => {
    const reader = createFrameReader({ maxFrameBytes: 16 });
    expect(() => reader.push(frame(1, 'x'.repeat(17)))).toThrow(expect.objectContaining({ code: 'FRAME_TOO_LARGE' }));
  });

  test('null-terminated handshake messages are split, the rest kept', () => {
    const { messages, rest } = splitNullTerminated(Buffer.from('{"a":1}\0{"b":2}\0{"c"'));
    expect(messages.map(String)).toEqual(['{"a":1}', '{"b":2}']);
    expect(String(rest)).toBe('{"c"');
  });

  test('the backoff doubles from the minimum up to the maximum', () => {
    expect([1, 2, 3, 4, 5].map((n) => retryDelayMs(n, { minMs: 20, maxMs: 200 }))).toEqual([20, 40, 80, 160, 200]);
  });
});
