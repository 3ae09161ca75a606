// deploy/monitoring and /metrics against the real tools: promtool lints the exposition of a real manager process
// (sandbox, after some traffic) and the alert rules, and unit-tests the alerts; the ServiceMonitor and PrometheusRule validate against the
// prometheus-operator schemas; every metric a dashboard query or an alert uses is one the manager exports; the
// alerts listed in docs/observability.md are the PrometheusRule's.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parser as promqlParser } from '@prometheus-io/lezer-promql';
import { stringify } from 'yaml';
import {
  commandExists, findResource, parseYamlDocuments, readYamlFile, renderKustomization, repoRoot, runKubectlKustomize,
  validateManifest,
} from '../helpers/deploy-files.js';
import { startManagerProcess } from '../helpers/manager-process.js';
import { VERSION } from '../../src/lib/version.js';

const monitoringDir = join(repoRoot, 'deploy/monitoring');
const kustomization = readYamlFile(join(monitoringDir, 'kustomization.yaml'))[0];
const resources = kustomization.resources.flatMap((file) => readYamlFile(join(monitoringDir, file)).map((doc) => ({ file, doc })));
const rule = findResource(resources, 'PrometheusRule', 'rethinkdb-manager');
const serviceMonitor = findResource(resources, 'ServiceMonitor', 'rethinkdb-manager');
const dashboardFile = kustomization.configMapGenerator[0].files[0];
const dashboard = JSON.parse(readFileSync(join(monitoringDir, dashboardFile), 'utf8'));
const alerts = rule.spec.groups.flatMap((g) => g.rules);
// Series Prometheus makes itself for every target, not the manager.
const PROMETHEUS_SERIES = new Set(['up']);
// What Grafana puts in place of its variables before it sends a query.
const GRAFANA_VARIABLES = { $__rate_interval: '1m', $__interval: '30s', $__range: '6h', $job: 'rethinkdb-manager' };

const PROMTOOL_MISSING = 'promtool is not installed: it comes with Debian\'s prometheus package (test/setup.sh extracts it: apt-get download prometheus, then /usr/bin/promtool out of the .deb)';
function promtool(args, input) {
  if (!commandExists('promtool')) throw new Error(PROMTOOL_MISSING);
  return spawnSync('promtool', args, { input, encoding: 'utf8', timeout: 30000 });
}

// promtool check rules on groups written to a temporary file (it reads files only).
function checkRules(groups) {
  const dir = mkdtempSync(join(tmpdir(), 'rules-'));
  try {
    writeFileSync(join(dir, 'rules.yaml'), stringify({ groups }));
    return promtool(['check', 'rules', join(dir, 'rules.yaml')]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// The metric names a PromQL expression selects, from Prometheus's own grammar (lezer-promql); a syntax error throws.
function metricNamesIn(expr) {
  const tree = promqlParser.parse(expr);
  const names = [];
  const errors = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector') names.push(expr.slice(node.from, node.to));
      if (node.name === 'UnquotedLabelMatcher' && /^__name__\s*=/.test(expr.slice(node.from, node.to))) names.push(expr.slice(node.from, node.to).split('"')[1]);
    },
  });
  if (errors.length > 0) throw new Error(`not valid PromQL at ${errors.map((at) => `offset ${at}`).join(', ')}: ${expr}`);
  return names;
}

function withGrafanaVariables(expr) {
  return expr.replace(/\$\{?(__rate_interval|__interval|__range|job)\}?/g, (m, name) => GRAFANA_VARIABLES[`$${name}`]);
}

// Every query of the dashboard: the panels' targets (rows included) and the query variables' label_values(metric, label).
function dashboardQueries(board) {
  const panels = board.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
  const targets = panels.flatMap((p) => (p.targets ?? []).map((t) => ({ where: `panel "${p.title}"`, expr: withGrafanaVariables(t.expr) })));
  const variables = board.templating.list.filter((v) => v.type === 'query').map((v) => {
    const [, selector] = (v.query.query ?? v.query).match(/^label_values\((.+),\s*\w+\)$/);
    return { where: `variable ${v.name}`, expr: withGrafanaVariables(selector) };
  });
  return [...targets, ...variables];
}

// The metric names a scrape exports, as queries name them: histograms by their _bucket, _sum and _count series.
function exportedNames(exposition) {
  const names = new Set(PROMETHEUS_SERIES);
  for (const [, name, type] of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
    else if (type === 'summary') for (const suffix of ['', '_sum', '_count']) names.add(name + suffix);
    else names.add(name);
  }
  return names;
}

// The alerts in docs/observability.md's block that follows its sentence naming the PrometheusRule, as
// { alert, expr, for }.
const DOCS_ALERTS_FILE = 'docs/observability.md';
const README_ALERTS_INTRO = 'The alerts, as `deploy/monitoring/prometheusrule.yaml` carries them';
function readmeAlerts() {
  const doc = readFileSync(join(repoRoot, DOCS_ALERTS_FILE), 'utf8');
  const at = doc.indexOf(README_ALERTS_INTRO);
  if (at < 0) throw new Error(`${DOCS_ALERTS_FILE} has no "${README_ALERTS_INTRO}" before its alerts block`);
  return parseYamlDocuments(doc.slice(at).match(/```yaml\n([\s\S]*?)```/)[1], `${DOCS_ALERTS_FILE} alerts`)[0];
}

let manager;
let exposition;
let livez;

beforeAll(async () => {
  manager = await startManagerProcess({ name: 'metrics-lint', env: { AUTH_MODE: 'none', LOG_LEVEL: 'warn' } });
  // Traffic, so that the labelled series exist: hooks, an action through PERFWARNING, reads, a 404.
  const sent = [
    await manager.json('/v1/hooks/prestop?pod=rethinkdb-1', { method: 'POST' }),
    await manager.json('/v1/hooks/perfwarning', { method: 'POST', body: { pod: 'rethinkdb-2' } }),
    await manager.json('/v1/hooks/perfwarning?pod=rethinkdb-2', { method: 'DELETE' }),
    await manager.json('/v1/cluster'),
    await manager.json('/v1/operations/no-such-operation'),
  ];
  expect(sent.map((r) => r.status)).toEqual([200, 200, 200, 200, 404]);
  exposition = (await manager.json('/metrics')).body;
  livez = (await manager.json('/livez')).body;
}, 60000);

afterAll(async () => {
  await manager?.kill('SIGTERM');
});

describe('promtool', () => {
  test('when the tests run, then promtool is installed (test/setup.sh installs it; the checks below must not skip)', () => {
    if (!commandExists('promtool')) throw new Error(PROMTOOL_MISSING);
  });

  test('when an exposition or a rule has a known fault, then promtool reports it (the checks run)', () => {
    const metrics = promtool(['check', 'metrics'], '# HELP x_total A gauge named like a counter.\n# TYPE x_total gauge\nx_total 1\n');
    expect(`${metrics.stdout}${metrics.stderr}`).toContain('non-counter metrics should not have "_total" suffix');
    expect(checkRules([{ name: 'broken', rules: [{ alert: 'Broken', expr: 'rate(x[5m]' }] }]).status).not.toBe(0);
  });
});

describe('/metrics of a real manager process (sandbox, after hooks, an action and reads)', () => {
  test('when its exposition is checked with promtool check metrics, then there is no finding', () => {
    expect(exposition).toMatch(/^rethinkdb_manager_hook_requests_total\{hook="prestop",outcome="completed"\} 1$/m);
    expect(exposition).toMatch(/^rethinkdb_manager_http_requests_total\{method="GET",route="\/v1\/operations\/:id",code="404"\} 1$/m);
    expect(exposition).toMatch(/^rethinkdb_manager_actions_total\{/m);
    expect(exposition).toMatch(/^rethinkdb_manager_process_resident_memory_bytes /m);
    // Probes count too (the process was waited for through /livez); build_info carries the version /livez gives.
    expect(exposition).toMatch(/^rethinkdb_manager_http_requests_total\{method="GET",route="\/livez",code="200"\} \d+$/m);
    expect(exposition).toContain(`rethinkdb_manager_build_info{version="${VERSION}",node_version="${process.version}"} 1`);
    // prom-client's gauges named _total are left out; the per-type ones stay.
    expect(exposition).toMatch(/^rethinkdb_manager_nodejs_active_handles\{/m);
    expect(exposition).not.toMatch(/_active_\w+_total/);
    const result = promtool(['check', 'metrics'], exposition);
    expect({ status: result.status, findings: `${result.stdout}${result.stderr}` }).toEqual({ status: 0, findings: '' });
  });

  test('when /livez is asked, then it gives package.json\'s version', () => {
    expect(livez).toEqual({ status: 'ok', version: VERSION });
  });
});

describe('deploy/monitoring', () => {
  test('when the kustomization is read, then it lists every manifest in the folder and generates the dashboard\'s ConfigMap for Grafana\'s sidecar', () => {
    const onDisk = readdirSync(monitoringDir).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml').sort();
    expect([...kustomization.resources].sort()).toEqual(onDisk);
    expect(kustomization.namespace).toBe('rethinkdb');
    expect(kustomization.configMapGenerator).toEqual([{
      name: 'rethinkdb-manager-dashboard', files: [dashboardFile], options: { disableNameSuffixHash: true, labels: { grafana_dashboard: '1' } },
    }]);
    expect(readdirSync(monitoringDir).sort()).toEqual([...onDisk, dashboardFile, 'kustomization.yaml'].sort());
  });

  test('when deploy/k8s is rendered, then it does not include the monitoring folder (its kinds need the prometheus-operator CRDs)', () => {
    expect(renderKustomization().resources.filter(({ doc }) => doc.apiVersion.startsWith('monitoring.coreos.com/'))).toEqual([]);
  });

  test.each(resources.map(({ file, doc }) => [doc.kind, file, doc]))('when the %s (%s) is validated against the prometheus-operator schema, then it has no error and no unknown field', async (kind, file, doc) => {
    expect(await validateManifest(doc)).toEqual([]);
  });

  test('when a PrometheusRule has a typo, then the validation reports it (the check itself works)', async () => {
    const broken = structuredClone(rule);
    broken.spec.groups[0].rules[0].fro = '5m';
    expect(await validateManifest(broken)).toEqual(['.spec.groups[0].rules[0].fro: unknown field']);
  });

  test('when the ServiceMonitor is compared with deploy/k8s, then it selects the manager\'s Service by its labels, in its namespace, on its http port', () => {
    const service = findResource(renderKustomization().resources, 'Service', 'rethinkdb-manager');
    expect(service.metadata.labels).toMatchObject(serviceMonitor.spec.selector.matchLabels);
    expect(serviceMonitor.spec.namespaceSelector.matchNames).toEqual([service.metadata.namespace]);
    expect(serviceMonitor.spec.endpoints.map((e) => [e.port, e.path])).toEqual([['http', '/metrics']]);
    expect(service.spec.ports.map((p) => p.name)).toContain('http');
  });

  (commandExists('kubectl') ? test : test.skip)('when kubectl is installed, then `kubectl kustomize` renders the two manifests and the dashboard\'s ConfigMap', () => {
    const rendered = runKubectlKustomize(monitoringDir);
    expect(rendered.map((d) => `${d.kind}/${d.metadata.namespace}/${d.metadata.name}`).sort()).toEqual([
      'ConfigMap/rethinkdb/rethinkdb-manager-dashboard', 'PrometheusRule/rethinkdb/rethinkdb-manager', 'ServiceMonitor/rethinkdb/rethinkdb-manager',
    ]);
    expect(JSON.parse(rendered.find((d) => d.kind === 'ConfigMap').data[dashboardFile])).toEqual(dashboard);
  });

  test('when the rule groups are checked with promtool check rules, then they pass', () => {
    const result = checkRules(rule.spec.groups);
    expect({ status: result.status, output: result.stdout + result.stderr }).toEqual({ status: 0, output: expect.stringContaining(`SUCCESS: ${alerts.length} rules found`) });
  });

  // promtool test rules: series over time, and which alerts fire at the end (every other alert must not).
  const up = (a, b) => ({ 'up{job="rethinkdb-manager", instance="a"}': a, 'up{job="rethinkdb-manager", instance="b"}': b });
  const leader = (a, b) => ({ 'rethinkdb_manager_leader{job="rethinkdb-manager", instance="a"}': a, 'rethinkdb_manager_leader{job="rethinkdb-manager", instance="b"}': b });
  const healthy = {
    ...up('1x60', '1x60'), ...leader('1x60', '0x60'),
    'rethinkdb_manager_cluster_scrape_success{job="rethinkdb-manager", instance="a"}': '1x60',
    'rethinkdb_manager_server_draining{job="rethinkdb-manager", instance="a", server="rethinkdb_1"}': '0x60',
    'rethinkdb_manager_hook_requests_total{job="rethinkdb-manager", instance="a", hook="prestop", outcome="completed"}': '0+1x60',
    'rethinkdb_manager_monitor_poll_failures_total{job="rethinkdb-manager", instance="a"}': '0x60',
    'rethinkdb_manager_actions_total{job="rethinkdb-manager", instance="a", action="migrate-replicas-off", outcome="completed"}': '0+1x60',
  };
  const at = { job: 'rethinkdb-manager', instance: 'a' };
  const ALERT_CASES = [
    { what: 'all is well', evalTime: '59m', series: healthy, fires: [] },
    { what: 'no replica is up for 5 min', evalTime: '6m', series: { ...healthy, ...up('0x60', '0x60') }, fires: [['RethinkDBManagerDown', {}]] },
    { what: 'one replica is up', evalTime: '30m', series: { ...healthy, ...up('0x60', '1x60') }, fires: [] },
    { what: 'no replica leads for 2 min', evalTime: '3m', series: { ...healthy, ...leader('0x60', '0x60') }, fires: [['RethinkDBManagerNoLeader', {}]] },
    { what: 'a leader changes hands within a minute', evalTime: '6m', series: { ...healthy, ...leader('1 1 0 0 0 0 0', '0 0 0 1 1 1 1') }, fires: [] },
    { what: 'two replicas lead for 2 min', evalTime: '3m', series: { ...healthy, ...leader('1x60', '1x60') }, fires: [['RethinkDBManagerSeveralLeaders', {}]] },
    {
      what: 'a server drains for 31 min', evalTime: '31m',
      series: { ...healthy, 'rethinkdb_manager_server_draining{job="rethinkdb-manager", instance="a", server="rethinkdb_1"}': '1x60' },
      fires: [['RethinkDBServerDrainingForLong', { ...at, server: 'rethinkdb_1' }]],
    },
    {
      what: 'a PRESTOP times out', evalTime: '10m',
      series: { ...healthy, 'rethinkdb_manager_hook_requests_total{job="rethinkdb-manager", instance="a", hook="prestop", outcome="timed_out"}': '0 0 0 1x60' },
      fires: [['RethinkDBManagerPrestopNotCompleted', { ...at, hook: 'prestop', outcome: 'timed_out' }]],
    },
    {
      what: 'a dry-run PRESTOP (outcome planned) fires nothing', evalTime: '10m',
      series: { ...healthy, 'rethinkdb_manager_hook_requests_total{job="rethinkdb-manager", instance="a", hook="prestop", outcome="planned"}': '0 0 0 1x60' },
      fires: [],
    },
    {
      what: 'three monitor polls fail in 15 min', evalTime: '10m',
      series: { ...healthy, 'rethinkdb_manager_monitor_poll_failures_total{job="rethinkdb-manager", instance="a"}': '0 0 1 2 3x60' },
      fires: [['RethinkDBManagerMonitorFailing', at]],
    },
    {
      what: 'RethinkDB is not read for 6 min', evalTime: '7m',
      series: { ...healthy, 'rethinkdb_manager_cluster_scrape_success{job="rethinkdb-manager", instance="a"}': '1 0x60' },
      fires: [['RethinkDBManagerCannotReadCluster', at]],
    },
    {
      what: 'an action fails', evalTime: '10m',
      series: { ...healthy, 'rethinkdb_manager_actions_total{job="rethinkdb-manager", instance="a", action="migrate-replicas-off", outcome="failed"}': '0 0 1x60' },
      fires: [['RethinkDBManagerActionsFailing', { action: 'migrate-replicas-off', outcome: 'failed' }]],
    },
  ];

  // An alert as promtool expects it: its labels with the rule's, its annotations rendered for those labels.
  function expectedAlert(name, labels) {
    const ruleOf = alerts.find((a) => a.alert === name);
    const all = { ...labels, ...ruleOf.labels };
    const render = (text) => text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (m, key) => all[key] ?? '');
    return { exp_labels: all, exp_annotations: Object.fromEntries(Object.entries(ruleOf.annotations).map(([k, v]) => [k, render(v)])) };
  }

  test('when the alerts are unit-tested with promtool test rules, then each fires on its condition, after its for, and no other alert fires', () => {
    const dir = mkdtempSync(join(tmpdir(), 'rules-test-'));
    try {
      writeFileSync(join(dir, 'rules.yaml'), stringify({ groups: rule.spec.groups }));
      writeFileSync(join(dir, 'tests.yaml'), stringify({
        rule_files: ['rules.yaml'],
        evaluation_interval: '1m',
        tests: ALERT_CASES.map(({ what, evalTime, series, fires }) => ({
          name: what,
          interval: '1m',
          input_series: Object.entries(series).map(([name, values]) => ({ series: name, values })),
          alert_rule_test: alerts.map(({ alert }) => ({
            eval_time: evalTime, alertname: alert, exp_alerts: fires.filter(([name]) => name === alert).map(([name, labels]) => expectedAlert(name, labels)),
          })),
        })),
      }));
      const result = promtool(['test', 'rules', join(dir, 'tests.yaml')]);
      expect({ status: result.status, output: result.stdout + result.stderr }).toEqual({ status: 0, output: expect.stringContaining('SUCCESS') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('when the documented alerts (docs/observability.md) are read, then they are the PrometheusRule\'s alerts, in order, with the same expressions and durations', () => {
    expect(readmeAlerts()).toEqual(alerts.map(({ alert, expr, for: forDuration }) => ({ alert, expr, ...(forDuration ? { for: forDuration } : {}) })));
  });

  test('when every alert and dashboard query is parsed as PromQL, then each metric it names is one the manager\'s /metrics exports (or Prometheus\'s up)', () => {
    const exported = exportedNames(exposition);
    const uses = [
      ...alerts.map((a) => ({ where: `alert ${a.alert}`, expr: a.expr })),
      ...dashboardQueries(dashboard),
    ].flatMap(({ where, expr }) => metricNamesIn(expr).map((name) => ({ where, name })));
    expect(uses.length).toBeGreaterThan(40);
    expect(uses.filter(({ name }) => !exported.has(name))).toEqual([]);
    // Each kind of metric the dashboard is for has a query.
    const used = new Set(uses.map((u) => u.name));
    for (const name of ['hook_requests_total', 'actions_total', 'server_primaries', 'pod_utilization_ratio', 'hotspot_detections_total', 'leader', 'cluster_scrape_success', 'http_requests_total', 'http_request_duration_seconds_bucket', 'process_resident_memory_bytes', 'process_cpu_seconds_total']) {
      expect([name, used.has(`rethinkdb_manager_${name}`)]).toEqual([name, true]);
    }
  });

  test('when a query names a metric the manager does not export, or is not PromQL, then the check finds it (a renamed metric fails the test above)', () => {
    const exported = exportedNames(exposition);
    const renamed = 'sum by (route) (rate(rethinkdb_manager_http_requests_count{job="x"}[5m])) / on() group_left sum({__name__="rethinkdb_manager_leaders"})';
    expect(metricNamesIn(renamed).filter((name) => !exported.has(name))).toEqual(['rethinkdb_manager_http_requests_count', 'rethinkdb_manager_leaders']);
    expect(() => metricNamesIn('sum(rate(rethinkdb_manager_actions_total[5m])')).toThrow(/not valid PromQL/);
  });

  test('when the dashboard is read, then every panel queries the dashboard\'s Prometheus data source, panel ids are unique and panels fit the 24-column grid', () => {
    const panels = dashboard.panels;
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    for (const p of panels.filter((x) => x.type !== 'row')) {
      expect([p.title, p.datasource]).toEqual([p.title, { type: 'prometheus', uid: '${datasource}' }]);
      expect(p.targets.length).toBeGreaterThan(0);
      expect(p.gridPos.x + p.gridPos.w).toBeLessThanOrEqual(24);
      for (const t of p.targets) expect(t.expr).toContain('job="$job"');
    }
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'job']);
  });
});
