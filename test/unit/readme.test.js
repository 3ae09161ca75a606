// The README is the operator's reference: it must list every config key and show every route.

import { readFileSync } from 'node:fs';
import { CONFIG_KEYS } from '../../src/config.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { ACTION_ROUTES } from '../../src/routes/action-routes.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');

describe('README', () => {
  test('when it starts, then the first commands run the manager and the tests', () => {
    const firstBlock = readme.split('```')[1];
    expect(firstBlock).toMatch(/npm start/);
    expect(firstBlock).toMatch(/npm test/);
  });

  test.each(CONFIG_KEYS.map((k) => [k.env, k.default]))('when documenting config, then %s is in the table with its default', (env, def) => {
    const row = readme.split('\n').find((line) => line.startsWith(`| \`${env}\` |`));
    expect(row).toBeDefined();
    if (typeof def === 'number' || (typeof def === 'string' && def !== '')) expect(row).toContain(`\`${def}\``);
  });

  test.each(ACTION_ROUTES.map((r) => r.path))('when documenting the API, then there is a curl example for /v1/actions/%s', (path) => {
    expect(readme).toMatch(new RegExp(`curl [^\\n]*/v1/actions/${path}`));
  });

  test.each([
    '/v1/hooks/prestop', '/v1/hooks/poststart', '/v1/hooks/perfwarning', '-XDELETE .*/v1/hooks/perfwarning', '/v1/monitor', '/v1/events',
    '/v1/sandbox/servers/[a-z_0-9]+/crash', '/v1/sandbox/servers/[a-z_0-9]+/restore', '/v1/sandbox/nodes/[a-z0-9-]+/crash', '/v1/sandbox/pods ',
    '/v1/sandbox/pods/[a-z0-9-]+/cpu', '/v1/sandbox/pods/[a-z0-9-]+/interference', '/v1/sandbox/scale', '/v1/sandbox/events',
  ])('when documenting hooks, the monitor and the sandbox, then there is a curl example for %s', (path) => {
    expect(readme).toMatch(new RegExp(`curl [^\\n]*${path}`));
  });

  test('when documenting the status page, then there is a curl example for /', () => {
    expect(readme).toMatch(/curl [^\n]*localhost:8080\/\s/);
  });

  test.each(['/v1/cluster', '/v1/operations', '/livez', '/readyz', '/metrics', '/openapi.json'])('when documenting reads, then there is a curl example for %s', (path) => {
    expect(readme).toMatch(new RegExp(`curl [^\\n]*${path}`));
  });

  test.each(createMetrics().registry.getMetricsAsArray().map((metric) => [metric.name, metric.type]))('when documenting metrics, then %s is in the table as a %s', (name, type) => {
    expect(readme.split('\n').find((line) => line.startsWith(`| \`${name}\` | ${type} |`))).toBeDefined();
  });
});
