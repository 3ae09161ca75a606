// loadGateConfig(env): the gate's only reader of the environment. Pure: checks every key and reports all problems at
// once, as the manager's configuration does (the gate shares no code with the manager).

const KEYS = [
  { env: 'GATE_PORT', field: 'port', parse: integer(0, 65535), default: 28015 },
  { env: 'GATE_HOST', field: 'host', parse: nonEmpty, default: '0.0.0.0' },
  { env: 'GATE_UPSTREAM', field: 'upstream', parse: hostPort, default: undefined },
  { env: 'GATE_METRICS_PORT', field: 'metricsPort', parse: integer(0, 65535), default: 9180 },
  { env: 'GATE_RETRY_BUDGET_MS', field: 'retry.budgetMs', parse: integer(0, 60000), default: 3000 },
  { env: 'GATE_RETRY_MIN_MS', field: 'retry.minMs', parse: integer(1, 10000), default: 20 },
  { env: 'GATE_RETRY_MAX_MS', field: 'retry.maxMs', parse: integer(1, 60000), default: 200 },
  { env: 'GATE_MAX_FRAME_BYTES', field: 'maxFrameBytes', parse: integer(1024, 1024 * 1024 * 1024), default: 64 * 1024 * 1024 },
  { env: 'GATE_CONNECT_TIMEOUT_MS', field: 'connectTimeoutMs', parse: integer(100, 600000), default: 5000 },
  { env: 'GATE_SHUTDOWN_DELAY_SECONDS', field: 'shutdownDelaySeconds', parse: integer(0, 600), default: 0 },
  { env: 'GATE_DRAIN_SECONDS', field: 'drainSeconds', parse: integer(0, 3600), default: 20 },
  { env: 'GATE_DRAIN_IDLE_MS', field: 'drainIdleMs', parse: integer(0, 60000), default: 200 },
  { env: 'GATE_TLS_CERT_FILE', field: 'tls.certFile', parse: nonEmpty, default: undefined },
  { env: 'GATE_TLS_KEY_FILE', field: 'tls.keyFile', parse: nonEmpty, default: undefined },
  { env: 'GATE_UPSTREAM_TLS', field: 'upstreamTls.enabled', parse: boolean, default: false },
  { env: 'GATE_UPSTREAM_TLS_CA_FILE', field: 'upstreamTls.caFile', parse: nonEmpty, default: undefined },
  { env: 'GATE_UPSTREAM_TLS_SERVERNAME', field: 'upstreamTls.servername', parse: nonEmpty, default: undefined },
  { env: 'GATE_HOLD_TOKEN_FILE', field: 'hold.tokenFile', parse: nonEmpty, default: undefined },
  { env: 'GATE_HOLD_MAX_MS', field: 'hold.maxMs', parse: integer(1, 60000), default: 5000 },
  { env: 'GATE_HOLD_MAX_QUEUED_BYTES', field: 'hold.maxQueuedBytes', parse: integer(1024, 1024 * 1024 * 1024), default: 16 * 1024 * 1024 },
  { env: 'GATE_MAX_CONNECTIONS', field: 'maxConnections', parse: integer(1, 1000000), default: 2048 },
  { env: 'GATE_HANDSHAKE_TIMEOUT_MS', field: 'handshakeTimeoutMs', parse: integer(100, 600000), default: 10000 },
  { env: 'GATE_FRAME_TIMEOUT_MS', field: 'frameTimeoutMs', parse: integer(1000, 3600000), default: 60000 },
  { env: 'GATE_MAX_RETAINED_BYTES', field: 'maxRetainedBytes', parse: integer(0, 16 * 1024 * 1024 * 1024), default: 64 * 1024 * 1024 },
  { env: 'GATE_MAX_RETAINED_BYTES_PER_CONNECTION', field: 'maxRetainedBytesPerConnection', parse: integer(0, 16 * 1024 * 1024 * 1024), default: 16 * 1024 * 1024 },
  { env: 'GATE_MAX_PARTIAL_FRAME_BYTES', field: 'maxPartialFrameBytes', parse: integer(1024, 16 * 1024 * 1024 * 1024), default: 192 * 1024 * 1024 },
  { env: 'LOG_LEVEL', field: 'logLevel', parse: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']), default: 'info' },
];

export const GATE_KEYS = KEYS.map((k) => ({ env: k.env, default: k.default }));

export function loadGateConfig(env) {
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
  if (!config.upstream && !env.GATE_UPSTREAM) problems.push('GATE_UPSTREAM is required: host:port of a RethinkDB proxy or server (its driver port)');
  if (config.port !== 0 && config.port === config.metricsPort) problems.push('GATE_PORT and GATE_METRICS_PORT must differ');
  if (config.maxPartialFrameBytes < config.maxFrameBytes) problems.push('GATE_MAX_PARTIAL_FRAME_BYTES must be at least GATE_MAX_FRAME_BYTES (one whole frame must fit)');
  if (config.retry.minMs > config.retry.maxMs) problems.push('GATE_RETRY_MIN_MS must not exceed GATE_RETRY_MAX_MS');
  if (Boolean(config.tls.certFile) !== Boolean(config.tls.keyFile)) problems.push('GATE_TLS_CERT_FILE and GATE_TLS_KEY_FILE go together');
  config.tls.enabled = Boolean(config.tls.certFile && config.tls.keyFile);
  if (config.upstreamTls.caFile && !config.upstreamTls.enabled) problems.push('GATE_UPSTREAM_TLS_CA_FILE is set but GATE_UPSTREAM_TLS is not true');
  // A GATE_ variable that is none of the keys is most likely a misspelling, which would otherwise go unnoticed.
  config.warnings = unknownGateKeys(env).map(({ key, nearest }) => `${key} is not a gate configuration key${nearest ? ` (did you mean ${nearest}?)` : ''}; it is ignored`);
  if (problems.length > 0) {
    const err = new Error(`invalid gate configuration:\n  - ${problems.join('\n  - ')}`);
    err.problems = problems;
    throw err;
  }
  return config;
}

// What Kubernetes puts in every container for each Service of the namespace (service links, e.g. a Service
// gate-metrics gives GATE_METRICS_SERVICE_HOST and GATE_METRICS_PORT_9180_TCP): not the gate's keys, not misspellings.
const SERVICE_LINK = /_SERVICE_(HOST|PORT)(_[A-Z0-9_]+)?$|_PORT_\d+_(TCP|UDP|SCTP)(_(PROTO|PORT|ADDR))?$/;

// Pure: the GATE_ variables that are none of the keys, each with the nearest key (edit distance at most 3), sorted.
export function unknownGateKeys(env) {
  const known = KEYS.map((k) => k.env);
  return Object.keys(env)
    .filter((key) => key.startsWith('GATE_') && !known.includes(key) && !SERVICE_LINK.test(key))
    .sort()
    .map((key) => {
      const [nearest, distance] = known.map((k) => [k, editDistance(key, k)]).sort((a, b) => a[1] - b[1])[0];
      return { key, nearest: distance <= 3 || nearest.startsWith(key) ? nearest : null };
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

function integer(min, max) {
  return (raw) => {
    const n = /^\s*\d+\s*$/.test(raw) ? Number(raw) : NaN;
    return Number.isInteger(n) && n >= min && n <= max ? { value: n } : { error: `must be an integer between ${min} and ${max}` };
  };
}

function nonEmpty(raw) {
  return raw.trim() ? { value: raw.trim() } : { error: 'must not be empty' };
}

function boolean(raw) {
  if (['true', '1', 'yes'].includes(raw.toLowerCase())) return { value: true };
  if (['false', '0', 'no'].includes(raw.toLowerCase())) return { value: false };
  return { error: 'must be true or false' };
}

function oneOf(values) {
  return (raw) => (values.includes(raw) ? { value: raw } : { error: `must be one of ${values.join(', ')}` });
}

function hostPort(raw) {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(raw.trim());
  if (!match || Number(match[2]) < 1 || Number(match[2]) > 65535) return { error: 'must be host:port (e.g. rethinkdb-proxy:28015)' };
  return { value: { host: match[1].replace(/^\[|\]$/g, ''), port: Number(match[2]) } };
}
