// The README and docs/ are the operator's reference. The README stays short and starts with the two commands (CI
// runs its test command); docs/ must list every config key, show every route, and list every metric, each on the
// page a reader looks for it.

import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { CONFIG_KEYS } from '../../src/config.js';
import { createMetrics } from '../../src/metrics/metrics.js';
import { ACTION_ROUTES } from '../../src/routes/action-routes.js';

const read = (path) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const readme = read('README.md');
const docs = {
  api: read('docs/api.md'),
  configuration: read('docs/configuration.md'),
  install: read('docs/install.md'),
  monitor: read('docs/monitor.md'),
  observability: read('docs/observability.md'),
  sandbox: read('docs/sandbox.md'),
};

describe('README', () => {
  test('when it starts, then the first commands run the manager and the tests', () => {
    const firstBlock = readme.split('```')[1];
    expect(firstBlock).toMatch(/npm ci && npm start/);
    expect(firstBlock).toMatch(/npm start/);
    expect(firstBlock).toMatch(/npm test/);
  });

  test('when it is read, then it is a few hundred lines at most', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
  });

  test('when a reader opens it, then the first screen links the install steps, the limitations and the runbooks', () => {
    const firstScreen = readme.split('\n').slice(0, 40).join('\n');
    expect(firstScreen).toMatch(/\]\(#install-on-a-cluster\)/);
    expect(firstScreen).toMatch(/\]\(#status-and-limitations\)/);
    expect(firstScreen).toMatch(/\]\(docs\/observability\.md#runbooks\)/);
  });

  test('when it says how to install, then the steps are numbered and include the webhook certificate', () => {
    const install = readme.slice(readme.indexOf('## Install on a cluster'), readme.indexOf('\n## ', readme.indexOf('## Install on a cluster') + 1));
    expect(install).toMatch(/^1\. /m);
    expect(install).toMatch(/deploy\/webhook-cert\.sh/);
    expect(install).toMatch(/kubectl apply -k deploy\/k8s\//);
    expect(docs.install).toMatch(/deploy\/webhook-cert\.sh/);
  });

  test('when it states its status, then it has limitations and the supported versions', () => {
    const status = readme.slice(readme.indexOf('## Status and limitations'));
    expect(status).toMatch(/Limitations/);
    expect(status).toMatch(/RethinkDB 2\.4/);
    expect(status).toMatch(/kube-apiserver 1\.34/);
  });

  test('when it describes testing, then both tiers are there', () => {
    expect(readme).toMatch(/\| `npm run test:fast` \|/);
    expect(readme).toMatch(/\| `npm test` \|/);
  });
});

describe('docs/configuration.md', () => {
  test.each(CONFIG_KEYS.map((k) => [k.env, k.default]))('when documenting config, then %s is in the table with its default', (env, def) => {
    const row = docs.configuration.split('\n').find((line) => line.startsWith(`| \`${env}\` |`));
    expect(row).toBeDefined();
    if (typeof def === 'number' || typeof def === 'boolean' || (typeof def === 'string' && def !== '')) expect(row).toContain(`\`${def}\``);
  });
});

describe('docs/api.md', () => {
  test.each(ACTION_ROUTES.map((r) => r.path))('when documenting the API, then there is a curl example for /v1/actions/%s', (path) => {
    expect(docs.api).toMatch(new RegExp(`curl [^\\n]*/v1/actions/${path}`));
  });

  test.each(['/v1/hooks/prestop', '/v1/hooks/poststart', '/v1/hooks/perfwarning', '-XDELETE .*/v1/hooks/perfwarning', '/v1/events'])(
    'when documenting hooks and the audit, then there is a curl example for %s',
    (path) => {
      expect(docs.api).toMatch(new RegExp(`curl [^\\n]*${path}`));
    },
  );

  test.each(['/v1/cluster', '/v1/operations', '/livez', '/readyz', '/metrics', '/openapi.json'])('when documenting reads, then there is a curl example for %s', (path) => {
    expect(docs.api).toMatch(new RegExp(`curl [^\\n]*${path}`));
  });
});

describe('docs/monitor.md and docs/sandbox.md', () => {
  test('when documenting the monitor, then there is a curl example for /v1/monitor', () => {
    expect(docs.monitor).toMatch(/curl [^\n]*\/v1\/monitor/);
  });

  test.each([
    '/v1/sandbox/servers/[a-z_0-9]+/crash', '/v1/sandbox/servers/[a-z_0-9]+/restore', '/v1/sandbox/nodes/[a-z0-9-]+/crash', '/v1/sandbox/pods ',
    '/v1/sandbox/pods/[a-z0-9-]+/cpu', '/v1/sandbox/pods/[a-z0-9-]+/interference', '/v1/sandbox/scale', '/v1/sandbox/events',
  ])('when documenting the sandbox, then there is a curl example for %s', (path) => {
    expect(docs.sandbox).toMatch(new RegExp(`curl [^\\n]*${path}`));
  });
});

describe('docs/observability.md', () => {
  test('when documenting the status page, then there is a curl example for /', () => {
    expect(docs.observability).toMatch(/curl [^\n]*localhost:8080\/\s/);
  });

  test.each(createMetrics().registry.getMetricsAsArray().map((metric) => [metric.name, metric.type]))('when documenting metrics, then %s is in the table as a %s', (name, type) => {
    expect(docs.observability.split('\n').find((line) => line.startsWith(`| \`${name}\` | ${type} |`))).toBeDefined();
  });

  const alerts = parse(read('deploy/monitoring/prometheusrule.yaml')).spec.groups.flatMap((g) => g.rules).map((r) => r.alert).filter(Boolean);
  test.each([...alerts, 'PRESTOP answered 504', 'A vote not given back', 'State not saved', 'The webhook off', 'No leader'])('when an operator looks for a runbook, then %s has one', (name) => {
    expect(docs.observability).toMatch(new RegExp(`^### ${name}$`, 'm'));
  });
});
