// For the browser tests: Debian's chromium driven by playwright-core (no downloaded browsers), and a sandbox
// manager listening on a real loopback port with the real clock, as `npm start` runs it.

import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { createSystemClock } from '../../src/lib/clock.js';
import { createSandboxHarness } from './harness.js';

export const CHROMIUM_BIN = process.env.CHROMIUM_BIN ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];
const launchTimeoutMs = 15000;

// Fails (never skips) without the browser, so that a CI machine without it cannot pass by accident.
export async function launchChromium() {
  if (!existsSync(CHROMIUM_BIN)) {
    throw new Error(`the browser tests need Debian's chromium at ${CHROMIUM_BIN} (or set CHROMIUM_BIN): apt-get install chromium; .ci/run installs it when it is missing`);
  }
  return chromium.launch({ executablePath: CHROMIUM_BIN, args: CHROMIUM_ARGS, timeout: launchTimeoutMs });
}

// A sandbox manager on 127.0.0.1:<free port>. close() drops open keep-alive connections too.
export async function startSandboxServer(options = {}) {
  const h = createSandboxHarness({ clock: createSystemClock(), ...options });
  const server = await new Promise((resolve, reject) => {
    const s = h.app.listen(0, '127.0.0.1', (err) => (err ? reject(err) : resolve(s)));
  });
  const base = `http://127.0.0.1:${server.address().port}`;
  const close = () => new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
  return { ...h, base, close };
}
