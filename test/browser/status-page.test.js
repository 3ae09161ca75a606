// The status page in a real headless chromium against a sandbox manager on a loopback port: it draws the
// shard map, follows a drain, shows a data-moving operation's progress, and keeps its data when reads fail.

import { mkdirSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppError } from '../../src/errors.js';
import { launchChromium, startSandboxServer } from '../helpers/browser.js';
import { primaryMap } from '../helpers/harness.js';

const TABLE = 'ycsb.usertable';
const refreshMs = 250;
const waitMs = 8000;
// Screenshots are for people (and CI artefacts), not assertions; they are overwritten on each run.
const screenshotDir = join(tmpdir(), 'rethinkdb-k8s-manager-status-page');

let browser;
const running = [];

beforeAll(async () => {
  browser = await launchChromium();
  mkdirSync(screenshotDir, { recursive: true });
});

afterEach(async () => {
  await Promise.all(running.splice(0).map((stop) => stop()));
});

afterAll(async () => {
  await browser?.close();
});

// A fresh manager and a fresh browser page on it; both are closed after the test.
async function openPage(serverOptions = {}, { width = 1280 } = {}) {
  const sandbox = await startSandboxServer(serverOptions);
  const context = await browser.newContext({ viewport: { width, height: 900 } });
  running.push(async () => { await context.close(); await sandbox.close(); });
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (err) => problems.push(`page error: ${err.message}`));
  page.on('console', (msg) => { if (msg.type() === 'error') problems.push(`console: ${msg.text()}`); });
  await page.goto(`${sandbox.base}/?refreshMs=${refreshMs}`);
  await page.waitForSelector(`[data-testid="shard-map"][data-table="${TABLE}"] tbody tr`, { timeout: waitMs });
  return { sandbox, page, problems };
}

// What the page shows: for each shard row, the servers whose cell says P.
function shownPrimaries(page, table = TABLE) {
  return page.$$eval(`[data-testid="shard-map"][data-table="${table}"] tbody tr`, (rows) => rows.map((row) => {
    const cells = [...row.querySelectorAll('td[data-role="primary"]')].filter((td) => td.textContent === 'P');
    return cells.length === 1 ? cells[0].dataset.server : `${cells.length} primaries`;
  }));
}

const post = (base, path, body) => fetch(`${base}${path}`, {
  method: 'POST', ...(body ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
});

describe('status page in headless chromium', () => {
  // The nodes come from the cluster view's pods (the Kubernetes side), without waiting for a monitor poll.
  test('when the page loads, then every server shows the node its pod runs on', async () => {
    const { sandbox, page } = await openPage();
    const pods = await sandbox.kube.listRethinkDbPods();
    for (const pod of pods) {
      await page.waitForSelector(`[data-testid="server-${pod.hostname.replace('-', '_')}"][data-node="${pod.nodeName}"]`, { timeout: waitMs });
    }
    expect(pods.length).toBe(4);
  });

  test('when a server holding a primary gets its PRESTOP, then the shard map shows no primary on it and marks it draining', async () => {
    const { sandbox, page, problems } = await openPage();
    const before = await shownPrimaries(page);
    expect(before).toEqual(await primaryMap(sandbox.store));
    const target = before[1];
    const row = page.locator(`[data-testid="server-${target}"]`);
    await expect(row.getAttribute('data-draining')).resolves.toBe('false');
    const pod = await row.getAttribute('data-pod');
    await page.waitForSelector(`[data-testid="server-${target}"][data-node="node-1"]`, { timeout: waitMs });

    const res = await post(sandbox.base, `/v1/hooks/prestop?pod=${pod}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ server: target, primariesOff: true });

    await page.waitForFunction(({ table, server }) => {
      const map = document.querySelector(`[data-testid="shard-map"][data-table="${table}"]`);
      const primaryCells = map.querySelectorAll(`td[data-role="primary"][data-server="${server}"]`);
      return primaryCells.length === 0
        && map.querySelector(`th[data-server="${server}"]`)?.dataset.draining === 'true'
        && document.querySelector(`[data-testid="server-${server}"]`)?.dataset.draining === 'true';
    }, { table: TABLE, server: target }, { timeout: waitMs });
    const after = await shownPrimaries(page);
    expect(after).not.toContain(target);
    expect(after).toEqual(await primaryMap(sandbox.store));
    await expect(page.locator(`[data-testid="server-${target}"] [data-testid="primaries"]`).textContent()).resolves.toBe('0');
    await page.waitForSelector(`[data-testid="draining-item"][data-server="${target}"]`, { timeout: waitMs });
    await page.waitForSelector('[data-testid="event"][data-action="move-primaries-from-server"][data-outcome="completed"]', { timeout: waitMs });
    // The move ran as no operation (it answered at once): the operations box says where it is instead of "none".
    await expect(page.locator('[data-testid="operations"]').textContent()).resolves.toContain('primary moves and hooks answer at once and are in Recent events below');
    await expect(page.locator('[data-testid="banner"]').isHidden()).resolves.toBe(true);
    await page.screenshot({ path: join(screenshotDir, 'after-drain.png'), fullPage: true });
    expect(problems).toEqual([]); // among others, no CSP violation: the nonce admits our script and style
  });

  test('when replicas migrate off a server, then the page shows the running operation with its progress, then lists it as finished', async () => {
    const { sandbox, page } = await openPage({ env: { SANDBOX_BACKFILL_MS_PER_1000_DOCS: '40' } }); // ~1 s per shard
    const res = await post(sandbox.base, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    const { operation } = await res.json();
    const shown = page.locator(`[data-testid="running-operation"][data-operation="${operation.id}"]`);
    await shown.locator('li[data-status="backfilling"] progress').waitFor({ timeout: waitMs });
    await expect(shown.locator('[data-testid="operation-progress"]').getAttribute('max')).resolves.toBe('3');
    await page.screenshot({ path: join(screenshotDir, 'migration-running.png'), fullPage: true });
    await page.waitForSelector(`[data-testid="finished-operations"] li[data-operation="${operation.id}"][data-status="succeeded"]`, { timeout: 15000 });
    await expect(shown.count()).resolves.toBe(0);
    await page.waitForFunction((table) => document.querySelectorAll(`[data-testid="shard-map"][data-table="${table}"] td[data-server="rethinkdb_3"][data-role="replica"]`).length === 0, TABLE, { timeout: waitMs });
  });

  test('when a killed server\'s replicas migrate off at 1400 px, then its row keeps pod and node, each backfill names its source, a done step has no bar, and the panels fill the width', async () => {
    const { sandbox, page } = await openPage({ env: { SANDBOX_BACKFILL_MS_PER_1000_DOCS: '60' } }, { width: 1400 });
    const crash = await post(sandbox.base, '/v1/sandbox/servers/rethinkdb_3/crash', { mode: 'kill' });
    expect(crash.status).toBe(200);
    // Disconnected, so server_status has no hostname for it: the view places it by the StatefulSet's naming.
    await page.waitForSelector('[data-testid="server-rethinkdb_3"][data-connected="false"][data-pod="rethinkdb-3"][data-node="node-3"]', { timeout: waitMs });
    const res = await post(sandbox.base, '/v1/actions/migrate-replicas-off', { server: 'rethinkdb_3' });
    expect(res.status).toBe(202);
    const { operation } = await res.json();
    const shown = page.locator(`[data-testid="running-operation"][data-operation="${operation.id}"]`);
    await shown.locator('li[data-status^="done"]').first().waitFor({ timeout: 15000 });
    await shown.locator('li[data-status="backfilling"] progress').waitFor({ timeout: waitMs });
    await expect(shown.locator('li[data-status^="done"] progress').count()).resolves.toBe(0);
    const backfillText = await page.locator('[data-testid="backfills"] li').first().textContent();
    expect(backfillText).toMatch(/^ycsb\.usertable: rethinkdb_[0-2] → rethinkdb_[0-2] /);
    await page.screenshot({ path: join(screenshotDir, 'disconnected-and-backfill-1400.png'), fullPage: true });
    // Two columns: Draining-and-hot and Operations side by side, their pair as wide as the full-width sections.
    const box = (id) => page.locator(`section[aria-labelledby="${id}"]`).boundingBox();
    const [servers, attention, operations] = await Promise.all([box('servers-title'), box('attention-title'), box('operations-title')]);
    expect(attention.y).toBe(operations.y);
    expect(Math.abs((operations.x + operations.width) - (servers.x + servers.width))).toBeLessThan(2);
    expect(Math.abs(attention.x - servers.x)).toBeLessThan(2);
  });

  test('when the data store stops answering, then a banner shows the 503 and the last shard map stays; it clears when reads work again', async () => {
    let down = false;
    const unavailable = () => Promise.reject(new AppError('DATA_STORE_UNAVAILABLE', 'not connected to RethinkDB: connect ECONNREFUSED'));
    const { page } = await openPage({ wrapSource: (source) => ({ ...source, readSystemTables: (...args) => (down ? unavailable() : source.readSystemTables(...args)) }) });
    const before = await shownPrimaries(page);
    down = true;
    const banner = page.locator('[data-testid="banner"]');
    await banner.filter({ hasText: 'GET /v1/cluster answered 503 DATA_STORE_UNAVAILABLE: not connected to RethinkDB' }).waitFor({ timeout: waitMs });
    await page.waitForTimeout(refreshMs * 2); // a few failed refreshes later
    expect(await shownPrimaries(page)).toEqual(before);
    down = false;
    await banner.waitFor({ state: 'hidden', timeout: waitMs });
  });

  test('when the manager protects its reads (AUTH_PROTECT_READS), then the page still loads and its banner says the reads are protected', async () => {
    const sandbox = await startSandboxServer({
      env: { AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/unused', AUTH_PROTECT_READS: 'true' }, staticToken: 'status-page-test-token-0123456789abcdef',
    });
    const context = await browser.newContext();
    running.push(async () => { await context.close(); await sandbox.close(); });
    const page = await context.newPage();
    const response = await page.goto(`${sandbox.base}/?refreshMs=${refreshMs}`);
    expect(response.status()).toBe(200);
    await page.locator('[data-testid="banner"]').filter({ hasText: 'read endpoints are protected; GET /v1/cluster answered 401' }).waitFor({ timeout: waitMs });
  });

  test('when the manager is served behind a path prefix (an ingress, kubectl proxy), then the page reads its API under that prefix', async () => {
    const sandbox = await startSandboxServer();
    // A reverse proxy that serves the manager at /ops/manager/ and nothing at the root.
    const prefix = '/ops/manager';
    const proxy = createServer((req, res) => {
      const path = req.url.split('?')[0];
      if (!path.startsWith(`${prefix}/`) && path !== prefix) { res.statusCode = 404; res.end('not here'); return; }
      const rest = req.url.slice(prefix.length);
      const upstream = httpRequest(`${sandbox.base}${rest.startsWith('/') ? rest : `/${rest}`}`, { method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    await new Promise((resolve) => { proxy.listen(0, '127.0.0.1', resolve); });
    const context = await browser.newContext();
    running.push(async () => { await context.close(); proxy.closeAllConnections(); await new Promise((resolve) => { proxy.close(resolve); }); await sandbox.close(); });
    const page = await context.newPage();
    const problems = [];
    page.on('console', (msg) => { if (msg.type() === 'error') problems.push(msg.text()); });
    page.on('response', (r) => { if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`); });
    page.on('pageerror', (e) => problems.push(e.message));
    for (const path of [`${prefix}/`, prefix]) {
      await page.goto(`http://127.0.0.1:${proxy.address().port}${path}?refreshMs=${refreshMs}`);
      await page.waitForSelector(`[data-testid="shard-map"][data-table="${TABLE}"] tbody tr`, { timeout: waitMs });
      expect(await shownPrimaries(page)).toHaveLength(4);
    }
    expect(problems).toEqual([]);
  });

  test('when the read endpoints answer 401, then the banner says they are protected', async () => {
    const { page } = await openPage();
    await page.route('**/v1/**', (route) => route.fulfill({
      status: 401, contentType: 'application/json', body: JSON.stringify({ error: 'UNAUTHORIZED', message: 'a bearer token is required' }),
    }));
    await page.locator('[data-testid="banner"]').filter({ hasText: 'read endpoints are protected; GET /v1/cluster answered 401' }).waitFor({ timeout: waitMs });
    expect(await shownPrimaries(page)).toHaveLength(4);
  });
});
