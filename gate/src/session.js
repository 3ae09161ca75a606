// One client connection through the gate: one upstream connection of its own, the handshake relayed byte for byte
// (the gate holds no credentials; permissions stay the user's), then frames relayed both ways. A START query that
// may be sent again (protocol.js classifyQuery: read-only, or one write of one row at its root) and is answered
// OP_FAILED with an availability refusal (protocol.js retryAfter) is sent again after a short backoff, until it is
// answered otherwise or the retry budget runs out (then the client gets the last error). Everything else passes
// as it came; other tokens flow meanwhile. If the upstream connection breaks, the client's is closed: the gate cannot
// know what was applied. While a hold (./holds.js) covers a write's tables, the write (or its retry) waits in the
// session's queue and goes up when no hold covers it any more, in the order it came, and at
// the latest once it has waited the longest a hold may last (config.hold.maxMs); a NOREPLY_WAIT waits behind the
// queries held before it, so that it still means what the client meant. Past config.hold.maxQueuedBytes held, the
// gate stops reading the client until the queue empties.

import {
  GATE_STOPPING, NOT_JSON, QUERY, RESPONSE, opFailedFrame, SERVER_HANDSHAKE_MESSAGES, TYPE_NOT_PLAIN, V1_0, classifyQuery, clientErrorFrame, countMemberColons, createFrameReader,
  errorClassOf, handshakeFailed, isNoreplyQuery, parseQuery, peekResponseType, queryTypeOf, retryAfter, retryDelayMs, splitNullTerminated,
} from './protocol.js';
import { createByteBudget, createShare } from './budget.js';

const CLIENT_HANDSHAKE_MESSAGES = 2;
const TOKEN_IN_USE = 'Client is buggy: rethinkdb-query-gate got a START on a token whose query is still in flight.';
// What a client may send after its handshake before the server has finished its side; more is not a driver.
const MAX_HELD_BYTES = 1024 * 1024;
// A connection closed gracefully (its last bytes sent) is destroyed if it has not closed by itself after this.
const GRACEFUL_CLOSE_MS = 2000;
const TERMINAL = new Set([RESPONSE.SUCCESS_ATOM, RESPONSE.SUCCESS_SEQUENCE, RESPONSE.WAIT_COMPLETE, RESPONSE.SERVER_INFO,
  RESPONSE.CLIENT_ERROR, RESPONSE.COMPILE_ERROR, RESPONSE.RUNTIME_ERROR]);

// client: the accepted socket. connectUpstream(): a socket to the upstream (connecting). config: the gate's retry and
// frame settings. onClose(): called once when both sides are closed.
// holds: the gate's holds (./holds.js), or null when there are none.
// budgets: the gate-wide byte budgets (./budget.js): `retained` (copies kept for a retry or a hold) and `partial`
// (half-received frames, both ways); one of their own when not given. onLimit(kind, details): a bound bit.
export function createSession({
  client, connectUpstream, config, metrics, clock, logger, holds = null, onClose = () => {},
  budgets = { retained: createByteBudget({ limit: Infinity }), partial: createByteBudget({ limit: Infinity }) }, onLimit = () => {},
}) {
  const log = logger;
  // This connection's share of the gate-wide retained budget (GATE_MAX_RETAINED_BYTES_PER_CONNECTION).
  const retained = createShare(budgets.retained, { limit: config.maxRetainedBytesPerConnection ?? 16 * 1024 * 1024 });
  const retainedLimit = () => ({ limitBytes: retained.shortOf() === 'connection' ? retained.limit : budgets.retained.limit, per: retained.shortOf() });
  let upstream = null;
  let phase = 'magic';
  let magic = Buffer.alloc(0);
  let clientHandshake = { seen: 0, held: [] };
  let serverHandshake = { seen: 0, partial: Buffer.alloc(0) };
  const fromClient = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  const fromUpstream = createFrameReader({ maxFrameBytes: config.maxFrameBytes });
  // Bytes of half-received frames counted in budgets.partial, per side; since when the client's reader has held bytes
  // without completing a frame (a frame must arrive whole within config.frameTimeoutMs).
  const partial = { client: 0, upstream: 0 };
  let partialSince = null;
  // The same for an answer half-received from the upstream: it stays half while the client does not read (the gate
  // stops reading the upstream then), and holds gate-wide budget meanwhile.
  let upstreamPartialSince = null;
  let readingHeld = false;
  // token (tokenKey) -> { raw, retainedBytes, retry, attempts, firstSentAt, heldMs, timer, lastError, streaming, awaiting, facts,
  // held }: the queries sent (or held) and not finally answered. raw: the bytes kept for a retry (retainedBytes of them
  // counted in budgets.retained); retry: classifyQuery's kind, null when it is never sent again; heldMs: how long holds
  // have kept it back in all; streaming: answered SUCCESS_PARTIAL (a cursor or a changefeed); awaiting: a CONTINUE of it
  // is out; facts: the tables it names, when it names any; held: it waits in `queued`. A drain waits for every entry but
  // the streaming ones with nothing out.
  const inFlight = new Map();
  // Frames held while a hold covers their query, in the order they came: { key, raw, bytes, kind, facts, since,
  // queuedAt }, kind 'start' (a new query), 'retry' (sent again), 'follow' (a CONTINUE or STOP of a held query) or
  // 'wait' (a NOREPLY_WAIT); bytes: what it counts in budgets.retained; since: when its time held began (a retry's
  // starts earlier by the time it was held before: GATE_HOLD_MAX_MS bounds its time held in all).
  let queued = [];
  let queuedBytes = 0;
  let queueTimer = null;
  const maxHeldMs = config.hold?.maxMs ?? 5000;
  const maxQueuedBytes = config.hold?.maxQueuedBytes ?? 16 * 1024 * 1024;
  let closed = false;
  // Draining (the gate stopping): a new query is answered GATE_STOPPING, never relayed; the connection closes once
  // nothing of it is in flight and the client has sent nothing for drainIdleMs (a client that sends its next query as
  // soon as it has an answer would otherwise find the connection closing under that query, not knowing whether it
  // ran).
  let draining = false;
  // A query was answered GATE_STOPPING: the client has been told, so the connection closes as soon as nothing of it is
  // in flight (a client that does not reconnect on that answer would otherwise keep it open with more queries, each
  // answered the same, until the drain's end).
  let toldStopping = false;
  let drainTimer = null;
  let lastClientFrameAt = clock.now();
  const drainIdleMs = config.drainIdleMs ?? 200;
  // A noreply write was sent and no WAIT_COMPLETE has come since: a drain waits for the client's noreplyWait (a
  // driver's close sends one), so that closing does not cut it off.
  let noreplyOutstanding = false;

  metrics.connectionOpened();
  const handshakeTimer = setTimeout(() => {
    if (phase === 'frames' || closed) return;
    onLimit('handshake_timeout', { timeoutMs: config.handshakeTimeoutMs });
    close('no handshake within the time-out');
  }, config.handshakeTimeoutMs ?? 10000);
  handshakeTimer.unref?.();
  client.on('data', (chunk) => guard(() => onClientData(chunk)));
  client.on('error', (err) => close(`client: ${err.message}`));
  client.on('close', () => close('the client closed'));

  function guard(fn) {
    try {
      fn();
    } catch (err) {
      if (err.code === 'PARTIAL_FRAMES') {
        onLimit('partial_frame_bytes', { limitBytes: budgets.partial.limit });
      } else {
        log.warn({ err: err.message, code: err.code }, 'connection closed: protocol error');
        metrics.protocolError({ FRAME_TOO_LARGE: 'frame_too_large', HELD_TOO_MUCH: 'held_too_much' }[err.code] ?? 'garbage');
      }
      close(err.message);
    }
  }

  // Frames cut from one side's bytes; the bytes still waiting for the rest of a frame are counted gate-wide, and past
  // the gate's limit this connection is closed (the one whose frame would go over it).
  function framesFrom(side, reader, chunk) {
    const frames = reader.push(chunk);
    const pending = reader.buffered();
    if (side === 'client') {
      if (pending === 0 || readingHeld) partialSince = null;
      else if (frames.length > 0 || partialSince === null) partialSince = clock.now();
    } else if (pending === 0) upstreamPartialSince = null;
    else if (frames.length > 0 || upstreamPartialSince === null) upstreamPartialSince = clock.now();
    if (pending !== partial[side]) {
      budgets.partial.add(pending - partial[side]);
      partial[side] = pending;
      if (pending > 0 && budgets.partial.over()) {
        throw Object.assign(new Error(`half-received frames hold more than ${budgets.partial.limit} bytes in the gate (GATE_MAX_PARTIAL_FRAME_BYTES)`), { code: 'PARTIAL_FRAMES' });
      }
    }
    return frames;
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
    sendFrames(framesFrom('client', fromClient, chunk));
  }

  // Whole frames only go up (in one corked write): a retried query is sent again between two frames, never inside
  // one that arrived split across chunks.
  function sendFrames(frames) {
    if (frames.length === 0) return;
    // One frame (a client with one query out, the usual case): written as it is, with no cork to undo.
    if (frames.length === 1) { if (noteQuery(frames[0])) write(upstream, frames[0].raw); return; }
    upstream.cork();
    for (const frame of frames) if (noteQuery(frame)) write(upstream, frame.raw);
    process.nextTick(() => upstream.uncork());
  }

  function openUpstream(first) {
    upstream = connectUpstream();
    upstream.on('data', (chunk) => guard(() => onUpstreamData(chunk)));
    upstream.on('error', (err) => close(`upstream: ${err.message}`));
    upstream.on('close', () => close('the upstream connection closed'));
    upstream.on('drain', flow);
    client.on('drain', flow);
    // The magic number and whatever came with it (the client's first message).
    const rest = first.subarray(4);
    write(upstream, first.subarray(0, 4));
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
    write(upstream, handshakeBytes);
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
          write(client, bytes.subarray(0, end));
          metrics.handshakeFailed();
          close('the server refused the handshake', { graceful: true });
          return;
        }
        if (serverHandshake.seen === SERVER_HANDSHAKE_MESSAGES) break;
      }
      if (end > 0) write(client, bytes.subarray(0, end));
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
      clearTimeout(handshakeTimer);
      for (const chunkHeld of held) sendFrames(framesFrom('client', fromClient, chunkHeld));
      if (after.length > 0) for (const frame of framesFrom('upstream', fromUpstream, after)) onResponse(frame);
      return;
    }
    // The answers of one chunk go down in one write (cork), all but those held for a retry; one answer as it is.
    const frames = framesFrom('upstream', fromUpstream, chunk);
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
    lastClientFrameAt = clock.now();
    // Stopping: a new query that expects an answer gets one from the gate (not run); a noreply one goes up (its
    // client expects nothing back, and the drain waits for its noreplyWait).
    if (draining && type === QUERY.START && !entry) {
      const query = parseQuery(frame.body);
      if (query === undefined || !isNoreplyQuery(query)) {
        metrics.stoppingAnswer();
        write(client, opFailedFrame(frame.raw, GATE_STOPPING));
        toldStopping = true;
        closeIfDrained();
        return false;
      }
    }
    // A type the gate cannot read plainly that the server could read as one (it reads the low 32 bits of any number:
    // 4294967297 and 1.0000000000000002 are a START to it): refused here, never relayed.
    if (type === null && typeof parseQuery(frame.body)?.[0] === 'number') { refuse(frame, TYPE_NOT_PLAIN); return false; }
    if (type === QUERY.START) {
      // A token whose query is still in flight or held: refused (an answer to the old query could not be told from one
      // to the new, nor a held retry of it from the new query). Drivers use a token again only once it is answered.
      if (entry || (queued.length > 0 && queued.some((q) => q.key === key))) { refuse(frame, TOKEN_IN_USE); return false; }
      const query = parseQuery(frame.body);
      // Not JSON to the gate: refused here, as the server words it (whatever the gate cannot read, it does not relay).
      if (query === undefined) { refuse(frame, NOT_JSON); return false; }
      const verdict = classifyQuery(query, countMemberColons(frame.body));
      // A key twice in one object (the server refuses to run it, and answers or not as the first noreply says), or a
      // term type that is not a plain integer (the gate cannot know what the server reads). Relayed untracked: never
      // sent again, never held, its answer (if any) passed on as it comes.
      if (verdict.untracked) { metrics.query('not_retryable'); return true; }
      const facts = verdict.writes && (verdict.tables.length > 0 || verdict.unknownTables)
        ? { tables: verdict.tables, unknownTables: verdict.unknownTables, writes: true } : null;
      // One copy of the bytes, kept for a retry and for the queue alike, each counted in the gate's budget: past it the
      // query is neither kept for a retry nor held (it goes up now, as it would through no gate).
      const bytes = frame.raw.length;
      let held = Boolean(holds?.covers(facts));
      if (held && !retained.take(bytes)) { held = false; onLimit('retained_bytes', { ...retainedLimit(), held: true }); }
      let { retry } = verdict;
      if (retry && !retained.take(bytes)) { retry = null; onLimit('retained_bytes', retainedLimit()); }
      metrics.query(retry ? 'retryable' : 'not_retryable');
      const raw = held || retry ? Buffer.from(frame.raw) : null;
      if (held) { enqueue({ key, raw, bytes, kind: 'start', facts }); metrics.heldQuery(); }
      // (classifyQuery never gives a noreply query a retry: its copy, if any, is the queue's.)
      if (isNoreplyQuery(query)) {
        noreplyOutstanding = true;
        return !held;
      }
      inFlight.set(key, {
        raw: retry ? raw : null, retainedBytes: retry ? bytes : 0, retry, attempts: 0, firstSentAt: clock.now(), heldMs: 0, timer: null,
        lastError: null, streaming: false, awaiting: false, facts, held,
      });
      return !held;
    }
    // The client gives up on a query the gate holds to send again (on its backoff, or kept back by a hold): it is not
    // sent, and the client gets the error that query met (the write was not performed), as if the gate had not held it.
    const heldRetry = entry?.held && queued.some((q) => q.key === key && q.kind === 'retry');
    if (type === QUERY.STOP && (entry?.timer || heldRetry)) {
      if (heldRetry) dequeue((q) => q.key !== key);
      forget(key, entry);
      metrics.gaveUp('stopped');
      write(client, entry.lastError);
      return false;
    }
    // A frame of a held query, or a NOREPLY_WAIT behind held queries, waits its turn.
    if (entry?.held || (type === QUERY.NOREPLY_WAIT && queued.length > 0)) {
      if (type === QUERY.NOREPLY_WAIT) inFlight.set(key, { ...waitEntry(), held: true });
      if (type === QUERY.CONTINUE && entry) entry.awaiting = true;
      // Kept whatever the budget says (a query's later frames cannot go up before it); per connection, at most
      // maxQueuedBytes before the client is no longer read.
      retained.add(frame.raw.length);
      enqueue({ key, raw: Buffer.from(frame.raw), bytes: frame.raw.length, kind: type === QUERY.NOREPLY_WAIT ? 'wait' : 'follow' });
      return false;
    }
    if (type === QUERY.CONTINUE && entry) entry.awaiting = true;
    if (type === QUERY.NOREPLY_WAIT || type === QUERY.SERVER_INFO) inFlight.set(key, waitEntry());
    return true;
  }

  function refuse(frame, message) {
    metrics.protocolError('refused_query');
    write(client, clientErrorFrame(frame.raw, message));
  }

  function waitEntry() {
    return {
      raw: null, retainedBytes: 0, retry: null, attempts: 0, firstSentAt: clock.now(), heldMs: 0, timer: null, lastError: null, streaming: false,
      awaiting: false, facts: null, held: false,
    };
  }

  // An entry is over: its timer stopped, its copy's bytes given back to the budget.
  function forget(key, entry) {
    if (entry.timer) clearTimeout(entry.timer);
    retained.give(entry.retainedBytes);
    entry.retainedBytes = 0;
    entry.raw = null;
    inFlight.delete(key);
  }

  // Reading follows writing: the client is not read while the gate holds too much for it, or while either side has
  // not taken what was written to it (a client that never reads gets no more of its queries read); the upstream is
  // not read while the client has not taken its answers.
  function flow() {
    if (closed) return;
    // While the gate holds back reading for its own reasons (held queries, the upstream not taking more), a
    // half-received frame is not the client's fault: its time-out starts again when reading does. A client that does
    // not read its answers gets no such pause of its time-out.
    const held = queuedBytes > maxQueuedBytes || Boolean(upstream?.writableNeedDrain);
    if (held || client.writableNeedDrain) {
      client.pause();
      if (held) partialSince = null;
      readingHeld = held;
    } else {
      if (readingHeld && fromClient.buffered() > 0) partialSince = clock.now();
      readingHeld = false;
      client.resume();
    }
    if (!upstream) return;
    if (client.writableNeedDrain) upstream.pause();
    else upstream.resume();
  }

  // Queues a held frame; past maxQueuedBytes the client is not read until the queue empties (a client cannot make the
  // gate hold more than that, whatever it sends while a hold lasts).
  function enqueue(item) {
    const now = clock.now();
    queued.push({ since: now, ...item, queuedAt: now });
    queuedBytes += item.raw.length;
    if (queuedBytes > maxQueuedBytes) flow();
    scheduleQueueExpiry();
  }

  // Keeps the queued items `keep` says to keep; those not kept give their bytes back to the budget.
  function dequeue(keep) {
    const left = [];
    for (const item of queued) {
      if (keep(item)) left.push(item);
      else retained.give(item.bytes);
    }
    queued = left;
    queuedBytes = queued.reduce((n, item) => n + item.raw.length, 0);
    flow();
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
        // The time held does not count against the retry budget; it counts against GATE_HOLD_MAX_MS in all.
        if (item.kind === 'start') entry.firstSentAt = now;
        if (item.kind === 'retry') entry.firstSentAt += now - item.queuedAt;
        if (item.kind === 'start' || item.kind === 'retry') entry.heldMs = now - item.since;
      }
      write(upstream, item.raw);
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
    if (entry?.retry && type === RESPONSE.RUNTIME_ERROR && retryAfter(entry.retry, frame.body) && retryLater(key, entry, frame)) return;
    if (entry && type === RESPONSE.SUCCESS_PARTIAL) {
      // Streaming: never sent again, its bytes no longer kept; it holds a drain only while a CONTINUE is out.
      retained.give(entry.retainedBytes);
      Object.assign(entry, {
        retry: null, raw: null, retainedBytes: 0, streaming: true, awaiting: false,
      });
    }
    if (type === RESPONSE.WAIT_COMPLETE) noreplyOutstanding = false;
    if (entry && (type === null || TERMINAL.has(type))) {
      forget(key, entry);
      if (entry.attempts > 0) metrics.held(clock.now() - entry.firstSentAt, type === RESPONSE.RUNTIME_ERROR ? 'gave_up' : 'answered');
    }
    write(client, frame.raw);
    closeIfDrained();
  }

  // Draining: closes once nothing is in flight and either the client has been quiet for drainIdleMs or it has been
  // told the gate is stopping; else looks again when it will have been quiet for long enough.
  function closeIfDrained() {
    if (!draining || closed || pendingCount() > 0) return;
    const quietFor = clock.now() - lastClientFrameAt;
    if (toldStopping || quietFor >= drainIdleMs) { close('drained', { graceful: true }); return; }
    if (drainTimer) clearTimeout(drainTimer);
    drainTimer = setTimeout(() => { drainTimer = null; closeIfDrained(); }, drainIdleMs - quietFor);
    drainTimer.unref?.();
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
      // A hold that began meanwhile keeps the retry back too, for what is left of GATE_HOLD_MAX_MS after its earlier
      // holds (its copy is the entry's, counted there).
      if (holds?.covers(entry.facts)) {
        entry.held = true;
        enqueue({ key, raw: entry.raw, bytes: 0, kind: 'retry', facts: entry.facts, since: clock.now() - entry.heldMs });
        metrics.heldQuery();
        return;
      }
      write(upstream, entry.raw);
    }, delayMs);
    return true;
  }

  // Writes; while the receiver's buffer is full, reading stops as flow() says (a client that never reads holds only
  // its own connection, never the gate's memory).
  function write(to, bytes) {
    if (closed || !to || to.destroyed) return;
    if (!to.write(bytes)) flow();
  }

  function close(reason, { graceful = false } = {}) {
    if (closed) return;
    closed = true;
    clearTimeout(handshakeTimer);
    for (const [key, entry] of [...inFlight]) forget(key, entry);
    for (const item of queued) retained.give(item.bytes);
    queued = [];
    queuedBytes = 0;
    budgets.partial.add(-(partial.client + partial.upstream));
    partial.client = 0;
    partial.upstream = 0;
    if (queueTimer) clearTimeout(queueTimer);
    if (drainTimer) clearTimeout(drainTimer);
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
    // SIGTERM: close once nothing is in flight and the client is quiet (see closeIfDrained).
    drain() {
      draining = true;
      if (phase !== 'frames') { close('drained before its handshake ended', { graceful: true }); return; }
      closeIfDrained();
    },
    destroy: (reason = 'the gate is stopping') => close(reason),
    inFlight: () => pendingCount(),
    releaseHeld: () => guard(releaseHeld),
    inFlightTouching,
    heldCount: () => queued.length,
    // A frame begun and not completed within config.frameTimeoutMs closes the connection (the gate calls this each second).
    // An answer half-received from the upstream for as long closes it too.
    sweep(now) {
      if (closed) return;
      const limitMs = config.frameTimeoutMs ?? 60000;
      const stalled = [['query', partialSince, fromClient], ['answer', upstreamPartialSince, fromUpstream]]
        .find(([, since]) => since !== null && now - since > limitMs);
      if (!stalled) return;
      onLimit('frame_timeout', { timeoutMs: limitMs, frame: stalled[0], bufferedBytes: stalled[2].buffered() });
      close(`a ${stalled[0]} frame did not arrive whole within the time-out`);
    },
  };
}

