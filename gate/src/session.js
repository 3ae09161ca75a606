// One client connection through the gate: one upstream connection of its own, the handshake relayed byte for byte
// (the gate holds no credentials; permissions stay the user's), then frames relayed both ways. A START query that
// may be sent again (protocol.js classifyQuery) and is answered OP_FAILED is sent again after a short backoff, until
// it is answered otherwise or the retry budget runs out (then the client gets the last error). Everything else passes
// as it came; other tokens flow meanwhile. If the upstream connection breaks, the client's is closed: the gate cannot
// know what was applied.

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
export function createSession({
  client, connectUpstream, config, metrics, clock, logger, onClose = () => {},
}) {
  const log = logger;
  let upstream = null;
  let phase = 'magic';
  let magic = Buffer.alloc(0);
  let clientHandshake = { seen: 0, held: [] };
  let serverHandshake = { seen: 0, partial: Buffer.alloc(0) };
  const fromClient = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  const fromUpstream = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  // token (string) -> { raw, retryable, attempts, firstSentAt, timer, lastError, streaming, awaiting }: the queries
  // sent and not finally answered. streaming: answered SUCCESS_PARTIAL (a cursor or a changefeed); awaiting: a CONTINUE
  // of it is out. A drain waits for every entry but the streaming ones with nothing out.
  const inFlight = new Map();
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
    // The answers of one chunk go down in one write (cork), all but those held for a retry.
    client.cork();
    try {
      for (const frame of fromUpstream.push(chunk)) onResponse(frame);
    } finally {
      process.nextTick(() => client.uncork());
    }
  }

  // A query on its way up: a START is classified and kept until its answer (with its bytes, if it may be sent again).
  // Returns whether the frame goes up: a STOP for a query waiting to be sent again ends it here (see below).
  function noteQuery(frame) {
    const key = frame.token.toString();
    const type = queryTypeOf(frame.body);
    const entry = inFlight.get(key);
    if (type === QUERY.START) {
      // A token used again: whatever was kept for it is over (a retry still waiting is not sent).
      if (entry?.timer) clearTimeout(entry.timer);
      let query = null;
      try { query = JSON.parse(frame.body.toString('utf8')); } catch { /* relayed as it is: the server answers CLIENT_ERROR */ }
      const verdict = query ? classifyQuery(query) : { retryable: false };
      metrics.query(verdict.retryable ? 'retryable' : 'not_retryable');
      if (query && isNoreplyQuery(query)) { inFlight.delete(key); noreplyOutstanding = true; return true; }
      inFlight.set(key, {
        raw: verdict.retryable ? Buffer.from(frame.raw) : null, retryable: verdict.retryable, attempts: 0, firstSentAt: clock.now(), timer: null, lastError: null,
        streaming: false, awaiting: false,
      });
      return true;
    }
    if (type === QUERY.STOP && entry?.timer) {
      // The client gives up on a query the gate holds to send again: it is not sent, and the client gets the error
      // that query met (the write was not performed), as if the gate had not held it.
      clearTimeout(entry.timer);
      inFlight.delete(key);
      metrics.gaveUp('stopped');
      write(client, entry.lastError, upstream);
      return false;
    }
    if (type === QUERY.CONTINUE && entry) entry.awaiting = true;
    if (type === QUERY.NOREPLY_WAIT || type === QUERY.SERVER_INFO) {
      inFlight.set(key, {
        raw: null, retryable: false, attempts: 0, firstSentAt: clock.now(), timer: null, lastError: null, streaming: false, awaiting: false,
      });
    }
    return true;
  }

  function onResponse(frame) {
    const key = frame.token.toString();
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
      if (!closed) write(upstream, entry.raw, client);
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
  };
}

