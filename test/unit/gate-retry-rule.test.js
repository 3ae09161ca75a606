// The query gate's retry rule and its reading of a frame (gate/src/protocol.js): which queries may be sent again, after
// which answers, and how a frame is read as the server reads it (whitespace, duplicate keys, a NUL, deep nesting).
// The same queries against a real 2.4.4 server are in test/real/gate-retry-rule.test.js.

import fc from 'fast-check';
import {
  QUERY, classifyQuery, countMemberColons, parseQuery, queryTypeOf, retryAfter, singleRowWrite,
} from '../../gate/src/protocol.js';

const table = [15, [[14, ['app']], 't']];
const other = [15, [[14, ['app']], 'u']];
const insert = (doc) => [56, [table, doc]];
const get = (key) => [16, [table, key]];
const start = (term, options = {}) => [QUERY.START, term, options];
const verdict = (query) => {
  const text = Buffer.from(JSON.stringify(query));
  return classifyQuery(JSON.parse(text), countMemberColons(text));
};

describe('which queries may be sent again', () => {
  test.each([
    ['a read', start(get('k')), 'read'],
    ['a read of two tables', start([48, [table, other, [69, [[2, [1, 2]], true]]]]), 'read'],
    ['an insert of one object', start(insert({ n: 1 })), 'write'],
    ['an insert of one MAKE_OBJ', start(insert([3, [], { n: 1 }])), 'write'],
    ['an insert of one DATUM object', start(insert([1, { n: 1 }])), 'write'],
    ['an insert with optargs', start([56, [table, { n: 1 }], { conflict: 'update', return_changes: true }]), 'write'],
    ['a point update', start([53, [get('k'), { n: [24, [[170, [[13, []], 'n']], 1]] }]]), 'write'],
    ['a point replace', start([55, [get('k'), { id: 'k' }]]), 'write'],
    ['a point delete', start([54, [get('k')]]), 'write'],
    ['a point update whose document reads another table', start([53, [get('k'), { n: [16, [other, 'x']] }]]), 'write'],
    ['an insert of an array (batched, shard by shard)', start(insert([2, [{ a: 1 }, { a: 2 }]])), null],
    ['an insert of a stream', start(insert([38, [[173, [0, 10]], [69, [[2, [1]], { k: [10, [1]] }]]]])), null],
    ['an insert of a computed object', start(insert([65, [{ a: 1 }, { b: 2 }]])), null],
    ['an update of a whole table', start([53, [table, { n: 1 }]]), null],
    ['an update of getAll', start([53, [[78, [table, 'a', 'b']], { n: 1 }]]), null],
    ['an update of a get with an index optarg', start([53, [[16, [table, 'k'], { index: 'x' }], { n: 1 }]]), null],
    ['an insert followed by a read (do)', start([64, [[69, [[2, []], get('x')]], insert({ n: 1 })]]), null],
    ['an insert inside do', start([64, [[69, [[2, []], insert({ n: 1 })]], 1]]), null],
    ['an insert under contains', start([93, [[2, ['t', 'u']], [69, [[2, [1]], insert({ n: 1 })]]]]), null],
    ['an insert under merge', start([35, [[2, [{}, {}]], insert({ n: 1 })]]), null],
    ['an insert under branch', start([65, [true, insert({ n: 1 }), null]]), null],
    ['a read with a write in a global optarg', start(get('k'), { db: [64, [[69, [[2, []], [14, ['app']]]], insert({ n: 1 })]] }), null],
    ['an insert with a write in a global optarg', start(insert({ n: 1 }), { profile: insert({ n: 2 }) }), null],
    ['two inserts', start([2, [insert({ a: 1 }), insert({ b: 1 })]]), null],
    ['an insert into a computed table', start([56, [[15, [[14, ['app']], [24, ['t', 'x']]]], { n: 1 }]]), null],
    ['an insert into a computed db (the system database, spelled so)', start([56, [[15, [[14, [[24, ['rethink', 'db']]]], 'users']], { id: 'x' }]]), null],
    ['an insert into the system database', start([56, [[15, [[14, ['rethinkdb']], 'users']], { id: 'x' }]]), null],
    ['an insert into a table of the db optarg', start([56, [[15, ['t']], { n: 1 }]], { db: [14, ['app']] }), 'write'],
    ['an insert into a table of a computed db optarg', start([56, [[15, ['t']], { n: 1 }]], { db: [14, [[24, ['a', 'b']]]] }), null],
    ['a noreply insert', start(insert({ n: 1 }), { noreply: true }), null],
    ['a changefeed', start([152, [table]]), null],
    ['a tableCreate', start([60, [[14, ['app']], 'x']]), null],
    ['r.js', start([11, ['1']]), null],
  ])('%s: retry %s', (_, query, retry) => {
    expect(verdict(query).retry).toBe(retry);
  });

  test('a query with the same key twice in one object is marked, whatever object it is in', () => {
    const texts = [
      '[1,[56,[[15,[[14,["app"]],"t"]],{"n":1,"n":[56,[[15,[[14,["app"]],"t"]],{}]]}]],{}]',
      '[1,[16,[[15,[[14,["app"]],"t"]],"k"]],{"noreply":true,"noreply":false}]',
      '[1,[15,["t"],{"read_mode":"single","read_mode":"majority"}],{}]',
      '[1,[56,[[15,[[14,["app"]],"t"]],{"tag":1,"t\\u0061g":2}]],{}]',
    ];
    for (const text of texts) {
      const body = Buffer.from(text);
      expect(classifyQuery(JSON.parse(text), countMemberColons(body))).toMatchObject({ duplicateKeys: true, retry: null });
    }
    // Colons inside strings, escaped quotes, nested objects: no false alarm.
    const fine = Buffer.from('[1,[56,[[15,[[14,["app"]],"t"]],{"a:b":"x\\":y","o":{"p":{"q":":"}}}]],{"db":[14,["app"]]}]');
    expect(classifyQuery(JSON.parse(fine), countMemberColons(fine))).toMatchObject({ duplicateKeys: false, retry: 'write' });
  });

  test('any JSON: the colon count equals the parsed keys unless a key repeats', () => {
    fc.assert(fc.property(fc.jsonValue(), (value) => {
      const text = Buffer.from(JSON.stringify([1, value, {}]));
      expect(classifyQuery(JSON.parse(text), countMemberColons(text)).duplicateKeys).toBe(false);
    }), { numRuns: 300 });
  });

  test('a query nested 100,000 deep is classified, not a stack overflow', () => {
    const deep = `[1,${'[2,['.repeat(100000)}1${']]'.repeat(100000)},{}]`;
    const body = Buffer.from(deep);
    expect(classifyQuery(parseQuery(body), countMemberColons(body))).toMatchObject({ retry: 'read' });
    const deepWrite = `[1,${'[2,['.repeat(100000)}[56,[[15,[[14,["app"]],"t"]],{}]]${']]'.repeat(100000)},{}]`;
    expect(classifyQuery(parseQuery(Buffer.from(deepWrite)))).toMatchObject({ retry: null, writes: true, tables: ['app.t'] });
  });

  test('singleRowWrite needs the write at the root, one row, a literal user table', () => {
    expect(singleRowWrite(insert({}), 'test')).toBe(true);
    expect(singleRowWrite([56, [[15, ['t']], {}]], null)).toBe(false);
    expect(singleRowWrite([54, [get('k'), { durability: 'soft' }]], 'test')).toBe(false);
    expect(singleRowWrite([56, [table, {}, {}]], 'test')).toBe(false);
    expect(singleRowWrite('x', 'test')).toBe(false);
  });
});

describe('after which answers', () => {
  const answer = (e, message, t = 18) => Buffer.from(JSON.stringify({ t, e, r: [message], b: [] }));
  const FAILED = 4100000;
  const CONFIG = 'Unexpected exception: The attempt to read or modify the table\'s configuration failed because none of the servers were accessible.  If it was an attempt to modify, the modification did not take place.';
  test.each([
    ['read', 'Cannot perform read: primary replica for shard ["", +inf) not available', FAILED, true],
    ['read', 'Cannot perform read: lost contact with primary replica', FAILED, true],
    ['read', 'Cannot perform read: no replica is available', FAILED, true],
    ['read', 'Cannot perform read: too many primary replicas available', FAILED, true],
    ['read', CONFIG, 1000000, true],
    ['write', CONFIG, 1000000, true],
    ['write', 'Unexpected exception: something else', 1000000, false],
    ['write', CONFIG, 4200000, false],
    ['write', 'Cannot perform write: too many primary replicas available', FAILED, true],
    ['read', 'Cannot perform read: The primary replica isn\'t connected to a quorum of replicas. The read was not performed.', FAILED, true],
    ['read', 'Table `app.missing` does not exist.', FAILED, false],
    ['read', 'Database `nodb` does not exist.', FAILED, false],
    ['read', 'Cannot perform read: primary replica for shard ["", +inf) not available', 4200000, false],
    ['write', 'Cannot perform write: primary replica for shard ["S7", +inf) not available', FAILED, true],
    ['write', 'Cannot perform write: The primary replica is currently changing from one replica to another. The write was not performed.', FAILED, true],
    ['write', 'Cannot perform write: The primary replica isn\'t connected to a quorum of replicas. The write was not performed.', FAILED, true],
    ['write', 'Cannot perform write: lost contact with primary replica', 4200000, false],
    ['write', 'Cannot perform write: lost contact with the secondary replicas. The write may or may not have been performed.', 4200000, false],
    ['write', 'Cannot perform read: primary replica for shard ["", +inf) not available', FAILED, false],
    ['write', 'Table `app.missing` does not exist.', FAILED, false],
    [null, 'Cannot perform read: primary replica for shard ["", +inf) not available', FAILED, false],
  ])('a %s query answered %j (%i): %s', (retry, message, e, expected) => {
    expect(retryAfter(retry, answer(e, message))).toBe(expected);
  });
  test('not a runtime error, or not JSON: never', () => {
    expect(retryAfter('read', answer(FAILED, 'Cannot perform read: no replica is available', 17))).toBe(false);
    expect(retryAfter('read', Buffer.from('{"t":18'))).toBe(false);
    expect(retryAfter('read', Buffer.from('{"t":18,"e":4100000,"r":[1]}'))).toBe(false);
  });
});

describe('reading a frame as the server does', () => {
  test.each([
    ['[1,[2,[]],{}]', 1], [' [1,[2,[]],{}]', 1], ['[ 1 ,[2,[]]]', 1], ['[\n1\t,[2,[]]]', 1], ['\r\n[1,[2,[]]]', 1], ['[2]', 2], ['[ 3 ]', 3], ['[5]', 5],
    ['[1.0,[2,[]]]', null], ['[1e0,[2,[]]]', null], ['[4294967297,[2,[]]]', null], ['[11,[2,[]]]', null], ['[0,[]]', null], ['\ufeff[1,[]]', null], ['{"t":1}', null],
  ])('%j: type %s', (text, type) => {
    expect(queryTypeOf(Buffer.from(text))).toBe(type);
  });
  test('the JSON ends at a NUL, as the server reads it', () => {
    expect(parseQuery(Buffer.from('[1,[2,[1]],{}]\0garbage'))).toEqual([1, [2, [1]], {}]);
    expect(parseQuery(Buffer.from('[1,{x'))).toBeUndefined();
  });
});

describe('what a review found', () => {
  const classify = (text) => {
    const body = Buffer.from(text);
    return classifyQuery(parseQuery(body), countMemberColons(body));
  };
  test('a term type that is not a plain integer (the server reads its low 32 bits: 2^32 + 56 is an INSERT) is untracked, never retried', () => {
    expect(classify('[1,[2,[[4294967352,[[15,["a"]],[2,[{"x":1},{"x":2}]]]],[43,[[15,["b"]]]]]],{}]')).toMatchObject({ retry: null, untracked: true });
    expect(classify('[1,[56,[[15,["t"]],{"a":[4294967352,[[15,["u"]],[2,[{},{}]]]]}]],{}]')).toMatchObject({ retry: null, untracked: true });
    expect(classify('[1,[2,[1]],{"noreply":[4294967297,true]}]')).toMatchObject({ untracked: true });
    // Plain data that only looks odd (an array of floats as a term's args) is not.
    expect(classify('[1,[2,[0.5,4294967352]],{}]')).toMatchObject({ retry: 'read', untracked: false });
  });
  test('colons after a NUL are not counted; bytes that are not UTF-8 are not read', () => {
    expect(classify('[1,[56,[[15,[[14,["app"]],"t"]],{"a":1}]],{}]\0:')).toMatchObject({ retry: 'write', duplicateKeys: false });
    expect(parseQuery(Buffer.concat([Buffer.from('[1,[2,[{"'), Buffer.from([0xff]), Buffer.from('":1}]],{}]')]))).toBeUndefined();
  });
});
