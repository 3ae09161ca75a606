// Pure: RethinkDB's client protocol (V1_0) as the query gate needs it. The handshake's messages are relayed as they
// are; what is decided here is where the handshake ends, how frames are cut, whether a query may be sent again, and
// whether an answer is the refusal that makes it so. Constants from the rethinkdb driver's proto-def (ql2.proto).
//
// The retry rule (classifyQuery, singleRowWrite, retryAfter), and why it is safe, from RethinkDB 2.4.4's source (paths
// under src/) and what a real 2.4.4 server did:
// - OP_FAILED speaks of the term that failed, not of the query. A datum_exc_t from a table access gets the backtrace
//   of the term whose evaluation caught it (rdb_protocol/term.cc), and availability errors came back with b: [] from
//   anywhere in a query (measured): neither the error type nor the backtrace says whether an earlier write committed.
//   So the gate decides by the query's shape, and sends again only a query that cannot have written anything when it
//   is refused for availability:
// - A read-only query (no write term anywhere, global optargs included: the server evaluates them again on every use,
//   rdb_protocol/optargs.cc) changes nothing.
// - One write of one row at the query's root: its arguments (the table, the object, the key, the update's function)
//   are evaluated before the write, and nothing after it. It is one dispatch to one shard
//   (clustering/query_routing/table_query_client.cc, dispatch_immediate_op). "primary replica for shard ... not
//   available" and "too many primary replicas available" are raised there while the shards are chosen, before any is
//   contacted; "The primary replica is currently changing ... The write was not performed" and "isn't connected to a
//   quorum of replicas. The write was not performed" are the primary's refusals before it applies the write
//   (clustering/table_contract/executor/exec_primary.cc, primary_execution_t::on_write). Each is query_state_t::FAILED,
//   which rdb_protocol/real_table.cc turns into OP_FAILED "Cannot perform write: ..."; a primary that lost contact
//   during the write is INDETERMINATE (OP_INDETERMINATE), never sent again.
//   The one refusal that is not OP_FAILED: "Unexpected exception: The attempt to read or modify the table's
//   configuration failed because none of the servers were accessible." (INTERNAL), when the table's config cannot be
//   read for the write's write hook, which real_table.cc does before dispatching anything (CONFIG_UNREACHABLE below).
// - Nothing larger. An insert is cut into batches of 128 documents (real_table.cc), a stream or a selection into
//   stream batches (rdb_protocol/terms/writes.cc), and a later batch's refusal is a plain OP_FAILED after earlier
//   batches committed: on a real server an insert of a 5,000-row stream into a table with one of its two shards down
//   answered OP_FAILED "Cannot perform write: primary replica ... not available" after writing 3,968 rows. Terms over
//   sequences or grouped data run a write term once per element or group (rdb_protocol/op.cc, obj_or_seq.cc).
// - The server reads a term's or a query's type as the low 32 bits of any JSON number (rapidjson GetInt), so a type
//   that is not a plain integer is refused (a query's) or makes the query untracked (a term's): 4294967352 is an
//   INSERT to the server.

import { isUtf8 } from 'node:buffer';

export const V1_0 = 0x34c2bdc3;
export const QUERY = Object.freeze({ START: 1, CONTINUE: 2, STOP: 3, NOREPLY_WAIT: 4, SERVER_INFO: 5 });
export const RESPONSE = Object.freeze({
  SUCCESS_ATOM: 1, SUCCESS_SEQUENCE: 2, SUCCESS_PARTIAL: 3, WAIT_COMPLETE: 4, SERVER_INFO: 5, CLIENT_ERROR: 16, COMPILE_ERROR: 17, RUNTIME_ERROR: 18,
});
export const ERROR_TYPE = Object.freeze({ INTERNAL: 1000000, OP_FAILED: 4100000, OP_INDETERMINATE: 4200000 });

// Terms that write documents.
const WRITE_TERMS = new Set([53, 54, 55, 56]); // UPDATE, DELETE, REPLACE, INSERT
const [UPDATE, DELETE, REPLACE, INSERT] = [53, 54, 55, 56];
// Terms whose query is never sent again: a changefeed, side effects outside the database (HTTP, JAVASCRIPT), and
// administration (databases, tables, indexes, reconfiguration, permissions). FOR_EACH writes per element.
const NEVER_RETRIED = new Map([
  [68, 'forEach'], [152, 'changes'], [153, 'r.http'], [11, 'r.js'],
  [57, 'dbCreate'], [58, 'dbDrop'], [60, 'tableCreate'], [61, 'tableDrop'], [75, 'indexCreate'], [76, 'indexDrop'], [156, 'indexRename'],
  [176, 'reconfigure'], [179, 'rebalance'], [138, 'sync'], [188, 'grant'], [189, 'setWriteHook'],
]);
const DATUM_TERM = 1;
const MAKE_OBJ_TERM = 3;
const DB_TERM = 14;
const TABLE_TERM = 15;
const GET_TERM = 16;
const SYSTEM_DB = 'rethinkdb';

// A global optarg as the server reads it: a bare value, or a DATUM term ([1, value]).
const datumOf = (value) => (Array.isArray(value) && value[0] === 1 && value.length === 2 ? value[1] : value);
const isObject = (value) => value !== null && typeof value === 'object' && !Array.isArray(value);

// What the gate needs to know of a START, in one walk of its JSON (an explicit stack: no nesting a client sends can
// exhaust it):
// - `retry`: which OP_FAILED answers it may be sent again after (retryAfter below), or null for none:
//   'read' for a query with no write term (and none of the terms above), 'write' for a query that is one write of
//   one row and nothing else (singleRowWrite below).
// - `tables` ('db.table'; a table without a db is in the query's `db` optarg, else `test`, as the server reads it),
//   `unknownTables` (a table's name or db is computed: any hold covers it) and `writes` (a write term, or a read with
//   read_mode majority, which RethinkDB runs as a write: what a handover refuses, and what holds keep back).
// - `duplicateKeys`: the same key twice in one JSON object. JSON.parse keeps the last value; the server reads the first
//   noreply and refuses the query ("Duplicate object key", "Duplicate global optional argument", "Duplicate optional
//   argument": measured on 2.4.4), so it never runs. The session relays such a query without tracking it.
// query: the parsed JSON [type, term, globalOptargs]; memberColons: countMemberColons() of its bytes, when known.
export function classifyQuery(query, memberColons = null) {
  const none = {
    retry: null, retryable: false, tables: [], unknownTables: false, writes: false, duplicateKeys: false, untracked: false,
  };
  if (!Array.isArray(query) || typeof query[0] !== 'number') return { ...none, reason: 'not a query' };
  if (query[0] !== QUERY.START) return { ...none, reason: 'not a START' };
  const options = isObject(query[2]) ? query[2] : {};
  const found = {
    writes: 0, never: null, tables: new Set(), unknownTables: false, majority: datumOf(options.read_mode) === 'majority',
    defaultDb: literalDb(options.db) ?? (options.db === undefined ? 'test' : null), members: 0, oddType: false,
  };
  walk(query.slice(1), found, true);
  const tables = [...found.tables];
  const duplicateKeys = memberColons !== null && memberColons !== found.members;
  // untracked: the gate cannot know whether the server runs it or answers it (a duplicate key; a term type that is
  // not a plain integer, which the server reads by its low 32 bits, e.g. 4294967352 is an INSERT to it).
  const untracked = duplicateKeys || found.oddType;
  const facts = {
    tables, unknownTables: found.unknownTables, writes: found.writes > 0 || found.majority, duplicateKeys, untracked,
  };
  const no = (reason) => ({ retry: null, retryable: false, reason, ...facts });
  if (duplicateKeys) return no('a duplicate object key');
  if (found.oddType) return no('a term type that is not a plain integer');
  if (isNoreplyQuery(query)) return no('noreply');
  if (found.never) return no(found.never);
  if (found.writes === 0) return { retry: 'read', retryable: true, reason: 'read-only', ...facts };
  if (found.writes > 1) return no(`${found.writes} write terms`);
  if (!singleRowWrite(query[1], found.defaultDb)) return no('a write that is not one row at the query\'s root');
  return { retry: 'write', retryable: true, reason: 'one write of one row', ...facts };
}

// Whether `term` (the query's root) is a write of exactly one row, in one of these forms, its table named by literal
// strings outside the system database:
//   table.insert({...})                     INSERT of one object (a JSON object, MAKE_OBJ, or a DATUM holding one);
//   table.get(key).update|replace(...)      a point write;
//   table.get(key).delete()
// Such a write is one dispatch to one shard: RethinkDB refuses it whole or applies it (retryAfter says why). Anything
// else is not: an insert of an array or a stream is dispatched batch by batch and shard by shard (measured on 2.4.4:
// an insert of a 5,000-row stream into a table one of whose two shards had no primary answered OP_FAILED "Cannot
// perform write: primary replica for shard ... not available" after 3,968 rows were written); an update of a selection
// likewise; and a write under another term can be followed by anything that fails after it committed.
export function singleRowWrite(term, defaultDb) {
  if (!Array.isArray(term) || !Array.isArray(term[1])) return false;
  const [type, args] = term;
  if (type === INSERT) return args.length === 2 && userTable(args[0], defaultDb) && isOneObject(args[1]);
  if (type === UPDATE || type === REPLACE || type === DELETE) {
    const get = args[0];
    return args.length === (type === DELETE ? 1 : 2) && Array.isArray(get) && get[0] === GET_TERM && Array.isArray(get[1])
      && get[1].length === 2 && get[2] === undefined && userTable(get[1][0], defaultDb);
  }
  return false;
}

function isOneObject(term) {
  if (isObject(term)) return true;
  if (!Array.isArray(term)) return false;
  if (term[0] === MAKE_OBJ_TERM) return Array.isArray(term[1]) && term[1].length === 0;
  return term[0] === DATUM_TERM && term.length === 2 && isObject(term[1]);
}

// A TABLE term whose db and name are literal strings, and not the system database.
function userTable(term, defaultDb) {
  if (!Array.isArray(term) || term[0] !== TABLE_TERM) return false;
  const name = tableName(term, defaultDb);
  return name !== null && !name.startsWith(`${SYSTEM_DB}.`);
}

// The name in a DB term ([14, ["name"]]), or null when it is not a literal.
function literalDb(term) {
  return Array.isArray(term) && term[0] === DB_TERM && Array.isArray(term[1]) && typeof term[1][0] === 'string' ? term[1][0] : null;
}

// A TABLE term's 'db.table', or null when its db or name is computed.
function tableName(term, defaultDb) {
  const args = Array.isArray(term[1]) ? term[1] : [];
  const name = args.at(-1);
  if (typeof name !== 'string') return null;
  const db = args.length === 2 ? literalDb(args[0]) : defaultDb;
  return db === null ? null : `${db}.${name}`;
}

// Every node of the query's JSON, once, with an explicit stack, read where the server reads terms: a term is
// [type, args, optargs], each of its args and each optarg's value a term, a JSON object's values terms. Whatever else
// a term array holds is read as terms too (reading too many only makes the gate retry less and hold more). Every
// object's keys are counted (`members`), for the duplicate check. roots: the term positions to start from.
function walk(roots, found) {
  const stack = [...roots].reverse();
  while (stack.length > 0) {
    const node = stack.pop();
    if (Array.isArray(node)) {
      if (typeof node[0] === 'number') {
        noteTerm(node, found);
        for (let i = node.length - 1; i >= 2; i -= 1) stack.push(node[i]);
        const args = node[1];
        if (Array.isArray(args)) for (let i = args.length - 1; i >= 0; i -= 1) stack.push(args[i]);
        else if (args !== undefined) stack.push(args);
      } else {
        for (let i = node.length - 1; i >= 0; i -= 1) stack.push(node[i]);
      }
    } else if (node !== null && typeof node === 'object') {
      for (const key in node) {
        found.members += 1;
        stack.push(node[key]);
      }
    }
  }
}

function noteTerm(term, found) {
  const type = term[0];
  if (!Number.isInteger(type) || type < 0 || type > 0xffff) {
    found.oddType = true;
    found.unknownTables = true;
    found.writes += 1;
    return;
  }
  if (NEVER_RETRIED.has(type)) found.never ??= NEVER_RETRIED.get(type);
  // The system tables (users, permissions, table_config...) are administration too.
  if (type === DB_TERM && Array.isArray(term[1]) && term[1][0] === SYSTEM_DB) found.never ??= 'the rethinkdb system database';
  if (WRITE_TERMS.has(type)) found.writes += 1;
  if (type === TABLE_TERM) {
    const name = tableName(term, found.defaultDb);
    if (name === null) found.unknownTables = true;
    else found.tables.add(name);
    if (isObject(term[2]) && datumOf(term[2].read_mode) === 'majority') found.majority = true;
  }
}

// The colons outside strings in a JSON text: one per object member. A text JSON.parse accepted has more of them than
// the parsed objects have keys exactly when one object repeats a key.
export function countMemberColons(body) {
  let n = 0;
  let inString = false;
  // As parseQuery reads it: up to a NUL.
  const nul = body.indexOf(0);
  const end = nul >= 0 ? nul : body.length;
  for (let i = 0; i < end; i += 1) {
    const byte = body[i];
    if (inString) {
      if (byte === 0x5c) i += 1; // a backslash: the next byte is escaped
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x3a) n += 1;
  }
  return n;
}

// noreply as the server reads it (a bare true, or a DATUM term holding true): no answer will come.
export function isNoreplyQuery(query) {
  const options = query[2] && typeof query[2] === 'object' && !Array.isArray(query[2]) ? query[2] : {};
  return datumOf(options.noreply) === true;
}

// The query's type from its first bytes ([1, ... for a START, [2] for a CONTINUE ...), without parsing it; null if
// it does not start like a query. JSON's whitespace may come before and after the type, as the server's parser
// allows (" [1,", "[ 1 ,": measured, both run on 2.4.4); a type with a fraction or an exponent is not one (the
// server answers "Unrecognized QueryType: 0").
export function queryTypeOf(body) {
  let i = skipWhitespace(body, 0);
  if (body[i] !== 0x5b) return null;
  i = skipWhitespace(body, i + 1);
  const digit = body[i];
  if (!(digit >= 0x31 && digit <= 0x35)) return null;
  i = skipWhitespace(body, i + 1);
  return body[i] === 0x2c || body[i] === 0x5d ? digit - 0x30 : null;
}

function skipWhitespace(body, from) {
  let i = from;
  while (body[i] === 0x20 || body[i] === 0x0a || body[i] === 0x0d || body[i] === 0x09) i += 1;
  return i;
}

// A query's JSON as the server reads it: up to its first NUL byte, if any (the server parses the frame in place, and a
// NUL ends its input: "[1,...]\0anything" runs). -> the parsed value, or undefined when it is not JSON.
export function parseQuery(body) {
  const nul = body.indexOf(0);
  // Not UTF-8: two different byte strings could decode to one key; refused rather than guessed at.
  if (!isUtf8(nul >= 0 ? body.subarray(0, nul) : body)) return undefined;
  try {
    return JSON.parse((nul >= 0 ? body.subarray(0, nul) : body).toString('utf8'));
  } catch {
    return undefined;
  }
}

// The answer the gate gives itself to a query it will not relay (a CLIENT_ERROR for its token, as the server words
// one): the server never sees the query, so nothing of it runs.
export const NOT_JSON = 'Client is buggy (failed to deserialize query).';
export const TYPE_NOT_PLAIN = 'Client is buggy: rethinkdb-query-gate reads a query\'s type only as a plain integer from 1 to 5.';
export function clientErrorFrame(raw, message) {
  return answerFrame(raw, { t: RESPONSE.CLIENT_ERROR, r: [message], b: [] });
}

// An answer the gate writes itself, for the query whose frame is `raw` (its token).
function answerFrame(raw, answer) {
  const body = Buffer.from(JSON.stringify(answer));
  const header = Buffer.alloc(12);
  raw.copy(header, 0, 0, 8);
  header.writeUInt32LE(body.length, 8);
  return Buffer.concat([header, body]);
}

// The answer to a query that reaches a stopping gate on a connection it is about to close: OP_FAILED (RethinkDB's
// "definitely not applied"), because the gate never relayed it. A client reconnects (the Service sends it to another
// gate) and sends it again, whatever the query: examples/clients/ match this message.
export const GATE_STOPPING = 'Cannot run the query: the query gate is stopping and closes this connection; the query was not sent to RethinkDB. Reconnect and send it again.';
export function opFailedFrame(raw, message) {
  return answerFrame(raw, { t: RESPONSE.RUNTIME_ERROR, e: ERROR_TYPE.OP_FAILED, r: [message], b: [] });
}

// The response type from the start of a response's JSON body, without parsing it (the server writes "t" first:
// {"t":1,"r":[...]}); null when it is not there.
export function peekResponseType(body) {
  // The server's own form ({"t":N), read byte by byte; anything else through the pattern below.
  if (body[0] === 0x7b && body[1] === 0x22 && body[2] === 0x74 && body[3] === 0x22 && body[4] === 0x3a) {
    let type = 0;
    let i = 5;
    for (; i < 8 && body[i] >= 0x30 && body[i] <= 0x39; i += 1) type = type * 10 + body[i] - 0x30;
    if (i > 5 && (body[i] === 0x2c || body[i] === 0x7d)) return type;
  }
  const head = body.subarray(0, 16).toString('latin1');
  const match = /^\{\s*"t"\s*:\s*(\d+)/.exec(head);
  return match ? Number(match[1]) : null;
}

// The error type of a RUNTIME_ERROR response body (parsed: error answers are small), or null.
export function errorTypeOf(body) {
  return parseAnswer(body)?.e ?? null;
}

function parseAnswer(body) {
  try {
    const parsed = JSON.parse(body.toString('utf8'));
    return isObject(parsed) && typeof parsed.e === 'number' ? parsed : null;
  } catch {
    return null;
  }
}

// The answers after which a query may be sent again: OP_FAILED with one of the messages RethinkDB gives when it could
// not reach a shard's primary, or the primary refused the operation before acting on it (see the top of this file).
// "primary replica ... not available" and "too many primary replicas available" (two servers claim a shard for a
// moment, as when a lost server comes back) are raised while table_query_client.cc chooses the shards, before any is
// contacted.
// Nothing else: not a table or database that does not exist (it will not exist 3 s later either), not a user's error.
const READ_REFUSED = /^Cannot perform read: (?:primary replica for shard .* not available|too many primary replicas available|The primary replica is currently changing|The primary replica isn't connected to a quorum of replicas|lost contact with primary replica|no replica is available)/s;
const WRITE_REFUSED = /^Cannot perform write: (?:primary replica for shard .* not available|too many primary replicas available|The primary replica is currently changing|The primary replica isn't connected to a quorum of replicas\. The write was not performed)/s;

// The table's config could not be read (src/clustering/table_manager/table_meta_client.hpp, failed_table_op_exc_t:
// no server of the table answered, as while the table's Raft leader is lost and no new one is elected). A write reads
// its table's config first, for its write hook (src/rdb_protocol/real_table.cc, get_write_hook at the top of
// write_batched_replace and write_batched_insert), before any batch is dispatched; the exception is not caught on the
// way and reaches the client as INTERNAL, "Unexpected exception: ..." (src/rdb_protocol/query_cache.cc).
const CONFIG_UNREACHABLE = /^Unexpected exception: The attempt to read or modify the table's configuration failed because none of the servers were accessible\./;

// Whether a query of this `retry` kind (classifyQuery) may be sent again after this answer (a response body).
export function retryAfter(retry, body) {
  if (retry !== 'read' && retry !== 'write') return false;
  const answer = parseAnswer(body);
  if (answer?.t !== RESPONSE.RUNTIME_ERROR || !Array.isArray(answer.r)) return false;
  const message = answer.r[0];
  if (typeof message !== 'string') return false;
  if (answer.e === ERROR_TYPE.INTERNAL) return CONFIG_UNREACHABLE.test(message);
  return answer.e === ERROR_TYPE.OP_FAILED && (retry === 'read' ? READ_REFUSED : WRITE_REFUSED).test(message);
}

// A short class of an error's text, for the retry metric's label (a handover's two messages, or other).
export function errorClassOf(body) {
  const text = body.toString('utf8', 0, Math.min(body.length, 4096));
  if (text.includes('primary replica is currently changing')) return 'primary_changing';
  if (text.includes('not available')) return 'primary_not_available';
  return 'other';
}

// The handshake, relayed as it is: the client sends the magic number, then null-terminated JSON messages; the
// server answers with null-terminated messages, three when it succeeds (its version, the first and the last SCRAM
// answers). The handshake is over once the server has sent three, or one with "success": false (it then closes).
export const SERVER_HANDSHAKE_MESSAGES = 3;

// Splits `buffer` at null bytes: { messages: [Buffer], rest: Buffer }.
export function splitNullTerminated(buffer) {
  const messages = [];
  let start = 0;
  for (let i = buffer.indexOf(0, start); i >= 0; i = buffer.indexOf(0, start)) {
    messages.push(buffer.subarray(start, i));
    start = i + 1;
  }
  return { messages, rest: buffer.subarray(start) };
}

export function handshakeFailed(message) {
  try {
    return JSON.parse(message.toString('utf8')).success === false;
  } catch {
    return true;
  }
}

// A frame's token as a Map key, read from its first 8 bytes (little-endian): a number below 2^53 (what drivers send,
// a counter), else its decimal string (never equal to a number key). Cheaper than a BigInt for every frame.
export function tokenKey(raw) {
  const high = raw.readUInt32LE(4);
  return high < 0x200000 ? high * 0x100000000 + raw.readUInt32LE(0) : raw.readBigUInt64LE(0).toString();
}

// Cuts frames (8-byte token, 4-byte little-endian length, body) from a stream. push(chunk) returns the frames that
// are complete: [{ key (tokenKey), body (Buffer), raw (Buffer: header and body) }]; throws FRAME_TOO_LARGE for a
// length above maxFrameBytes, so that a peer cannot make the gate hold an unbounded buffer. The chunks of a frame
// are kept in a list and joined once, when it is complete (joining at every chunk cost time in the square of a large
// frame's size).
export function createFrameReader({ maxFrameBytes }) {
  let chunks = [];
  let total = 0;
  let need = null;
  const join = () => {
    if (chunks.length > 1) chunks = [Buffer.concat(chunks, total)];
    return chunks[0];
  };
  return {
    push(chunk) {
      chunks.push(chunk);
      total += chunk.length;
      const frames = [];
      for (;;) {
        if (need === null) {
          if (total < 12) break;
          const length = (chunks[0].length >= 12 ? chunks[0] : join()).readUInt32LE(8);
          if (length > maxFrameBytes) throw Object.assign(new Error(`a frame of ${length} bytes is over the limit of ${maxFrameBytes}`), { code: 'FRAME_TOO_LARGE' });
          need = 12 + length;
        }
        if (total < need) break;
        const buffer = join();
        const raw = buffer.subarray(0, need);
        frames.push({ key: tokenKey(raw), body: raw.subarray(12), raw });
        const rest = buffer.subarray(need);
        chunks = rest.length > 0 ? [rest] : [];
        total = rest.length;
        need = null;
      }
      return frames;
    },
    buffered: () => total,
  };
}

// The backoff before the attempt-th retry (1-based): minMs doubling up to maxMs.
export function retryDelayMs(attempt, { minMs, maxMs }) {
  return Math.min(maxMs, minMs * 2 ** (attempt - 1));
}
