// GET /: the status page, one self-contained HTML document (inline style and script, no external assets)
// that polls the JSON read endpoints. Each answer gets a fresh CSP nonce, so only our two inline blocks run.

import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Router } from 'express';
import { mountRoute, objectSchema } from './validation.js';

const pageUrl = new URL('../status/status-page.html', import.meta.url);
const scriptUrl = new URL('../status/status-page-client.js', import.meta.url);

// What the router enforces and /openapi.json describes.
export const STATUS_PAGE_ROUTE = {
  method: 'get', path: '/', operationId: 'getStatusPage', tag: 'meta', summary: 'A status page for people',
  query: objectSchema({ refreshMs: { type: 'integer', minimum: 250, maximum: 60000, description: 'how often the page refreshes itself (default 2000)' } }),
  ok: [{ status: 200, description: 'an HTML page', contentType: 'text/html', schema: { type: 'string' } }], errors: [],
};

export function createStatusPageRoutes({ newNonce = () => randomBytes(16).toString('base64') } = {}) {
  const parts = loadPage().split('{{nonce}}');
  const router = Router();

  mountRoute(router, STATUS_PAGE_ROUTE, (input, res) => {
    const nonce = newNonce();
    res.set({
      'Content-Security-Policy': contentSecurityPolicy(nonce),
      'X-Content-Type-Options': 'nosniff',
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
      'Cache-Control': 'no-store',
    });
    res.type('html').send(parts.join(nonce));
  });

  return router;
}

function contentSecurityPolicy(nonce) {
  return [
    "default-src 'none'", `script-src 'nonce-${nonce}'`, `style-src 'nonce-${nonce}'`, "connect-src 'self'",
    'img-src data:', "base-uri 'none'", "form-action 'none'", "frame-ancestors 'none'",
  ].join('; ');
}

// Read once, at start-up: the markup with the browser script inlined in place of its placeholder.
function loadPage() {
  const html = readFileSync(pageUrl, 'utf8');
  const script = readFileSync(scriptUrl, 'utf8');
  if (/<\/script/i.test(script) || script.includes('{{')) throw new Error('status-page-client.js must not contain "</script" or "{{"');
  if (html.split('{{script}}').length !== 2) throw new Error('status-page.html must hold exactly one {{script}} placeholder');
  return html.replace('{{script}}', () => script);
}
