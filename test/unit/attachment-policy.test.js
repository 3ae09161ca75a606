// checkAttachment (src/policy/attachment.js): what the manager reports at start about a StatefulSet it did not
// install. The chart's own pod template has no finding; each missing piece is one finding with its consequence and
// the docs' section; the checks that depend on the configuration follow it.

import { checkAttachment, selectorTerms, serverContainer } from '../../src/policy/attachment.js';

const config = {
  statefulSetName: 'rethinkdb', namespace: 'db', podLabelSelector: 'app=rethinkdb', authMode: 'tokenreview', audience: 'rethinkdb-manager',
  readinessGateEnabled: true, prestopDeadlineSeconds: 20,
};

// The chart's StatefulSet, as the adapter projects it.
const chartLike = () => ({
  name: 'rethinkdb',
  podLabels: { app: 'rethinkdb' },
  terminationGracePeriodSeconds: 60,
  readinessGates: ['rethinkdb-manager.io/replicas-ready'],
  volumes: [{ name: 'data', tokenAudiences: [] }, { name: 'manager-token', tokenAudiences: ['rethinkdb-manager'] }],
  containers: [{
    name: 'rethinkdb',
    ports: [28015, 29015, 8080],
    text: '/bin/sh -c exec rethinkdb --bind all --canonical-address "$POD_IP" --canonical-address 127.0.0.1 --join ...',
    preStop: '/bin/sh -c curl -sf -XPOST "$MANAGER_URL/v1/hooks/prestop?pod=$POD_NAME" ...',
    postStart: '/bin/sh -c curl -sf -XPOST "$MANAGER_URL/v1/hooks/poststart?pod=$POD_NAME" ...',
    volumeMounts: ['data', 'manager-token'],
  }],
});

// A typical install of its own: its own labels, no hooks, no token, the default grace period, a plain start.
const bare = () => ({
  name: 'rdb',
  podLabels: { 'app.kubernetes.io/name': 'rdb' },
  terminationGracePeriodSeconds: null,
  readinessGates: [],
  volumes: [{ name: 'data', tokenAudiences: [] }],
  containers: [{ name: 'server', ports: [8080, 28015, 29015], text: 'rethinkdb --bind all --join rdb-0.rdb:29015', preStop: null, postStart: null, volumeMounts: ['data'] }],
});

describe('checkAttachment', () => {
  test('when the StatefulSet is the chart\'s, then there is no finding', () => {
    expect(checkAttachment(chartLike(), config)).toEqual([]);
  });

  test('when the StatefulSet does not exist, then that is the one finding, naming RETHINKDB_STATEFULSET', () => {
    const findings = checkAttachment(null, { ...config, statefulSetName: 'rdb' });
    expect(findings.map((f) => f.check)).toEqual(['statefulset']);
    expect(findings[0].missing).toBe('no StatefulSet rdb in the namespace db (RETHINKDB_STATEFULSET)');
  });

  test('when a typical install of its own is attached, then each missing piece is a finding, in order, with its docs section', () => {
    const findings = checkAttachment(bare(), { ...config, statefulSetName: 'rdb', podLabelSelector: 'app.kubernetes.io/name=rdb' });
    expect(findings.map((f) => [f.check, f.fix])).toEqual([
      ['prestop-hook', 'docs/existing-statefulset.md#the-hooks'],
      ['poststart-hook', 'docs/existing-statefulset.md#the-hooks'],
      ['hook-token', 'docs/existing-statefulset.md#the-hooks'],
      ['readiness-gate', 'docs/existing-statefulset.md#the-readiness-gate'],
      ['grace-period', 'docs/existing-statefulset.md#the-hooks'],
      ['canonical-loopback', 'docs/existing-statefulset.md#the-loopback-address'],
    ]);
    expect(findings[0].missing).toBe('the container server has no preStop hook that calls the manager (/v1/hooks/prestop)');
    expect(findings[4].missing).toBe('terminationGracePeriodSeconds is 30, under the preStop\'s 25 s (PRESTOP_DEADLINE_SECONDS and 5) and 10 s for RethinkDB\'s own shutdown');
  });

  test('when the pods do not carry RETHINKDB_POD_SELECTOR\'s labels, then that is said with the labels missing', () => {
    const findings = checkAttachment({ ...chartLike(), podLabels: { app: 'rethinkdb', tier: 'db' } }, { ...config, podLabelSelector: 'app=rethinkdb,tier=data,zone==a' });
    expect(findings.map((f) => f.check)).toEqual(['pod-selector']);
    expect(findings[0].missing).toBe('the pods of rethinkdb do not carry tier=data, zone=a (RETHINKDB_POD_SELECTOR=app=rethinkdb,tier=data,zone==a)');
  });

  test('when the token is for another audience, or mounted in no container, then hook-token; with AUTH_MODE static, no such check', () => {
    const other = chartLike();
    other.volumes[1].tokenAudiences = ['vault'];
    expect(checkAttachment(other, config).map((f) => f.check)).toEqual(['hook-token']);
    const unmounted = chartLike();
    unmounted.containers[0].volumeMounts = ['data'];
    expect(checkAttachment(unmounted, config).map((f) => f.check)).toEqual(['hook-token']);
    expect(checkAttachment(unmounted, { ...config, authMode: 'static' })).toEqual([]);
  });

  test('when the readiness gate is off in the manager, then its absence is no finding', () => {
    expect(checkAttachment({ ...chartLike(), readinessGates: [] }, { ...config, readinessGateEnabled: false })).toEqual([]);
  });

  test('when the grace period is exactly the hook\'s budget and 10 s, then it is enough; a longer deadline asks for more', () => {
    expect(checkAttachment({ ...chartLike(), terminationGracePeriodSeconds: 35 }, config)).toEqual([]);
    expect(checkAttachment({ ...chartLike(), terminationGracePeriodSeconds: 34 }, config).map((f) => f.check)).toEqual(['grace-period']);
    expect(checkAttachment(chartLike(), { ...config, prestopDeadlineSeconds: 50 }).map((f) => f.check)).toEqual(['grace-period']);
  });

  test('when --canonical-address=127.0.0.1 is written with =, then it counts; 127.0.0.10 does not', () => {
    const eq = chartLike();
    eq.containers[0].text = 'rethinkdb --canonical-address=$(POD_IP) --canonical-address=127.0.0.1';
    expect(checkAttachment(eq, config)).toEqual([]);
    eq.containers[0].text = 'rethinkdb --canonical-address 127.0.0.10';
    expect(checkAttachment(eq, config).map((f) => f.check)).toEqual(['canonical-loopback']);
  });

  test('when the server is not the first container, then the one with the cluster port is checked', () => {
    const sidecar = chartLike();
    sidecar.containers.unshift({ name: 'exporter', ports: [9090], text: 'exporter', preStop: null, postStart: null, volumeMounts: [] });
    expect(serverContainer(sidecar).name).toBe('rethinkdb');
    expect(checkAttachment(sidecar, config)).toEqual([]);
  });

  test('selectorTerms reads k=v and k==v terms and leaves set-based ones out', () => {
    expect(selectorTerms('app=rethinkdb, tier==db,env in (a,b),!legacy')).toEqual([{ key: 'app', value: 'rethinkdb' }, { key: 'tier', value: 'db' }]);
  });
});

// The shipped StatefulSet (deploy/k8s, which the chart renders the same) through the adapter's projection: nothing
// to report. Any edit that drops a hook, the token, the gate or the loopback address fails here.
describe('the shipped StatefulSet', () => {
  test('when deploy/k8s/rethinkdb-statefulset.yaml is projected as the adapter does, then checkAttachment finds nothing', async () => {
    const { readFileSync } = await import('node:fs');
    const { parse } = await import('yaml');
    const { toPodTemplate } = await import('../../src/kubernetes/kube-adapter.js');
    const sts = parse(readFileSync(new URL('../../deploy/k8s/rethinkdb-statefulset.yaml', import.meta.url), 'utf8'));
    expect(sts.kind).toBe('StatefulSet');
    const template = toPodTemplate(sts.metadata.name, sts.spec.template);
    expect(checkAttachment(template, { ...config, statefulSetName: sts.metadata.name })).toEqual([]);
  });
});

// The use-case (src/events/attachment-check.js): each finding one warning line in plain words, the metric by check.
describe('the attachment check at start', () => {
  test('when the StatefulSet lacks the hooks, then each missing piece is one warning naming the patch, and the metric counts it; a read that fails says so', async () => {
    const { createAttachmentCheck } = await import('../../src/events/attachment-check.js');
    const { createLogger } = await import('../../src/logger.js');
    const { createLogSink } = await import('../helpers/harness.js');
    const { loadConfig } = await import('../../src/config.js');
    const sink = createLogSink();
    const logger = createLogger({ level: 'info', destination: sink.stream });
    const set = [];
    const appConfig = loadConfig({ MANAGER_BACKEND: 'rethinkdb', RETHINKDB_HOST: 'rdb-0.rdb', KUBERNETES_MODE: 'kubeconfig', AUTH_MODE: 'tokenreview', RETHINKDB_STATEFULSET: 'rdb', RETHINKDB_POD_SELECTOR: 'app.kubernetes.io/name=rdb' });
    let template = bare();
    const kube = { getStatefulSetPodTemplate: async () => { if (template instanceof Error) throw template; return template; } };
    const check = createAttachmentCheck({ kube, config: appConfig, clock: { now: () => 0 }, logger, metrics: { setSetupFindings: (f) => set.push(f.map((x) => x.check)) } });
    const view = await check.run();
    expect(view.findings).toHaveLength(6);
    const warnings = sink.lines.filter((l) => l.level === 40);
    expect(warnings.map((l) => l.check)).toEqual(['prestop-hook', 'poststart-hook', 'hook-token', 'readiness-gate', 'grace-period', 'canonical-loopback']);
    expect(warnings[0].msg).toBe('the container server has no preStop hook that calls the manager (/v1/hooks/prestop): a pod that stops (deleted, rolled, evicted past the webhook) keeps its primaries until RethinkDB finds it gone: its clients see the whole failover (the patch: docs/existing-statefulset.md#the-hooks)');
    expect(set).toEqual([['prestop-hook', 'poststart-hook', 'hook-token', 'readiness-gate', 'grace-period', 'canonical-loopback']]);
    template = new Error('statefulsets.apps "rdb" is forbidden');
    expect(await check.run()).toBeNull();
    expect(sink.lines.at(-1)).toMatchObject({ level: 40, msg: 'the StatefulSet could not be read: what the manager needs from its pods is not checked', err: 'statefulsets.apps "rdb" is forbidden' });
    expect(check.view()).toBe(view);
  });
});
