// loadConfig(env): the only reader of the environment. Pure: checks every key and reports all problems at once.

import { timingProblems } from './policy/leadership.js';
import { DEFAULT_DRAIN_TAINTS } from './policy/maintenance.js';
import { HOLD_UNTIL } from './policy/query-holds.js';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
const BACKENDS = ['rethinkdb', 'sandbox'];
const AUTH_MODES = ['tokenreview', 'static', 'none'];

// Each key: its env name, default, parser and the field it sets. The README's configuration table mirrors this list.
const KEYS = [
  { env: 'MANAGER_BACKEND', field: 'backend', parse: oneOf(BACKENDS), default: undefined },
  { env: 'RETHINKDB_HOST', field: 'rethinkdb.seedList', parse: hostList, default: undefined },
  { env: 'RETHINKDB_PORT', field: 'rethinkdb.port', parse: integer(1, 65535), default: 28015 },
  { env: 'RETHINKDB_USER', field: 'rethinkdb.user', parse: nonEmptyString, default: 'admin' },
  { env: 'RETHINKDB_PASSWORD', field: 'rethinkdb.password', parse: anyString, default: '' },
  { env: 'RETHINKDB_TLS', field: 'rethinkdb.tls', parse: boolean, default: false },
  { env: 'RETHINKDB_TLS_CA_FILE', field: 'rethinkdb.tlsCaFile', parse: nonEmptyString, default: undefined },
  { env: 'RETHINKDB_TLS_SERVERNAME', field: 'rethinkdb.tlsServername', parse: nonEmptyString, default: undefined },
  { env: 'RETHINKDB_CONNECT_TIMEOUT_SECONDS', field: 'rethinkdb.connectTimeoutSeconds', parse: integer(1, 300), default: 5 },
  { env: 'RETHINKDB_QUERY_TIMEOUT_MS', field: 'rethinkdb.queryTimeoutMs', parse: integer(100, 600000), default: 5000 },
  { env: 'RETHINKDB_RECONNECT_MIN_MS', field: 'rethinkdb.reconnectMinMs', parse: integer(10, 600000), default: 500 },
  { env: 'RETHINKDB_RECONNECT_MAX_MS', field: 'rethinkdb.reconnectMaxMs', parse: integer(10, 3600000), default: 30000 },
  { env: 'MANAGED_TABLES', field: 'managedTables', parse: tableSelectors, default: [] },
  { env: 'POD_SERVER_OVERRIDES', field: 'podServerOverrides', parse: keyValuePairs, default: {} },
  { env: 'KUBERNETES_MODE', field: 'kubernetes.mode', parse: oneOf(['auto', 'in-cluster', 'kubeconfig', 'off']), default: 'auto' },
  { env: 'KUBERNETES_NAMESPACE', field: 'kubernetes.namespace', parse: dnsLabel, default: 'rethinkdb' },
  { env: 'RETHINKDB_POD_SELECTOR', field: 'kubernetes.podLabelSelector', parse: nonEmptyString, default: 'app=rethinkdb' },
  { env: 'KUBERNETES_REQUEST_TIMEOUT_MS', field: 'kubernetes.requestTimeoutMs', parse: integer(100, 600000), default: 5000 },
  { env: 'RETHINKDB_STATEFULSET', field: 'kubernetes.statefulSetName', parse: dnsLabel, default: 'rethinkdb' },
  { env: 'PORT', field: 'http.port', parse: integer(0, 65535), default: 8080 },
  { env: 'HOST', field: 'http.host', parse: nonEmptyString, default: '0.0.0.0' },
  { env: 'HTTP_REQUEST_TIMEOUT_SECONDS', field: 'http.requestTimeoutSeconds', parse: integer(1, 300), default: 30 },
  { env: 'LOG_LEVEL', field: 'logLevel', parse: oneOf(LOG_LEVELS), default: 'info' },
  { env: 'ACTION_DEADLINE_SECONDS', field: 'deadlines.actionSeconds', parse: integer(1, 3600), default: 20 },
  { env: 'PRESTOP_DEADLINE_SECONDS', field: 'deadlines.prestopSeconds', parse: integer(2, 3600), default: 20 },
  { env: 'MIGRATION_DEADLINE_SECONDS', field: 'deadlines.migrationSeconds', parse: integer(1, 86400), default: 3600 },
  { env: 'SHUTDOWN_GRACE_SECONDS', field: 'deadlines.shutdownGraceSeconds', parse: integer(0, 3600), default: 25 },
  { env: 'RETRY_MIN_MS', field: 'retry.minMs', parse: integer(10, 600000), default: 500 },
  { env: 'RETRY_MAX_MS', field: 'retry.maxMs', parse: integer(10, 3600000), default: 30000 },
  { env: 'WAIT_POLL_INTERVAL_MS', field: 'waitPollIntervalMs', parse: integer(10, 60000), default: 250 },
  { env: 'TABLE_WRITE_CONCURRENCY', field: 'tableWriteConcurrency', parse: integer(1, 64), default: 8 },
  { env: 'HEARTBEAT_TIMEOUT_SECONDS', field: 'heartbeat.timeoutSeconds', parse: offOrInteger(2, 3600), default: 0 },
  { env: 'FAILOVER_ADOPT', field: 'failover.adopt', parse: boolean, default: true },
  { env: 'FAILOVER_CHECK_MS', field: 'failover.checkMs', parse: integer(200, 600000), default: 2000 },
  { env: 'SUSPICION_PROBE_INTERVAL_MS', field: 'suspicion.probeIntervalMs', parse: offOrInteger(20, 60000), default: 50 },
  { env: 'SUSPICION_AFTER_MS', field: 'suspicion.afterMs', parse: integer(50, 60000), default: 150 },
  { env: 'SUSPICION_BUSY_AFTER_MS', field: 'suspicion.busyAfterMs', parse: integer(50, 60000), default: 1000 },
  { env: 'SUSPICION_HOLD_TTL_MS', field: 'suspicion.holdTtlMs', parse: integer(100, 60000), default: 4000 },
  { env: 'LOSS_RESTORE_AFTER_SECONDS', field: 'lossRestore.afterSeconds', parse: offOrInteger(5, 604800), default: 1800 },
  { env: 'PRESTOP_HEARTBEAT_TIMEOUT_SECONDS', field: 'prestop.heartbeatTimeoutSeconds', parse: offOrInteger(2, 3600), default: 2 },
  { env: 'PRESTOP_HEARTBEAT_WINDOW_SECONDS', field: 'prestop.heartbeatWindowSeconds', parse: integer(1, 86400), default: 120 },
  { env: 'PRESTOP_MOVE_RAFT_LEADER', field: 'prestop.moveRaftLeader', parse: boolean, default: true },
  { env: 'POSTSTART_GIVE_BACK', field: 'poststart.giveBack', parse: oneOf(['always', 'balance', 'never']), default: 'balance' },
  { env: 'POSTSTART_DURING_ROLLOUT', field: 'poststart.duringRollout', parse: oneOf(['defer', 'now']), default: 'defer' },
  { env: 'PRESTOP_MAJORITY_WAIT_SECONDS', field: 'prestop.majorityWaitSeconds', parse: integer(0, 3600), default: 10 },
  { env: 'READINESS_GATE_ENABLED', field: 'readiness.enabled', parse: boolean, default: true },
  { env: 'READINESS_MAX_WAIT_SECONDS', field: 'readiness.maxUnreadySeconds', parse: integer(1, 86400), default: 600 },
  { env: 'POSTSTART_JOIN_TIMEOUT_SECONDS', field: 'deadlines.poststartJoinSeconds', parse: integer(1, 3600), default: 300 },
  { env: 'PERFWARNING_LONG_SECONDS', field: 'perfwarning.longSeconds', parse: integer(1, 604800), default: 600 },
  { env: 'PERFWARNING_MOVE_RAFT_LEADER', field: 'perfwarning.moveRaftLeader', parse: boolean, default: true },
  { env: 'RAFT_LEADER_MOVE_SETTLE_MS', field: 'raftLeader.settleMs', parse: integer(0, 60000), default: 300 },
  { env: 'RAFT_LEADER_MOVE_WAIT_SECONDS', field: 'raftLeader.waitSeconds', parse: integer(1, 600), default: 10 },
  { env: 'MONITOR_ENABLED', field: 'monitor.enabled', parse: boolean, default: true },
  { env: 'MONITOR_POLL_INTERVAL_MS', field: 'monitor.pollIntervalMs', parse: integer(1000, 3600000), default: 15000 },
  { env: 'MONITOR_HOT_UTILIZATION', field: 'monitor.hotUtilization', parse: fraction, default: 0.8 },
  { env: 'MONITOR_HOT_SKEW', field: 'monitor.hotSkew', parse: ratio(1, 10, 1.3), default: 1.3 },
  { env: 'MONITOR_CONSECUTIVE_POLLS', field: 'monitor.consecutivePolls', parse: integer(1, 100), default: 2 },
  { env: 'MONITOR_IMMEDIATE_UTILIZATION', field: 'monitor.immediateUtilization', parse: offOrFraction, default: 0.95 },
  { env: 'MONITOR_CLEAR_COOLDOWN_SECONDS', field: 'monitor.clearCooldownSeconds', parse: integer(0, 86400), default: 60 },
  { env: 'MONITOR_SCALE_OUT', field: 'monitor.scaleOut', parse: boolean, default: true },
  { env: 'MONITOR_SCALE_OUT_COOLDOWN_SECONDS', field: 'monitor.scaleOutCooldownSeconds', parse: integer(0, 86400), default: 600 },
  { env: 'MONITOR_MAX_REPLICAS', field: 'monitor.maxReplicas', parse: integer(1, 1000), default: 16 },
  { env: 'LATENCY_TRIGGER_ENABLED', field: 'latency.enabled', parse: boolean, default: false },
  { env: 'LATENCY_WINDOW_MS', field: 'latency.windowMs', parse: integer(200, 60000), default: 1000 },
  { env: 'LATENCY_DISK_PROBE_INTERVAL_MS', field: 'latency.diskProbeIntervalMs', parse: offOrInteger(50, 60000), default: 250 },
  { env: 'LATENCY_DISK_PROBE_DB', field: 'latency.diskProbeDb', parse: identifier, default: 'rethinkdb_manager' },
  { env: 'LATENCY_FACTOR', field: 'latency.factor', parse: ratio(1.5, 100, 4), default: 4 },
  { env: 'LATENCY_MIN_DELTA_MS', field: 'latency.minDeltaMs', parse: integer(0, 60000), default: 5 },
  { env: 'LATENCY_CONSECUTIVE_WINDOWS', field: 'latency.consecutiveWindows', parse: integer(1, 100), default: 2 },
  { env: 'LATENCY_WARMUP_WINDOWS', field: 'latency.warmupWindows', parse: integer(1, 100000), default: 30 },
  { env: 'LATENCY_CLEAR_COOLDOWN_SECONDS', field: 'latency.clearCooldownSeconds', parse: integer(0, 86400), default: 30 },
  { env: 'HEADROOM_TARGETS', field: 'headroom.enabled', parse: boolean, default: false },
  { env: 'HEADROOM_WEIGHTS', field: 'headroom.weights', parse: headroomWeights, default: { cpu: 1, node: 1, latency: 1 } },
  { env: 'HEADROOM_TOLERANCE', field: 'headroom.tolerance', parse: offOrFraction, default: 0.1 },
  { env: 'NODE_WATCH_ENABLED', field: 'maintenance.watchNodes', parse: boolean, default: true },
  { env: 'NODE_DRAIN_TAINTS', field: 'maintenance.taints', parse: taintKeys, default: [...DEFAULT_DRAIN_TAINTS] },
  { env: 'WEBHOOK_PORT', field: 'webhook.port', parse: integer(0, 65535), default: 8443 },
  { env: 'WEBHOOK_TLS_CERT_FILE', field: 'webhook.certFile', parse: nonEmptyString, default: undefined },
  { env: 'WEBHOOK_TLS_KEY_FILE', field: 'webhook.keyFile', parse: nonEmptyString, default: undefined },
  { env: 'WEBHOOK_TLS_CA_FILE', field: 'webhook.caFile', parse: nonEmptyString, default: undefined },
  { env: 'WEBHOOK_TLS_SERVER_NAME', field: 'webhook.serverName', parse: nonEmptyString, default: undefined },
  { env: 'WEBHOOK_EVICTION_DEADLINE_SECONDS', field: 'webhook.evictionDeadlineSeconds', parse: integer(1, 9), default: 8 },
  { env: 'WEBHOOK_EVICTION_HOLD_SECONDS', field: 'webhook.evictionHoldSeconds', parse: integer(10, 86400), default: 300 },
  { env: 'LEADER_ELECTION_ENABLED', field: 'leaderElection.enabled', parse: boolean, default: true },
  { env: 'LEADER_ELECTION_LEASE_NAME', field: 'leaderElection.leaseName', parse: dnsLabel, default: 'rethinkdb-manager' },
  { env: 'LEADER_ELECTION_LEASE_DURATION_SECONDS', field: 'leaderElection.leaseDurationSeconds', parse: integer(2, 300), default: 15 },
  { env: 'LEADER_ELECTION_RENEW_DEADLINE_SECONDS', field: 'leaderElection.renewDeadlineSeconds', parse: integer(1, 300), default: 10 },
  { env: 'LEADER_ELECTION_RETRY_PERIOD_SECONDS', field: 'leaderElection.retryPeriodSeconds', parse: integer(1, 60), default: 2 },
  { env: 'POD_NAME', field: 'leaderElection.podName', parse: nonEmptyString, default: undefined },
  { env: 'POD_IP', field: 'leaderElection.podIp', parse: nonEmptyString, default: undefined },
  { env: 'MANAGER_ADVERTISE_HOST', field: 'leaderElection.advertiseHost', parse: nonEmptyString, default: undefined },
  { env: 'RELAY_TOKEN_FILE', field: 'relay.tokenFile', parse: nonEmptyString, default: '/var/run/secrets/rethinkdb-manager/relay/token' },
  { env: 'RELAY_AUDIENCE', field: 'relay.audience', parse: nonEmptyString, default: 'rethinkdb-manager-relay' },
  // Holds on the query gates around a primary handover (docs/query-gate.md): off without a token file.
  { env: 'GATE_HOLD_TOKEN_FILE', field: 'gateHold.tokenFile', parse: nonEmptyString, default: undefined },
  { env: 'GATE_HOLD_ENDPOINTS', field: 'gateHold.endpointList', parse: hostList, default: undefined },
  { env: 'GATE_HOLD_POD_SELECTOR', field: 'gateHold.podSelector', parse: nonEmptyString, default: 'app=rethinkdb-proxy' },
  { env: 'GATE_HOLD_PORT', field: 'gateHold.port', parse: integer(1, 65535), default: 9180 },
  { env: 'GATE_HOLD_TTL_MS', field: 'gateHold.ttlMs', parse: integer(100, 5000), default: 2000 },
  { env: 'GATE_HOLD_DRAIN_MS', field: 'gateHold.drainMs', parse: integer(0, 2000), default: 300 },
  { env: 'GATE_HOLD_DELAY_MS', field: 'gateHold.delayMs', parse: integer(0, 300), default: 200 },
  { env: 'GATE_HOLD_UNTIL', field: 'gateHold.until', parse: oneOf(HOLD_UNTIL), default: 'new-acts' },
  { env: 'AUTH_MODE', field: 'auth.mode', parse: oneOf(AUTH_MODES), default: undefined },
  { env: 'AUTH_AUDIENCE', field: 'auth.audience', parse: nonEmptyString, default: 'rethinkdb-manager' },
  { env: 'AUTH_HOOK_SUBJECTS', field: 'auth.hookSubjects', parse: subjects, default: undefined },
  { env: 'AUTH_OPERATOR_SUBJECTS', field: 'auth.operatorSubjects', parse: subjects, default: undefined },
  { env: 'AUTH_STATIC_TOKEN_FILE', field: 'auth.staticTokenFile', parse: nonEmptyString, default: undefined },
  { env: 'AUTH_PROTECT_READS', field: 'auth.protectReads', parse: boolean, default: false },
  { env: 'AUTH_CACHE_SECONDS', field: 'auth.cacheSeconds', parse: integer(0, 300), default: 10 },
  { env: 'SANDBOX_ELECTION_TIMEOUT_MS', field: 'sandbox.electionTimeoutMs', parse: integer(0, 600000), default: 10000 },
  { env: 'SANDBOX_BACKFILL_MS_PER_1000_DOCS', field: 'sandbox.backfillMsPer1000Docs', parse: integer(0, 600000), default: 100 },
];

export function loadConfig(env) {
  const problems = [];
  const config = {};
  for (const key of KEYS) {
    const raw = env[key.env];
    let value = key.default;
    if (raw !== undefined && raw !== '') {
      const parsed = key.parse(raw);
      if (parsed.error) problems.push(`${key.env}=${JSON.stringify(raw)}: ${parsed.error}`);
      else value = parsed.value;
    }
    setPath(config, key.field, value);
  }
  const { endpointList, ...gateHold } = config.gateHold;
  // The gates' HTTP ports as host:port ('[v6]:port'); an entry without a port is at GATE_HOLD_PORT.
  gateHold.endpoints = endpointList ? endpointList.map((e) => `${e.host.includes(':') ? `[${e.host}]` : e.host}:${e.port ?? gateHold.port}`) : null;
  config.gateHold = gateHold;
  if (gateHold.endpoints && !gateHold.tokenFile) problems.push('GATE_HOLD_ENDPOINTS is set but GATE_HOLD_TOKEN_FILE is not: the gates take holds only with their shared token');
  const { seedList, ...rethinkdb } = config.rethinkdb;
  config.rethinkdb = rethinkdb;
  // The seed hosts; the others are learned from server_status once connected.
  config.rethinkdb.seeds = (seedList ?? []).map((s) => ({ host: s.host, port: s.port ?? config.rethinkdb.port }));
  config.rethinkdb.host = seedList ? env.RETHINKDB_HOST.trim() : undefined;
  if (!config.backend) config.backend = config.rethinkdb.host ? 'rethinkdb' : 'sandbox';
  // In a pod, a missing (or misspelt) RETHINKDB_HOST would quietly run the in-memory sandbox, authentication off, and
  // every hook would answer 200 to nothing real: there the sandbox must be asked for.
  if (!env.MANAGER_BACKEND && config.backend === 'sandbox' && env.KUBERNETES_SERVICE_HOST) {
    problems.push('RETHINKDB_HOST is not set and this runs in a pod (KUBERNETES_SERVICE_HOST is set): set RETHINKDB_HOST to the '
      + 'RethinkDB servers, or MANAGER_BACKEND=sandbox to run the in-memory sandbox on purpose');
  }
  if (config.backend === 'rethinkdb' && !config.rethinkdb.host) {
    problems.push('MANAGER_BACKEND=rethinkdb needs RETHINKDB_HOST');
  }
  // auto: in-cluster inside a pod, a kubeconfig when KUBECONFIG is set, otherwise no Kubernetes API.
  // modeFrom: how the mode was chosen, for the start-up log (an 'off' chosen by auto is not one asked for).
  if (config.kubernetes.mode === 'auto') {
    config.kubernetes.mode = env.KUBERNETES_SERVICE_HOST ? 'in-cluster' : env.KUBECONFIG ? 'kubeconfig' : 'off';
    config.kubernetes.modeFrom = {
      'in-cluster': 'KUBERNETES_MODE=auto: KUBERNETES_SERVICE_HOST is set (in a pod)',
      kubeconfig: 'KUBERNETES_MODE=auto: KUBECONFIG is set',
      off: 'KUBERNETES_MODE=auto: neither KUBERNETES_SERVICE_HOST (in a pod) nor KUBECONFIG is set',
    }[config.kubernetes.mode];
  } else {
    config.kubernetes.modeFrom = `KUBERNETES_MODE=${config.kubernetes.mode}`;
  }
  problems.push(...resolveAuth(config));
  if (config.rethinkdb.reconnectMinMs > config.rethinkdb.reconnectMaxMs) {
    problems.push('RETHINKDB_RECONNECT_MIN_MS must not exceed RETHINKDB_RECONNECT_MAX_MS');
  }
  if (config.retry.minMs > config.retry.maxMs) problems.push('RETRY_MIN_MS must not exceed RETRY_MAX_MS');
  problems.push(...latencyProblems(config));
  if (Boolean(config.webhook.certFile) !== Boolean(config.webhook.keyFile)) {
    problems.push('WEBHOOK_TLS_CERT_FILE and WEBHOOK_TLS_KEY_FILE go together (the eviction webhook is served only with both)');
  }
  // Both ports (the API and the webhook) give a client this long to send a whole request, headers and body.
  config.http.requestTimeoutMs = config.http.requestTimeoutSeconds * 1000;
  config.webhook.enabled = Boolean(config.webhook.certFile && config.webhook.keyFile);
  config.webhook.serverName ??= `rethinkdb-manager.${config.kubernetes.namespace}.svc`;
  // Leader election needs a Kubernetes API (the Lease) and a real database: the sandbox is one process.
  config.leaderElection.active = config.leaderElection.enabled && config.backend !== 'sandbox' && config.kubernetes.mode !== 'off';
  const le = config.leaderElection;
  le.timings = { leaseDurationMs: le.leaseDurationSeconds * 1000, renewDeadlineMs: le.renewDeadlineSeconds * 1000, retryPeriodMs: le.retryPeriodSeconds * 1000 };
  if (le.active) problems.push(...timingProblems(le.timings));
  // Where the followers reach this replica: MANAGER_ADVERTISE_HOST, else the pod's IP (downward API), else 127.0.0.1.
  le.advertiseHost ??= le.podIp ?? '127.0.0.1';
  if (config.rethinkdb.tlsCaFile && !config.rethinkdb.tls) {
    problems.push('RETHINKDB_TLS_CA_FILE is set but RETHINKDB_TLS is not true');
  }
  // Keys that look like the manager's but are none of its keys: a misspelling is otherwise silently ignored.
  config.warnings = unknownKeys(env).map(({ key, nearest }) => `${key} is not a configuration key${nearest ? ` (did you mean ${nearest}?)` : ''}; it is ignored`);
  if (problems.length > 0) {
    const err = new Error(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    err.problems = problems;
    throw err;
  }
  return config;
}

// Auth defaults follow where the manager runs: TokenReview when it has a Kubernetes API, none on the sandbox, and
// a real database without a Kubernetes API must choose (static token or, knowingly, none).
function resolveAuth(config) {
  const { auth, kubernetes } = config;
  const problems = [];
  if (!auth.mode) {
    if (config.backend === 'sandbox') auth.mode = 'none';
    else if (kubernetes.mode !== 'off') auth.mode = 'tokenreview';
    else problems.push('AUTH_MODE must be set when the manager has no Kubernetes API: static (with AUTH_STATIC_TOKEN_FILE) or none');
  }
  auth.namespace = kubernetes.namespace;
  auth.hookSubjects ??= [`system:serviceaccount:${kubernetes.namespace}:rethinkdb`];
  auth.operatorSubjects ??= [`system:serviceaccount:${kubernetes.namespace}:rethinkdb-manager-operator`];
  if (auth.mode === 'static' && !auth.staticTokenFile) problems.push('AUTH_MODE=static needs AUTH_STATIC_TOKEN_FILE (a file holding the bearer token)');
  if (auth.mode === 'tokenreview' && config.backend === 'sandbox') {
    problems.push('AUTH_MODE=tokenreview needs a real Kubernetes API; the sandbox supports AUTH_MODE=static or none');
  }
  if (auth.mode === 'tokenreview' && config.backend !== 'sandbox' && kubernetes.mode === 'off') {
    problems.push('AUTH_MODE=tokenreview needs a Kubernetes API (KUBERNETES_MODE is off)');
  }
  return problems;
}

export const CONFIG_KEYS = KEYS.map(({ env, default: def }) => ({ env, default: def }));

// The prefixes of the manager's own keys, distinctive enough that another program's variable rarely has them.
const OWN_PREFIXES = [
  'RETHINKDB_', 'MANAGER_', 'MANAGED_', 'PRESTOP_', 'POSTSTART_', 'PERFWARNING_', 'MONITOR_', 'WEBHOOK_', 'LEADER_ELECTION_', 'AUTH_',
  'READINESS_', 'NODE_WATCH', 'NODE_DRAIN', 'RAFT_LEADER_', 'RELAY_', 'SANDBOX_', 'KUBERNETES_', 'GATE_HOLD_',
];
// What Kubernetes puts in every container for each Service of the namespace (service links), e.g.
// RETHINKDB_CLIENT_SERVICE_HOST or RETHINKDB_MANAGER_PORT_8080_TCP_ADDR: not the manager's keys, and not misspellings.
const SERVICE_LINK = /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$|_PORT(_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?)?$/;

// Pure: the variables that carry one of the manager's prefixes and are none of its keys, each with the nearest key
// (edit distance at most 3), sorted.
// The command-line client's own variables (src/cli) share the prefix.
const CLI_KEYS = new Set(['RETHINKDB_MANAGER_URL', 'RETHINKDB_MANAGER_TOKEN']);

export function unknownKeys(env) {
  const known = new Set(KEYS.map((k) => k.env));
  return Object.keys(env)
    .filter((key) => OWN_PREFIXES.some((p) => key.startsWith(p)) && !known.has(key) && !CLI_KEYS.has(key) && !SERVICE_LINK.test(key))
    .sort()
    .map((key) => {
      let nearest = null;
      let best = 4;
      for (const candidate of known) {
        const d = editDistance(key, candidate);
        if (d < best) { best = d; nearest = candidate; }
      }
      return { key, nearest };
    });
}

function editDistance(a, b) {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length];
}

function setPath(target, path, value) {
  const parts = path.split('.');
  let node = target;
  for (const part of parts.slice(0, -1)) node = node[part] ??= {};
  node[parts.at(-1)] = value;
}

// 0 turns the feature off; otherwise an integer in [min, max].
function offOrInteger(min, max) {
  const parse = integer(min, max);
  return (raw) => {
    if (raw.trim() === '0') return { value: 0 };
    const parsed = parse(raw);
    return parsed.error ? { error: `must be 0 (off) or an integer between ${min} and ${max}` } : parsed;
  };
}

function nonEmptyString(raw) {
  return raw.trim() ? { value: raw.trim() } : { error: 'must not be empty' };
}

function anyString(raw) {
  return { value: raw };
}

function integer(min, max) {
  return (raw) => {
    if (!/^-?\d+$/.test(raw.trim())) return { error: `must be an integer between ${min} and ${max}` };
    const value = Number(raw);
    if (value < min || value > max) return { error: `must be between ${min} and ${max}` };
    return { value };
  };
}

function fraction(raw) {
  const value = Number(raw.trim());
  return Number.isFinite(value) && value > 0 && value <= 1 ? { value } : { error: 'must be a number above 0 and at most 1 (for example 0.8)' };
}

function offOrFraction(raw) {
  if (raw.trim() !== '' && Number(raw.trim()) === 0) return { value: 0 };
  return fraction(raw).error ? { error: 'must be 0 (off) or a number above 0 and at most 1 (for example 0.95)' } : fraction(raw);
}

// A ratio between min and max (a threshold times a reference); example: a value to show in the message.
function ratio(min, max, example) {
  return (raw) => {
    const value = Number(raw.trim());
    return Number.isFinite(value) && value >= min && value <= max ? { value } : { error: `must be a number from ${min} to ${max} (for example ${example})` };
  };
}

function boolean(raw) {
  const v = raw.trim().toLowerCase();
  if (['true', '1', 'yes'].includes(v)) return { value: true };
  if (['false', '0', 'no'].includes(v)) return { value: false };
  return { error: 'must be true or false' };
}

function oneOf(values) {
  return (raw) => (values.includes(raw.trim())
    ? { value: raw.trim() }
    : { error: `must be one of ${values.join(', ')}` });
}

function dnsLabel(raw) {
  return /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(raw.trim()) ? { value: raw.trim() } : { error: 'must be a DNS label (lowercase letters, digits and -)' };
}

// cpu=W,node=W,latency=W: the weight of each part of a target's headroom (src/planner/headroom.js); a part left out
// weighs 0; at least one weighs more.
function headroomWeights(raw) {
  const weights = { cpu: 0, node: 0, latency: 0 };
  const seen = new Set();
  for (const item of raw.split(',').map((x) => x.trim()).filter(Boolean)) {
    const [part, value, extra] = item.split('=').map((x) => x.trim());
    const w = Number(value);
    if (!(part in weights) || extra !== undefined || value === undefined || value === '' || !Number.isFinite(w) || w < 0) {
      return { error: `expected part=weight pairs of cpu, node and latency with weights of 0 or more (for example cpu=1,node=1,latency=2), got ${JSON.stringify(item)}` };
    }
    if (seen.has(part)) return { error: `${part} is given twice` };
    seen.add(part);
    weights[part] = w;
  }
  return Object.values(weights).some((w) => w > 0) ? { value: weights } : { error: 'at least one part must weigh more than 0' };
}

// A RethinkDB database name ([A-Za-z0-9_]), not the system database.
function identifier(raw) {
  const v = raw.trim();
  if (v === 'rethinkdb') return { error: 'must not be rethinkdb (the system database)' };
  return /^[A-Za-z0-9_]{1,64}$/.test(v) ? { value: v } : { error: 'must be a RethinkDB database name (letters, digits and _)' };
}

// Taint keys, comma separated (a qualified name: an optional DNS prefix and a name).
function taintKeys(raw) {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = items.filter((s) => !/^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/.test(s));
  if (bad.length) return { error: `expected taint keys such as node.kubernetes.io/unschedulable, got ${bad.join(', ')}` };
  return { value: items };
}

// "db.table" or "db.*", comma separated.
function tableSelectors(raw) {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = items.filter((s) => !/^[A-Za-z0-9_]+\.([A-Za-z0-9_]+|\*)$/.test(s));
  if (bad.length) return { error: `expected db.table or db.* entries, got ${bad.join(', ')}` };
  return { value: items };
}

// "system:serviceaccount:ns:name,alice,group:dba": user names, or groups prefixed with group:.
function subjects(raw) {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  const bad = items.filter((s) => /\s/.test(s) || s === 'group:');
  if (bad.length) return { error: `expected user names or group:NAME entries, got ${bad.join(', ')}` };
  return { value: items };
}

// "host[:port],host[:port]" (an IPv6 address in brackets): the seed servers to connect through.
function hostList(raw) {
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  if (items.length === 0) return { error: 'must name at least one host' };
  const value = [];
  for (const item of items) {
    const match = /^(?:\[([0-9A-Fa-f:.]+)\]|([^\s:[\]/]+))(?::(\d{1,5}))?$/.exec(item);
    const port = match?.[3] === undefined ? null : Number(match[3]);
    if (!match || (port !== null && (port < 1 || port > 65535))) return { error: `expected host[:port] entries (port 1 to 65535), got ${item}` };
    value.push({ host: match[1] ?? match[2], port });
  }
  return { value };
}

// "pod-a=server_a,pod-b=server_b"
function keyValuePairs(raw) {
  const value = {};
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const match = /^([^=\s]+)=([^=\s]+)$/.exec(item);
    if (!match) return { error: `expected pod=server entries, got ${item}` };
    value[match[1]] = match[2];
  }
  return { value };
}

// The latency trigger reads the prober's direct probes: it needs them on, and each window must hold at least three.
function latencyProblems({ latency, suspicion }) {
  if (!latency.enabled) return [];
  if (suspicion.probeIntervalMs === 0) return ['LATENCY_TRIGGER_ENABLED=true needs the probes: SUSPICION_PROBE_INTERVAL_MS is 0'];
  const slowest = Math.max(suspicion.probeIntervalMs, latency.diskProbeIntervalMs);
  if (latency.windowMs < 3 * slowest) {
    const key = slowest === suspicion.probeIntervalMs ? 'SUSPICION_PROBE_INTERVAL_MS' : 'LATENCY_DISK_PROBE_INTERVAL_MS';
    return [`LATENCY_WINDOW_MS (${latency.windowMs}) must be at least 3 times ${key} (${slowest}): each window needs three probes of every server`];
  }
  return [];
}
