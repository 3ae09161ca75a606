// One client connection through the gate: one upstream connection of its own, the handshake relayed byte for byte
// (the gate holds no credentials; permissions stay the user's), then frames relayed both ways. A START query that
// may be sent again (protocol.js classifyQuery) and is answered OP_FAILED is sent again after a short backoff, until
// it is answered otherwise or the retry budget runs out (then the client gets the last error). Everything else passes
// as it came; other tokens flow meanwhile. If the upstream connection breaks, the client's is closed: the gate cannot
// know what was applied. While a hold (./holds.js) covers a write's tables, the write (or its retry) waits in the
// session's queue and goes up when no hold covers it any more, in the order it came, and at
// the latest once it has waited the longest a hold may last (config.hold.maxMs); a NOREPLY_WAIT waits behind the
// queries held before it, so that it still means what the client meant. Past config.hold.maxQueuedBytes held, the
// gate stops reading the client until the queue empties.

import {
  ERROR_TYPE, QUERY, RESPONSE, SERVER_HANDSHAKE_MESSAGES, V1_0, classifyQuery, createFrameReader, errorClassOf, errorTypeOf, handshakeFailed,
  isNoreplyQuery, peekResponseType, queryTypeOf, retryDelayMs, splitNullTerminated,
} from './protocol.js';

const CLIENT_HANDSHAKE_MESSAGES = 2;
// What a client may send after its handshake before the server has finished its side; more is not a driver.
const MAX_HELD_BYTES = 1024 * 1024;
// A connection closed gracefully (its last bytes sent) is destroyed if it has not closed by itself after this.
const GRACEFUL_CLOSE_MS = 2000;
const TERMINAL = new Set([RESPONSE.SUCCESS_ATOM, RESPONSE.SUCCESS_SEQUENCE, RESPONSE.WAIT_COMPLETE, RESPONSE.SERVER_INFO,
  RESPONSE.CLIENT_ERROR, RESPONSE.COMPILE_ERROR, RESPONSE.RUNTIME_ERROR]);

// client: the accepted socket. connectUpstream(): a socket to the upstream (connecting). config: the gate's retry and
// frame settings. onClose(): called once when both sides are closed.
// holds: the gate's holds (./holds.js), or null when there are none.
export function createSession({
  client, connectUpstream, config, metrics, clock, logger, holds = null, onClose = () => {},
}) {
  const log = logger;
  let upstream = null;
  let phase = 'magic';
  let magic = Buffer.alloc(0);
  let clientHandshake = { seen: 0, held: [] };
  let serverHandshake = { seen: 0, partial: Buffer.alloc(0) };
  const fromClient = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  const fromUpstream = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  // token (tokenKey) -> { raw, retryable, attempts, firstSentAt, timer, lastError, streaming, awaiting, facts, held }: the
  // queries sent (or held) and not finally answered. streaming: answered SUCCESS_PARTIAL (a cursor or a changefeed);
  // awaiting: a CONTINUE of it is out; facts: the tables it names, when it names any; held: it waits in `queued`. A
  // drain waits for every entry but the streaming ones with nothing out.
  const inFlight = new Map();
  // Frames held while a hold covers their query, in the order they came: { key, raw, kind, facts, since }, kind 'start'
  // (a new query), 'retry' (sent again), 'follow' (a CONTINUE or STOP of a held query) or 'wait' (a NOREPLY_WAIT).
  let queued = [];
  let queuedBytes = 0;
  let queueTimer = null;
  const maxHeldMs = config.hold?.maxMs ?? 5000;
  const maxQueuedBytes = config.hold?.maxQueuedBytes ?? 16 * 1024 * 1024;
  let closed = false;
  let draining = false;
  // A noreply write was sent and no WAIT_COMPLETE has come since: a drain waits for the client's noreplyWait (a
  // driver's close sends one), so that closing does not cut it off.
  let noreplyOutstanding = false;

  metrics.connectionOpened();
  client.on('data', (chunk) => guard(() => onClientData(chunk)));
  client.on('error', (err) => close(`client: ${err.message}`));
  client.on('close', () => close('the client closed'));

  function guard(fn) {
    try {
      fn();
    } catch (err) {
      log.warn({ err: err.message, code: err.code }, 'connection closed: protocol error');
      metrics.protocolError({ FRAME_TOO_LARGE: 'frame_too_large', HELD_TOO_MUCH: 'held_too_much' }[err.code] ?? 'garbage');
      close(err.message);
    }
  }

  function onClientData(chunk) {
    if (phase === 'magic') {
      magic = Buffer.concat([magic, chunk]);
      if (magic.length < 4) return;
      if (magic.readUInt32LE(0) !== V1_0) {
        metrics.protocolError('version');
        client.end(Buffer.from('ERROR: Received an unsupported protocol version. rethinkdb-query-gate speaks only the V1_0 protocol (RethinkDB 2.3 and later drivers).\0'));
        close('unsupported protocol version', { graceful: true });
        return;
      }
      phase = 'handshake';
      openUpstream(magic);
      return;
    }
    if (phase === 'handshake') { relayClientHandshake(chunk); return; }
    sendFrames(fromClient.push(chunk));
  }

  // Whole frames only go up (in one corked write): a retried query is sent again between two frames, never inside
  // one that arrived split across chunks.
  function sendFrames(frames) {
    if (frames.length === 0) return;
    // One frame (a client with one query out, the usual case): written as it is, with no cork to undo.
    if (frames.length === 1) { if (noteQuery(frames[0])) write(upstream, frames[0].raw, client); return; }
    upstream.cork();
    for (const frame of frames) if (noteQuery(frame)) write(upstream, frame.raw, client);
    process.nextTick(() => upstream.uncork());
  }

  function openUpstream(first) {
    upstream = connectUpstream();
    upstream.on('data', (chunk) => guard(() => onUpstreamData(chunk)));
    upstream.on('error', (err) => close(`upstream: ${err.message}`));
    upstream.on('close', () => close('the upstream connection closed'));
    upstream.on('drain', () => client.resume());
    client.on('drain', () => upstream?.resume());
    // The magic number and whatever came with it (the client's first message).
    const rest = first.subarray(4);
    write(upstream, first.subarray(0, 4), client);
    if (rest.length > 0) relayClientHandshake(rest);
  }

  // The client's handshake messages go up as they are; bytes after its last one are frames, held until the server
  // has finished its side (a driver waits for it; held only in case one does not).
  function relayClientHandshake(chunk) {
    if (clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES) { hold(chunk); return; }
    let offset = 0;
    while (clientHandshake.seen < CLIENT_HANDSHAKE_MESSAGES) {
      const end = chunk.indexOf(0, offset);
      if (end < 0) break;
      clientHandshake.seen += 1;
      offset = end + 1;
    }
    const handshakeBytes = clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES ? chunk.subarray(0, offset) : chunk;
    write(upstream, handshakeBytes, client);
    if (clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES && offset < chunk.length) hold(chunk.subarray(offset));
  }

  function hold(bytes) {
    clientHandshake.held.push(bytes);
    clientHandshake.heldBytes = (clientHandshake.heldBytes ?? 0) + bytes.length;
    if (clientHandshake.heldBytes > MAX_HELD_BYTES) throw Object.assign(new Error(`the client sent more than ${MAX_HELD_BYTES} bytes before the handshake ended`), { code: 'HELD_TOO_MUCH' });
  }

  function onUpstreamData(chunk) {
    if (phase !== 'frames') {
      const bytes = Buffer.concat([serverHandshake.partial, chunk]);
      const { messages, rest } = splitNullTerminated(bytes);
      // Where the handshake's messages end in these bytes: what follows is frames, relayed as such.
      let end = 0;
      for (const message of messages) {
        end += message.length + 1;
        serverHandshake.seen += 1;
        if (handshakeFailed(message)) {
          write(client, bytes.subarray(0, end), upstream);
          metrics.handshakeFailed();
          close('the server refused the handshake', { graceful: true });
          return;
        }
        if (serverHandshake.seen === SERVER_HANDSHAKE_MESSAGES) break;
      }
      if (end > 0) write(client, bytes.subarray(0, end), upstream);
      if (serverHandshake.seen < SERVER_HANDSHAKE_MESSAGES) {
        serverHandshake.partial = rest;
        return;
      }
      // Done: both sides speak frames from here on.
      phase = 'frames';
      const after = bytes.subarray(end);
      serverHandshake = null;
      const held = clientHandshake.held;
      clientHandshake = { seen: CLIENT_HANDSHAKE_MESSAGES, held: [] };
      for (const chunkHeld of held) sendFrames(fromClient.push(chunkHeld));
      if (after.length > 0) for (const frame of fromUpstream.push(after)) onResponse(frame);
      return;
    }
    // The answers of one chunk go down in one write (cork), all but those held for a retry; one answer as it is.
    const frames = fromUpstream.push(chunk);
    if (frames.length <= 1) { if (frames.length === 1) onResponse(frames[0]); return; }
    client.cork();
    try {
      for (const frame of frames) onResponse(frame);
    } finally {
      process.nextTick(() => client.uncork());
    }
  }

  // A query on its way up: a START is classified and kept until its answer (with its bytes, if it may be sent again).
  // Returns whether the frame goes up: a STOP for a query waiting to be sent again ends it here (see below).
  function noteQuery(frame) {
    const { key } = frame;
    const type = queryTypeOf(frame.body);
    const entry = inFlight.get(key);
    if (type === QUERY.START) {
      // A token used again: whatever was kept for it is over (a retry still waiting is not sent).
      if (entry?.timer) clearTimeout(entry.timer);
      let query = null;
      try { query = JSON.parse(frame.body.toString('utf8')); } catch { /* relayed as it is: the server answers CLIENT_ERROR */ }
      const verdict = query ? classifyQuery(query) : { retryable: false };
      metrics.query(verdict.retryable ? 'retryable' : 'not_retryable');
      const facts = verdict.writes && (verdict.tables.length > 0 || verdict.unknownTables)
        ? { tables: verdict.tables, unknownTables: verdict.unknownTables, writes: true } : null;
      const held = Boolean(holds?.covers(facts));
      // One copy of the bytes, kept for a retry and for the queue alike.
      const raw = held || verdict.retryable ? Buffer.from(frame.raw) : null;
      if (held) { enqueue({ key, raw, kind: 'start', facts }); metrics.heldQuery(); }
      if (query && isNoreplyQuery(query)) { inFlight.delete(key); noreplyOutstanding = true; return !held; }
      inFlight.set(key, {
        raw: verdict.retryable ? raw : null, retryable: verdict.retryable, attempts: 0, firstSentAt: clock.now(), timer: null, lastError: null,
        streaming: false, awaiting: false, facts, held,
      });
      return !held;
    }
    // The client gives up on a query the gate holds to send again (on its backoff, or kept back by a hold): it is not
    // sent, and the client gets the error that query met (the write was not performed), as if the gate had not held it.
    const heldRetry = entry?.held && queued.some((q) => q.key === key && q.kind === 'retry');
    if (type === QUERY.STOP && (entry?.timer || heldRetry)) {
      if (entry.timer) clearTimeout(entry.timer);
      if (heldRetry) dequeue((q) => q.key !== key);
      inFlight.delete(key);
      metrics.gaveUp('stopped');
      write(client, entry.lastError, upstream);
      return false;
    }
    // A frame of a held query, or a NOREPLY_WAIT behind held queries, waits its turn.
    if (entry?.held || (type === QUERY.NOREPLY_WAIT && queued.length > 0)) {
      if (type === QUERY.NOREPLY_WAIT) inFlight.set(key, { ...waitEntry(), held: true });
      if (type === QUERY.CONTINUE && entry) entry.awaiting = true;
      enqueue({ key, raw: Buffer.from(frame.raw), kind: type === QUERY.NOREPLY_WAIT ? 'wait' : 'follow' });
      return false;
    }
    if (type === QUERY.CONTINUE && entry) entry.awaiting = true;
    if (type === QUERY.NOREPLY_WAIT || type === QUERY.SERVER_INFO) inFlight.set(key, waitEntry());
    return true;
  }

  function waitEntry() {
    return {
      raw: null, retryable: false, attempts: 0, firstSentAt: clock.now(), timer: null, lastError: null, streaming: false, awaiting: false, facts: null, held: false,
    };
  }

  // Queues a held frame; past maxQueuedBytes the client is not read until the queue empties (a client cannot make the
  // gate hold more than that, whatever it sends while a hold lasts).
  function enqueue(item) {
    queued.push({ ...item, since: clock.now() });
    queuedBytes += item.raw.length;
    if (queuedBytes > maxQueuedBytes) client.pause();
    scheduleQueueExpiry();
  }

  // Keeps the queued items `keep` says to keep.
  function dequeue(keep) {
    queued = queued.filter(keep);
    queuedBytes = queued.reduce((n, item) => n + item.raw.length, 0);
    if (queuedBytes <= maxQueuedBytes && !closed) client.resume();
    scheduleQueueExpiry();
  }

  // Holds may follow each other on one table (or on any, for a query that computes its table): the oldest item goes
  // up once it has waited maxHeldMs, whatever holds are in force then.
  function scheduleQueueExpiry() {
    if (queueTimer) { clearTimeout(queueTimer); queueTimer = null; }
    if (queued.length === 0 || closed) return;
    queueTimer = setTimeout(() => { queueTimer = null; guard(releaseHeld); }, Math.max(0, queued[0].since + maxHeldMs - clock.now()));
    queueTimer.unref?.();
  }

  // A hold ended (or an item waited its longest): the held frames no hold covers any more go up, in the order they
  // came. A frame stays when its query is still covered and it has not waited maxHeldMs, when an earlier frame of its
  // token stays, and (a NOREPLY_WAIT) when anything before it stays.
  function releaseHeld() {
    if (closed || queued.length === 0 || phase !== 'frames') return;
    const now = clock.now();
    const staying = new Set();
    const keep = [];
    const send = [];
    for (const item of queued) {
      const covered = (item.kind === 'start' || item.kind === 'retry') && holds.covers(item.facts);
      const stays = staying.has(item.key) || (covered && now - item.since < maxHeldMs) || (item.kind === 'wait' && keep.length > 0);
      if (stays) { staying.add(item.key); keep.push(item); } else send.push(item);
    }
    if (send.length === 0) { scheduleQueueExpiry(); return; }
    dequeue((item) => keep.includes(item));
    upstream.cork();
    for (const item of send) {
      const entry = inFlight.get(item.key);
      if (entry && !staying.has(item.key)) {
        entry.held = false;
        // The time held does not count against the retry budget.
        if (item.kind === 'start') entry.firstSentAt = now;
        if (item.kind === 'retry') entry.firstSentAt += now - item.since;
      }
      write(upstream, item.raw, client);
    }
    process.nextTick(() => upstream.uncork());
  }

  // The writes sent, not held and not finally answered, that name one of `tables` (a Set) or a computed table.
  function inFlightTouching(tables) {
    let n = 0;
    for (const entry of inFlight.values()) if (!entry.held && holds.touches(entry.facts, tables)) n += 1;
    return n;
  }

  function onResponse(frame) {
    const { key } = frame;
    const entry = inFlight.get(key);
    const type = peekResponseType(frame.body);
    if (entry?.retryable && type === RESPONSE.RUNTIME_ERROR && errorTypeOf(frame.body) === ERROR_TYPE.OP_FAILED && retryLater(key, entry, frame)) return;
    if (entry && type === RESPONSE.SUCCESS_PARTIAL) {
      // Streaming: never sent again, its bytes no longer kept; it holds a drain only while a CONTINUE is out.
      Object.assign(entry, { retryable: false, raw: null, streaming: true, awaiting: false });
    }
    if (type === RESPONSE.WAIT_COMPLETE) noreplyOutstanding = false;
    if (entry && (type === null || TERMINAL.has(type))) {
      if (entry.timer) clearTimeout(entry.timer);
      inFlight.delete(key);
      if (entry.attempts > 0) metrics.held(clock.now() - entry.firstSentAt, type === RESPONSE.RUNTIME_ERROR ? 'gave_up' : 'answered');
    }
    write(client, frame.raw, upstream);
    if (draining && pendingCount() === 0) close('drained', { graceful: true });
  }

  // The queries a drain waits for: all but the streaming ones with no CONTINUE out (a changefeed never ends).
  function pendingCount() {
    let n = noreplyOutstanding ? 1 : 0;
    for (const entry of inFlight.values()) if (!entry.streaming || entry.awaiting) n += 1;
    return n;
  }

  // Sends the query again after its backoff if the budget allows; false when it does not (the error goes to the client).
  function retryLater(key, entry, frame) {
    const delayMs = retryDelayMs(entry.attempts + 1, config.retry);
    if (clock.now() + delayMs - entry.firstSentAt > config.retry.budgetMs) {
      metrics.gaveUp(errorClassOf(frame.body));
      return false;
    }
    entry.attempts += 1;
    entry.lastError = Buffer.from(frame.raw);
    metrics.retry(errorClassOf(frame.body));
    entry.timer = setTimeout(() => {
      entry.timer = null;
      if (closed) return;
      // A hold that began meanwhile keeps the retry back too.
      if (holds?.covers(entry.facts)) { entry.held = true; enqueue({ key, raw: entry.raw, kind: 'retry', facts: entry.facts }); metrics.heldQuery(); return; }
      write(upstream, entry.raw, client);
    }, delayMs);
    return true;
  }

  // Writes, and stops reading the other side while the receiver's buffer is full (a client that never reads holds
  // only its own connection, never the gate's memory).
  function write(to, bytes, from) {
    if (closed || !to || to.destroyed) return;
    if (!to.write(bytes) && from) from.pause();
  }

  function close(reason, { graceful = false } = {}) {
    if (closed) return;
    closed = true;
    for (const entry of inFlight.values()) if (entry.timer) clearTimeout(entry.timer);
    inFlight.clear();
    queued = [];
    queuedBytes = 0;
    if (queueTimer) clearTimeout(queueTimer);
    if (graceful) {
      client.end();
      upstream?.end();
      // A peer that never reads (its FIN queued behind unsent bytes) or never closes its side is not waited for.
      setTimeout(() => { client.destroy(); upstream?.destroy(); }, GRACEFUL_CLOSE_MS).unref();
    } else {
      client.destroy();
      upstream?.destroy();
    }
    metrics.connectionClosed();
    log.debug({ reason }, 'connection closed');
    onClose();
  }

  return {
    // SIGTERM: close once nothing is in flight (at once if nothing is).
    drain() {
      draining = true;
      if (pendingCount() === 0) close('drained', { graceful: true });
    },
    destroy: (reason = 'the gate is stopping') => close(reason),
    inFlight: () => pendingCount(),
    releaseHeld: () => guard(releaseHeld),
    inFlightTouching,
    heldCount: () => queued.length,
  };
}

