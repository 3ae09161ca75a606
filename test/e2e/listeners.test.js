// The ports as the runner starts them (src/listeners.js): the API port's listen failure names the port, and the
// eviction webhook, whose certificate files are not there yet, stays off and starts once they are, or never after
// it was stopped.

import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { httpListener, webhookListener } from '../../src/listeners.js';
import { eventually } from '../helpers/harness.js';
import { makeWebhookCertificate } from '../helpers/webhook-tls.js';

const recordingLogger = () => {
  const lines = [];
  const log = (level) => (fields, msg) => lines.push({ level, ...(typeof fields === 'string' ? { msg: fields } : { ...fields, msg }) });
  return { lines, debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error'), child: () => recordingLogger() };
};

// Until a condition holds, polled every 10 ms (the retry is a real timer of a few ms).
const until = (condition) => eventually(condition, { intervalMs: 10, timeoutMs: 5000 });

describe('httpListener', () => {
  test('when its port is taken, then start rejects, naming the port and the cause; on a free port it listens and stops', async () => {
    const holder = createServer();
    await new Promise((resolve) => { holder.listen(0, '127.0.0.1', resolve); });
    const { port } = holder.address();
    try {
      const taken = httpListener({ app: express(), host: '127.0.0.1', port, requestTimeoutMs: 1000, logger: recordingLogger() });
      await expect(taken.start()).rejects.toMatchObject({ code: 'HTTP_LISTEN_FAILED', listenCode: 'EADDRINUSE', message: expect.stringContaining(`127.0.0.1:${port} is already in use`) });
      expect(taken.port()).toBeNull();
    } finally {
      holder.close();
    }
    const free = httpListener({ app: express().get('/ping', (req, res) => res.json({ ok: true })), host: '127.0.0.1', port: 0, requestTimeoutMs: 1000, logger: recordingLogger() });
    const stop = await free.start();
    expect(await (await fetch(`http://127.0.0.1:${free.port()}/ping`)).json()).toEqual({ ok: true });
    stop();
  });
});

describe('webhookListener', () => {
  let tls;
  let dir;
  beforeAll(() => { tls = makeWebhookCertificate(); });
  afterAll(() => tls.remove());
  beforeEach(() => { dir = mkdtempSync(join(tmpdir(), 'webhook-files-')); });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const listenerIn = (logger) => webhookListener({
    app: express(), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), host: '127.0.0.1', port: 0, requestTimeoutMs: 1000, logger, retryMs: 20,
  });
  const mountFiles = () => {
    copyFileSync(tls.certFile, join(dir, 'tls.crt'));
    copyFileSync(tls.keyFile, join(dir, 'tls.key'));
  };

  test('when the certificate files are missing, then the start goes on with the webhook off, and it listens once they appear', async () => {
    const logger = recordingLogger();
    const listener = listenerIn(logger);
    const stop = await listener.start();
    expect(listener.port()).toBeNull();
    expect(logger.lines).toContainEqual(expect.objectContaining({ level: 'error', msg: expect.stringContaining('eviction webhook off for now') }));
    mountFiles();
    await until(() => listener.port() !== null);
    expect(logger.lines).toContainEqual(expect.objectContaining({ level: 'info', msg: 'eviction webhook listening (TLS)', port: listener.port() }));
    await stop();
  });

  test('when its files appear but its port is taken by then, then the failure is handed to onRetryFailed (the entry point exits 1 on it)', async () => {
    const holder = createServer();
    await new Promise((resolve) => { holder.listen(0, '127.0.0.1', resolve); });
    const failures = [];
    const listener = webhookListener({
      app: express(), certFile: join(dir, 'tls.crt'), keyFile: join(dir, 'tls.key'), host: '127.0.0.1', port: holder.address().port, requestTimeoutMs: 1000,
      logger: recordingLogger(), retryMs: 20, onRetryFailed: (err) => failures.push(err),
    });
    try {
      const stop = await listener.start();
      mountFiles();
      await until(() => failures.length > 0);
      expect(failures).toEqual([expect.objectContaining({ code: 'WEBHOOK_LISTEN_FAILED', message: expect.stringContaining('is already in use') })]);
      expect(listener.port()).toBeNull();
      await stop();
    } finally {
      holder.close();
    }
  });

  test('when it is stopped while waiting for its files, then it does not start when they appear', async () => {
    const logger = recordingLogger();
    const listener = listenerIn(logger);
    const stop = await listener.start();
    await stop();
    mountFiles();
    // Several retry periods later, still off.
    await new Promise((resolve) => { setTimeout(resolve, 100); });
    expect(listener.port()).toBeNull();
    expect(logger.lines.filter((l) => l.msg === 'eviction webhook listening (TLS)')).toEqual([]);
  });
});
