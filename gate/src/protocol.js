// Pure: RethinkDB's client protocol (V1_0) as the query gate needs it. The handshake's messages are relayed as they
// are; what is decided here is where the handshake ends, how frames are cut, whether a query may be sent again, and
// whether an answer is the refusal that makes it so. Constants from the rethinkdb driver's proto-def (ql2.proto).
//
// Why a retry of OP_FAILED is safe (RethinkDB 2.4.4's source): a write that meets a primary handover is refused
// before it is queued (src/clustering/table_contract/executor/exec_primary.cc, primary_execution_t::on_write) and
// answered OP_FAILED, "The write was not performed"; "primary replica for shard ... not available"
// (src/clustering/query_routing/table_query_client.cc) is refused the same way. A write that may have been applied
// is answered OP_INDETERMINATE: a multi-shard write some shards of which succeeded, a batched write an earlier batch
// of which committed. The one case the error type does not cover is a query with several independent write terms (two
// inserts in one r.expr([...]), a forEach): each is classified on its own, so the query can answer OP_FAILED after an
// earlier term was applied. Those queries are never sent again.

export const V1_0 = 0x34c2bdc3;
export const QUERY = Object.freeze({ START: 1, CONTINUE: 2, STOP: 3, NOREPLY_WAIT: 4, SERVER_INFO: 5 });
export const RESPONSE = Object.freeze({
  SUCCESS_ATOM: 1, SUCCESS_SEQUENCE: 2, SUCCESS_PARTIAL: 3, WAIT_COMPLETE: 4, SERVER_INFO: 5, CLIENT_ERROR: 16, COMPILE_ERROR: 17, RUNTIME_ERROR: 18,
});
export const ERROR_TYPE = Object.freeze({ OP_FAILED: 4100000, OP_INDETERMINATE: 4200000 });

// Terms that write documents: at most one of them in a query that may be sent again.
const WRITE_TERMS = new Set([53, 54, 55, 56]); // UPDATE, DELETE, REPLACE, INSERT
// Terms whose query is never sent again: a write per element (FOR_EACH), a changefeed, side effects outside the
// database (HTTP, JAVASCRIPT), and administration (databases, tables, indexes, reconfiguration, permissions).
const NEVER_RETRIED = new Map([
  [68, 'forEach'], [152, 'changes'], [153, 'r.http'], [11, 'r.js'],
  [57, 'dbCreate'], [58, 'dbDrop'], [60, 'tableCreate'], [61, 'tableDrop'], [75, 'indexCreate'], [76, 'indexDrop'], [156, 'indexRename'],
  [176, 'reconfigure'], [179, 'rebalance'], [138, 'sync'], [188, 'grant'], [189, 'setWriteHook'],
]);
const DB_TERM = 14;
const TABLE_TERM = 15;
const SYSTEM_DB = 'rethinkdb';

// A global optarg as the server reads it: a bare value, or a DATUM term ([1, value]).
const datumOf = (value) => (Array.isArray(value) && value[0] === 1 && value.length === 2 ? value[1] : value);

// What the gate needs to know of a query, in one walk of its term tree: whether it may be sent again after an
// OP_FAILED answer ({ retryable, reason }), and the tables it names, for holds (./holds.js): `tables`, as 'db.table'
// (a table without a db is in the query's `db` optarg, else `test`, as the server reads it), `unknownTables`, true
// when a table's name or db is not a literal (computed in the query: any hold covers it), and `writes`, true when it
// holds a write term or reads with read_mode majority (which RethinkDB runs as a write: both are what a handover
// refuses, and what holds keep back). query: the parsed JSON
// [type, term, globalOptargs]. Only a START holding at most one write term (read-only included), with none of the
// terms above, and not noreply, may be sent again.
export function classifyQuery(query) {
  const none = { tables: [], unknownTables: false, writes: false };
  if (!Array.isArray(query) || typeof query[0] !== 'number') return { retryable: false, reason: 'not a query', ...none };
  if (query[0] !== QUERY.START) return { retryable: false, reason: 'not a START', ...none };
  const options = query[2] && typeof query[2] === 'object' && !Array.isArray(query[2]) ? query[2] : {};
  const found = {
    writes: 0, never: null, tables: new Set(), unknownTables: false, majority: datumOf(options.read_mode) === 'majority',
    defaultDb: literalDb(options.db) ?? (options.db === undefined ? 'test' : null),
  };
  walk(query[1], found);
  for (const value of Object.values(options)) walk(value, found);
  const tables = [...found.tables];
  const facts = { tables, unknownTables: found.unknownTables, writes: found.writes > 0 || found.majority };
  if (isNoreplyQuery(query)) return { retryable: false, reason: 'noreply', ...facts };
  if (found.never) return { retryable: false, reason: found.never, ...facts };
  if (found.writes > 1) return { retryable: false, reason: `${found.writes} write terms`, ...facts };
  return { retryable: true, reason: found.writes === 1 ? 'one write term' : 'read-only', ...facts };
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

// A term is [type, args, optargs]; a JSON object is a datum whose values are terms; anything else is a datum.
function walk(term, found) {
  if (Array.isArray(term)) {
    if (typeof term[0] !== 'number') return;
    if (NEVER_RETRIED.has(term[0])) found.never ??= NEVER_RETRIED.get(term[0]);
    // The system tables (users, permissions, table_config...) are administration too.
    if (term[0] === DB_TERM && Array.isArray(term[1]) && term[1][0] === SYSTEM_DB) found.never ??= 'the rethinkdb system database';
    if (WRITE_TERMS.has(term[0])) found.writes += 1;
    if (term[0] === TABLE_TERM) {
      const name = tableName(term, found.defaultDb);
      if (name === null) found.unknownTables = true;
      else found.tables.add(name);
      if (datumOf(term[2]?.read_mode) === 'majority') found.majority = true;
    }
    if (Array.isArray(term[1])) for (const arg of term[1]) walk(arg, found);
    if (term[2] && typeof term[2] === 'object' && !Array.isArray(term[2])) for (const value of Object.values(term[2])) walk(value, found);
    return;
  }
  if (term && typeof term === 'object') for (const value of Object.values(term)) walk(value, found);
}

// noreply as the server reads it (a bare true, or a DATUM term holding true): no answer will come.
export function isNoreplyQuery(query) {
  const options = query[2] && typeof query[2] === 'object' && !Array.isArray(query[2]) ? query[2] : {};
  return datumOf(options.noreply) === true;
}

// The query's type from its first bytes ([1, ... for a START, [2] for a CONTINUE ...), without parsing it; null if
// it does not start like a query.
export function queryTypeOf(body) {
  if (body[0] !== 0x5b || body[1] < 0x31 || body[1] > 0x35 || (body[2] !== 0x2c && body[2] !== 0x5d)) return null;
  return body[1] - 0x30;
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
  try {
    const parsed = JSON.parse(body.toString('utf8'));
    return typeof parsed.e === 'number' ? parsed.e : null;
  } catch {
    return null;
  }
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
