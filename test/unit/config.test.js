import { loadConfig } from '../../src/config.js';

describe('loadConfig', () => {
  test('when nothing is configured, then the sandbox backend and documented defaults are used', () => {
    const config = loadConfig({});
    expect(config.backend).toBe('sandbox');
    expect(config.http.port).toBe(8080);
    expect(config.rethinkdb).toMatchObject({ port: 28015, user: 'admin', password: '', tls: false });
    expect(config.managedTables).toEqual([]);
    expect(config.deadlines).toEqual({ actionSeconds: 20, prestopSeconds: 20, migrationSeconds: 3600, shutdownGraceSeconds: 25, poststartJoinSeconds: 300 });
    expect(config.monitor).toEqual({
      enabled: true, pollIntervalMs: 15000, hotUtilization: 0.8, hotSkew: 1.3, consecutivePolls: 2, immediateUtilization: 0.95,
      clearCooldownSeconds: 60, scaleOut: true, scaleOutCooldownSeconds: 600, maxReplicas: 16,
    });
  });

  test.each([
    ['MONITOR_HOT_UTILIZATION', '1.5', 'must be a number above 0 and at most 1'],
    ['MONITOR_HOT_UTILIZATION', 'high', 'must be a number above 0 and at most 1'],
    ['MONITOR_HOT_SKEW', '0.9', 'must be a number from 1 to 10'],
    ['MONITOR_POLL_INTERVAL_MS', '10', 'must be between 1000 and 3600000'],
    ['MONITOR_IMMEDIATE_UTILIZATION', '1.2', 'must be 0 (off) or a number above 0 and at most 1'],
    ['MONITOR_IMMEDIATE_UTILIZATION', 'off', 'must be 0 (off) or a number above 0 and at most 1'],
  ])('when %s=%s, then start-up fails saying what is accepted', (key, value, message) => {
    expect(() => loadConfig({ [key]: value })).toThrow(message);
  });

  test.each([['0', 0], ['0.0', 0], [' 0 ', 0], ['0.9', 0.9], ['1', 1]])('when MONITOR_IMMEDIATE_UTILIZATION=%s, then it is %p (0: off)', (value, expected) => {
    expect(loadConfig({ MONITOR_IMMEDIATE_UTILIZATION: value }).monitor.immediateUtilization).toBe(expected);
  });

  test('when RETHINKDB_HOST is set, then the rethinkdb backend is chosen', () => {
    const config = loadConfig({ RETHINKDB_HOST: 'rethinkdb.db.svc', RETHINKDB_PORT: '28016', RETHINKDB_TLS: 'true', AUTH_MODE: 'none' });
    expect(config.backend).toBe('rethinkdb');
    expect(config.rethinkdb).toMatchObject({ host: 'rethinkdb.db.svc', port: 28016, tls: true });
  });

  test('when RETHINKDB_HOST lists several host[:port] seeds, then each becomes a seed, with RETHINKDB_PORT where none is given', () => {
    const config = loadConfig({ RETHINKDB_HOST: 'rethinkdb-0.rethinkdb:28016, rethinkdb-1.rethinkdb,[fd00::7]:28017', RETHINKDB_PORT: '28015', AUTH_MODE: 'none' });
    expect(config.backend).toBe('rethinkdb');
    expect(config.rethinkdb.seeds).toEqual([
      { host: 'rethinkdb-0.rethinkdb', port: 28016 }, { host: 'rethinkdb-1.rethinkdb', port: 28015 }, { host: 'fd00::7', port: 28017 },
    ]);
  });

  test.each([['db:0'], ['db:70000'], ['db:x'], ['a b'], [' , ']])('when RETHINKDB_HOST=%j, then start-up fails saying what is accepted', (value) => {
    expect(() => loadConfig({ RETHINKDB_HOST: value, AUTH_MODE: 'none' })).toThrow(/RETHINKDB_HOST=.*(host\[:port\]|at least one host)/);
  });

  test('when GATE_HOLD_ENDPOINTS lists gates, then each is host:port (GATE_HOLD_PORT where none is given); without a token file it is refused', () => {
    const { gateHold } = loadConfig({ GATE_HOLD_TOKEN_FILE: '/var/run/gate/token', GATE_HOLD_ENDPOINTS: '127.0.0.1:9181, [::1], gate-a' });
    expect(gateHold).toEqual({
      tokenFile: '/var/run/gate/token', podSelector: 'app=rethinkdb-proxy', port: 9180, ttlMs: 2000, drainMs: 300, delayMs: 200, until: 'new-acts', endpoints: ['127.0.0.1:9181', '[::1]:9180', 'gate-a:9180'],
    });
    expect(loadConfig({}).gateHold).toMatchObject({ tokenFile: undefined, endpoints: null });
    expect(() => loadConfig({ GATE_HOLD_ENDPOINTS: '127.0.0.1:9181' })).toThrow(/GATE_HOLD_ENDPOINTS is set but GATE_HOLD_TOKEN_FILE is not/);
    expect(() => loadConfig({ GATE_HOLD_TTL_MS: '9000' })).toThrow(/GATE_HOLD_TTL_MS/);
    expect(loadConfig({ GATE_HOLD_UNTIL: 'old-gone' }).gateHold.until).toBe('old-gone');
    expect(() => loadConfig({ GATE_HOLD_UNTIL: 'never' })).toThrow(/GATE_HOLD_UNTIL/);
  });

  test('when PORT=0, then it is accepted (an ephemeral port for tests)', () => {
    expect(loadConfig({ PORT: '0' }).http.port).toBe(0);
  });

  test('when HTTP_REQUEST_TIMEOUT_SECONDS is not set, then a request must arrive whole within 30 s on both ports', () => {
    expect(loadConfig({}).http).toMatchObject({ requestTimeoutSeconds: 30, requestTimeoutMs: 30000 });
  });

  test.each([['1', 1000], ['300', 300000], [' 45 ', 45000]])('when HTTP_REQUEST_TIMEOUT_SECONDS=%j, then the servers get %p ms', (value, ms) => {
    expect(loadConfig({ HTTP_REQUEST_TIMEOUT_SECONDS: value }).http.requestTimeoutMs).toBe(ms);
  });

  test.each([['0'], ['301'], ['2.5'], ['soon']])('when HTTP_REQUEST_TIMEOUT_SECONDS=%j, then start-up fails saying what is accepted', (value) => {
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_SECONDS: value })).toThrow(`HTTP_REQUEST_TIMEOUT_SECONDS=${JSON.stringify(value)}: must be`);
    expect(() => loadConfig({ HTTP_REQUEST_TIMEOUT_SECONDS: value })).toThrow(/between 1 and 300/);
  });

  test.each([
    [{ LATENCY_TRIGGER_ENABLED: 'true', SUSPICION_PROBE_INTERVAL_MS: '0' }, 'LATENCY_TRIGGER_ENABLED=true needs the probes: SUSPICION_PROBE_INTERVAL_MS is 0'],
    [{ LATENCY_TRIGGER_ENABLED: 'true', SUSPICION_PROBE_INTERVAL_MS: '400' }, 'LATENCY_WINDOW_MS (1000) must be at least 3 times SUSPICION_PROBE_INTERVAL_MS (400)'],
    [{ LATENCY_TRIGGER_ENABLED: 'true', LATENCY_DISK_PROBE_INTERVAL_MS: '500' }, 'LATENCY_WINDOW_MS (1000) must be at least 3 times LATENCY_DISK_PROBE_INTERVAL_MS (500)'],
    [{ LATENCY_FACTOR: '1' }, 'LATENCY_FACTOR="1": must be a number from 1.5 to 100'],
    [{ HEADROOM_WEIGHTS: 'cpu=1,cpu=2' }, 'HEADROOM_WEIGHTS="cpu=1,cpu=2": cpu is given twice'],
    [{ LATENCY_DISK_PROBE_DB: 'rethinkdb' }, 'LATENCY_DISK_PROBE_DB="rethinkdb": must not be rethinkdb (the system database)'],
    [{ LATENCY_DISK_PROBE_DB: 'my-db' }, 'LATENCY_DISK_PROBE_DB="my-db": must be a RethinkDB database name (letters, digits and _)'],
  ])('when the latency trigger is set with %j, then start-up fails saying why', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  test('when the latency trigger is on with probes every 50 ms and windows of 1 s, or off with the probes off, then it is accepted', () => {
    expect(loadConfig({ LATENCY_TRIGGER_ENABLED: 'true' }).latency).toEqual({
      enabled: true, windowMs: 1000, factor: 4, minDeltaMs: 5, consecutiveWindows: 2, warmupWindows: 30, clearCooldownSeconds: 30, diskProbeIntervalMs: 250, diskProbeDb: 'rethinkdb_manager',
    });
    expect(loadConfig({ LATENCY_TRIGGER_ENABLED: 'true', LATENCY_DISK_PROBE_INTERVAL_MS: '0', LATENCY_WINDOW_MS: '200', SUSPICION_PROBE_INTERVAL_MS: '50' }).latency.diskProbeIntervalMs).toBe(0);
    expect(loadConfig({ SUSPICION_PROBE_INTERVAL_MS: '0' }).latency.enabled).toBe(false);
  });

  test('when several keys are wrong, then one error lists every problem', () => {
    let error;
    try {
      loadConfig({ PORT: 'eighty', LOG_LEVEL: 'loud', RETHINKDB_TLS: 'maybe', MANAGED_TABLES: 'ycsb', MANAGER_BACKEND: 'rethinkdb' });
    } catch (err) {
      error = err;
    }
    expect(error.problems).toEqual([
      expect.stringMatching(/^RETHINKDB_TLS="maybe": must be true or false$/),
      expect.stringMatching(/^MANAGED_TABLES="ycsb": expected db.table or db.\* entries, got ycsb$/),
      expect.stringMatching(/^PORT="eighty": must be an integer between 0 and 65535$/),
      expect.stringMatching(/^LOG_LEVEL="loud": must be one of fatal, error/),
      'MANAGER_BACKEND=rethinkdb needs RETHINKDB_HOST',
      'AUTH_MODE must be set when the manager has no Kubernetes API: static (with AUTH_STATIC_TOKEN_FILE) or none',
    ]);
    expect(error.message).toMatch(/^invalid configuration:\n {2}- /);
  });

  test('when selectors and overrides are given, then they are parsed', () => {
    const config = loadConfig({ MANAGED_TABLES: 'ycsb.usertable, app.*', POD_SERVER_OVERRIDES: 'rethinkdb-0=rdb_a,rethinkdb-1=rdb_b' });
    expect(config.managedTables).toEqual(['ycsb.usertable', 'app.*']);
    expect(config.podServerOverrides).toEqual({ 'rethinkdb-0': 'rdb_a', 'rethinkdb-1': 'rdb_b' });
  });
});

describe('loadConfig: auth', () => {
  test.each([
    ['the sandbox', {}, 'none'],
    ['a real database in a pod', { RETHINKDB_HOST: 'db', KUBERNETES_SERVICE_HOST: '198.19.192.1' }, 'tokenreview'],
    ['a real database with a kubeconfig', { RETHINKDB_HOST: 'db', KUBECONFIG: '/k' }, 'tokenreview'],
    ['a real database outside Kubernetes, static chosen', { RETHINKDB_HOST: 'db', AUTH_MODE: 'static', AUTH_STATIC_TOKEN_FILE: '/t' }, 'static'],
  ])('when the manager runs on %s, then AUTH_MODE defaults or is set to the expected mode', (name, env, mode) => {
    expect(loadConfig(env).auth.mode).toBe(mode);
  });

  test('when nothing is set, then hooks belong to the rethinkdb service account and operators to rethinkdb-manager-operator, in the namespace', () => {
    expect(loadConfig({ KUBERNETES_NAMESPACE: 'db' }).auth).toMatchObject({
      audience: 'rethinkdb-manager',
      hookSubjects: ['system:serviceaccount:db:rethinkdb'],
      operatorSubjects: ['system:serviceaccount:db:rethinkdb-manager-operator'],
      protectReads: false,
      cacheSeconds: 10,
    });
  });

  test('when subjects are listed, then user names and group: entries are kept in order', () => {
    expect(loadConfig({ AUTH_OPERATOR_SUBJECTS: 'alice, group:dba' }).auth.operatorSubjects).toEqual(['alice', 'group:dba']);
  });

  test.each([
    [{ AUTH_MODE: 'static' }, /AUTH_MODE=static needs AUTH_STATIC_TOKEN_FILE/],
    [{ AUTH_MODE: 'tokenreview' }, /the sandbox supports AUTH_MODE=static or none/],
    [{ RETHINKDB_HOST: 'db' }, /AUTH_MODE must be set when the manager has no Kubernetes API/],
    [{ RETHINKDB_HOST: 'db', KUBERNETES_MODE: 'off', AUTH_MODE: 'tokenreview' }, /AUTH_MODE=tokenreview needs a Kubernetes API/],
    [{ AUTH_MODE: 'oauth' }, /AUTH_MODE="oauth": must be one of tokenreview, static, none/],
    [{ AUTH_OPERATOR_SUBJECTS: 'group:' }, /expected user names or group:NAME entries/],
  ])('when the auth settings are %j, then start-up fails saying why', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe('loadConfig: Kubernetes', () => {
  test.each([
    [{}, 'off'],
    [{ KUBERNETES_SERVICE_HOST: '198.18.96.1', MANAGER_BACKEND: 'sandbox' }, 'in-cluster'],
    [{ KUBECONFIG: '/home/op/.kube/config' }, 'kubeconfig'],
    [{ KUBERNETES_SERVICE_HOST: '198.18.96.1', KUBERNETES_MODE: 'off', MANAGER_BACKEND: 'sandbox' }, 'off'],
  ])('when the environment is %j, then the Kubernetes mode is %s', (env, mode) => {
    expect(loadConfig(env).kubernetes.mode).toBe(mode);
  });

  test.each([
    [{}, 'KUBERNETES_MODE=auto: neither KUBERNETES_SERVICE_HOST (in a pod) nor KUBECONFIG is set'],
    [{ KUBECONFIG: '/home/op/.kube/config' }, 'KUBERNETES_MODE=auto: KUBECONFIG is set'],
    [{ KUBERNETES_MODE: 'off' }, 'KUBERNETES_MODE=off'],
  ])('when the environment is %j, then the start-up log can say how the mode was chosen: %s', (env, from) => {
    expect(loadConfig(env).kubernetes.modeFrom).toBe(from);
  });

  test('when it runs in a pod without RETHINKDB_HOST (or with it misspelt), then it refuses to start the sandbox unless asked for', () => {
    expect(() => loadConfig({ KUBERNETES_SERVICE_HOST: '198.18.96.1', RETHINKDB_HOSTS: 'rethinkdb' })).toThrow(
      /RETHINKDB_HOST is not set and this runs in a pod \(KUBERNETES_SERVICE_HOST is set\): set RETHINKDB_HOST to the RethinkDB servers, or MANAGER_BACKEND=sandbox/,
    );
    expect(loadConfig({ KUBERNETES_SERVICE_HOST: '198.18.96.1', MANAGER_BACKEND: 'sandbox' }).backend).toBe('sandbox');
    expect(loadConfig({}).backend).toBe('sandbox');
  });

  test('when the namespace is not a DNS label, then it is refused', () => {
    expect(() => loadConfig({ KUBERNETES_NAMESPACE: 'Rethink_DB' })).toThrow(/KUBERNETES_NAMESPACE="Rethink_DB": must be a DNS label/);
  });
});

describe('loadConfig: keys it does not know', () => {
  test('when a variable has one of the manager\'s prefixes but is no key, then a warning names it and the nearest key', () => {
    const config = loadConfig({ RETHINKDB_HOSTS: 'db', PRESTOP_DEADLINE_SECOND: '20', MONITOR_FOO: '1', PATH: '/usr/bin' });
    expect(config.warnings).toEqual([
      'MONITOR_FOO is not a configuration key; it is ignored',
      'PRESTOP_DEADLINE_SECOND is not a configuration key (did you mean PRESTOP_DEADLINE_SECONDS?); it is ignored',
      'RETHINKDB_HOSTS is not a configuration key (did you mean RETHINKDB_HOST?); it is ignored',
    ]);
  });

  test('when Kubernetes adds its service variables and the CLI\'s are set, then they are not warned about', () => {
    const config = loadConfig({
      MANAGER_BACKEND: 'sandbox', KUBERNETES_SERVICE_HOST: '198.18.96.1', KUBERNETES_SERVICE_PORT: '443', KUBERNETES_SERVICE_PORT_HTTPS: '443',
      KUBERNETES_PORT: 'tcp://198.18.96.1:443', KUBERNETES_PORT_443_TCP_ADDR: '198.18.96.1', RETHINKDB_CLIENT_SERVICE_HOST: '198.18.96.9',
      RETHINKDB_MANAGER_PORT_8080_TCP: 'tcp://198.18.96.8:8080', RETHINKDB_MANAGER_URL: 'http://x', RETHINKDB_MANAGER_TOKEN: 't',
    });
    expect(config.warnings).toEqual([]);
  });
});

