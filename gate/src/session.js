// One client connection through the gate: one upstream connection of its own, the handshake relayed byte for byte
// (the gate holds no credentials; permissions stay the user's), then frames relayed both ways. A START query that
// may be sent again (protocol.js classifyQuery) and is answered OP_FAILED is sent again after a short backoff, until
// it is answered otherwise or the retry budget runs out (then the client gets the last error). Everything else passes
// as it came; other tokens flow meanwhile. If the upstream connection breaks, the client's is closed: the gate cannot
// know what was applied.

import {
  ERROR_TYPE, RESPONSE, SERVER_HANDSHAKE_MESSAGES, V1_0, classifyQuery, createFrameReader, errorClassOf, errorTypeOf, handshakeFailed,
  peekResponseType, retryDelayMs, splitNullTerminated,
} from './protocol.js';

const CLIENT_HANDSHAKE_MESSAGES = 2;
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
  // token (string) -> { raw, retryable, attempts, firstSentAt, timer }
  const inFlight = new Map();
  let closed = false;
  let draining = false;

  metrics.connectionOpened();
  client.on('data', (chunk) => guard(() => onClientData(chunk)));
  client.on('error', (err) => close(`client: ${err.message}`));
  client.on('close', () => close('the client closed'));

  function guard(fn) {
    try {
      fn();
    } catch (err) {
      log.warn({ err: err.message, code: err.code }, 'connection closed: protocol error');
      metrics.protocolError(err.code === 'FRAME_TOO_LARGE' ? 'frame_too_large' : 'garbage');
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
    for (const frame of frames) {
      noteQuery(frame);
      write(upstream, frame.raw, client);
    }
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
    if (clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES) { clientHandshake.held.push(chunk); return; }
    let offset = 0;
    while (clientHandshake.seen < CLIENT_HANDSHAKE_MESSAGES) {
      const end = chunk.indexOf(0, offset);
      if (end < 0) break;
      clientHandshake.seen += 1;
      offset = end + 1;
    }
    const handshakeBytes = clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES ? chunk.subarray(0, offset) : chunk;
    write(upstream, handshakeBytes, client);
    if (clientHandshake.seen >= CLIENT_HANDSHAKE_MESSAGES && offset < chunk.length) clientHandshake.held.push(chunk.subarray(offset));
  }

  function onUpstreamData(chunk) {
    if (phase !== 'frames') {
      const { messages, rest } = splitNullTerminated(Buffer.concat([serverHandshake.partial, chunk]));
      const upTo = [];
      for (const message of messages) {
        upTo.push(message, Buffer.from([0]));
        serverHandshake.seen += 1;
        if (handshakeFailed(message)) {
          write(client, Buffer.concat(upTo), upstream);
          metrics.handshakeFailed();
          close('the server refused the handshake', { graceful: true });
          return;
        }
        if (serverHandshake.seen === SERVER_HANDSHAKE_MESSAGES) break;
      }
      if (upTo.length > 0) write(client, Buffer.concat(upTo), upstream);
      if (serverHandshake.seen < SERVER_HANDSHAKE_MESSAGES) {
        serverHandshake.partial = rest;
        return;
      }
      // Done: both sides speak frames from here on.
      phase = 'frames';
      const after = Buffer.concat(messages.slice(SERVER_HANDSHAKE_MESSAGES).flatMap((m) => [m, Buffer.from([0])]).concat([rest]));
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
  function noteQuery(frame) {
    const key = frame.token.toString();
    // Only a START is classified: CONTINUE, STOP and NOREPLY_WAIT belong to a query already in flight (or none).
    if (frame.body[1] === 0x31 && frame.body[0] === 0x5b && (frame.body[2] === 0x2c || frame.body[2] === 0x5d)) {
      const query = JSON.parse(frame.body.toString('utf8'));
      const verdict = classifyQuery(query);
      metrics.query(verdict.retryable ? 'retryable' : 'not_retryable');
      const noreply = query[2]?.noreply === true;
      if (!noreply) inFlight.set(key, { raw: verdict.retryable ? Buffer.from(frame.raw) : null, retryable: verdict.retryable, attempts: 0, firstSentAt: clock.now(), timer: null });
    }
  }

  function onResponse(frame) {
    const key = frame.token.toString();
    const entry = inFlight.get(key);
    const type = peekResponseType(frame.body);
    if (entry?.retryable && type === RESPONSE.RUNTIME_ERROR && errorTypeOf(frame.body) === ERROR_TYPE.OP_FAILED && retryLater(key, entry, frame)) return;
    if (entry && type === RESPONSE.SUCCESS_PARTIAL) entry.retryable = false;
    if (entry && (type === null || TERMINAL.has(type))) {
      inFlight.delete(key);
      if (entry.attempts > 0) metrics.held(clock.now() - entry.firstSentAt, type === RESPONSE.RUNTIME_ERROR ? 'gave_up' : 'answered');
    }
    write(client, frame.raw, upstream);
    if (draining && inFlight.size === 0) close('drained', { graceful: true });
  }

  // Sends the query again after its backoff if the budget allows; false when it does not (the error goes to the client).
  function retryLater(key, entry, frame) {
    const delayMs = retryDelayMs(entry.attempts + 1, config.retry);
    if (clock.now() + delayMs - entry.firstSentAt > config.retry.budgetMs) {
      metrics.gaveUp(errorClassOf(frame.body));
      return false;
    }
    entry.attempts += 1;
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
      if (inFlight.size === 0) close('drained', { graceful: true });
    },
    destroy: (reason = 'the gate is stopping') => close(reason),
    inFlight: () => inFlight.size,
  };
}
