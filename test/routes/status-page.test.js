// GET /: the status page is one self-contained HTML document under a strict, nonce-based CSP.

import express from 'express';
import request from 'supertest';
import { createStatusPageRoutes } from '../../src/routes/status-page.js';
import { createSandboxHarness } from '../helpers/harness.js';

const cspDirectives = (header) => Object.fromEntries(header.split(';').map((d) => d.trim().split(/\s+/)).map(([name, ...values]) => [name, values]));

describe('GET /', () => {
  test('when the page is requested, then it is HTML with a strict CSP, nosniff and no caching', async () => {
    const h = createSandboxHarness();
    const res = await request(h.app).get('/');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html; charset=utf-8/);
    expect(res.headers['x-content-type-options']).toBe('nosniff');
    expect(res.headers['cache-control']).toBe('no-store');
    const csp = cspDirectives(res.headers['content-security-policy']);
    expect(csp['default-src']).toEqual(["'none'"]);
    expect(csp['connect-src']).toEqual(["'self'"]);
    expect(csp['frame-ancestors']).toEqual(["'none'"]);
    expect(csp['script-src']).toEqual([expect.stringMatching(/^'nonce-[A-Za-z0-9+/]{22}=='$/)]);
    expect(csp['style-src']).toEqual(csp['script-src']);
  });

  test('when the page is served, then every script and style block carries the CSP nonce and nothing is loaded from elsewhere', async () => {
    const res = await request(createSandboxHarness().app).get('/');
    const nonce = /'nonce-([^']+)'/.exec(res.headers['content-security-policy'])[1];
    const blocks = [...res.text.matchAll(/<(script|style)\b([^>]*)>/g)];
    expect(blocks.map((m) => m[1]).sort()).toEqual(['script', 'style']);
    for (const [, , attrs] of blocks) expect(attrs).toBe(` nonce="${nonce}"`);
    expect(res.text).not.toMatch(/\b(src|href)\s*=\s*["']?\s*(https?:)?\/\//i);
    expect(res.text).not.toMatch(/@import|url\(/i);
    expect(res.text).not.toMatch(/\son[a-z]+\s*=/i); // no inline event handlers: the CSP would block them
    expect(res.text).not.toMatch(/innerHTML|outerHTML|insertAdjacentHTML|document\.write/);
    expect(res.text).not.toContain('{{');
  });

  test('when the page is requested twice, then each answer has its own nonce', async () => {
    const app = createSandboxHarness().app;
    const [a, b] = await Promise.all([request(app).get('/'), request(app).get('/')]);
    expect(a.headers['content-security-policy']).not.toBe(b.headers['content-security-policy']);
  });

  test('when the page is built, then it polls the read endpoints with same-origin credentials and says so when they are protected', async () => {
    const res = await request(createSandboxHarness().app).get('/');
    // Relative to the page, so that it works behind a path prefix (test/browser/status-page.test.js).
    for (const path of ['v1/cluster', 'v1/operations', 'v1/events', 'v1/monitor']) expect(res.text).toContain(`'${path}'`);
    expect(res.text).not.toMatch(/['`]\/v1\//);
    expect(res.text).toContain("credentials: 'same-origin'");
    expect(res.text).toContain('read endpoints are protected');
  });

  test('when a client asks for JSON at /, then it still gets the page (there is no JSON form of it)', async () => {
    const res = await request(createSandboxHarness().app).get('/').set('accept', 'application/json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
  });

  test('when the nonce source is injected, then the page and the header use that nonce', async () => {
    const app = express().use(createStatusPageRoutes({ newNonce: () => 'dGVzdC1ub25jZQ==' }));
    const res = await request(app).get('/');
    expect(res.headers['content-security-policy']).toContain("script-src 'nonce-dGVzdC1ub25jZQ=='");
    expect(res.text.match(/nonce="dGVzdC1ub25jZQ=="/g)).toHaveLength(2);
  });

  test.each(['post', 'put', 'delete'])('when / is called with %s, then it is a 404 in the usual error shape', async (method) => {
    const res = await request(createSandboxHarness().app)[method]('/');
    expect(res.status).toBe(404);
    expect(res.body).toMatchObject({ error: 'NOT_FOUND' });
  });
});
