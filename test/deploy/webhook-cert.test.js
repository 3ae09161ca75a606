// deploy/webhook-cert.sh with the real openssl and a stand-in kubectl that keeps what it is given: the Secret
// holds a certificate for the manager's Service names, signed by the CA that goes into the webhook's caBundle,
// and usable by the manager's TLS server; shellcheck finds nothing in it.

import { spawnSync } from 'node:child_process';
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createSecureContext } from 'node:tls';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse } from 'yaml';
import { commandExists } from '../helpers/deploy-files.js';

const SCRIPT = join(process.cwd(), 'deploy', 'webhook-cert.sh');

// kubectl stand-in: `create secret generic NAME --type=kubernetes.io/tls --from-file=KEY=F ... --dry-run=client -o yaml`
// prints the Secret as kubectl would; `apply -f -` keeps its input; `patch` keeps its arguments.
function run(env = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-cert-'));
  writeFileSync(join(dir, 'kubectl'), `#!/bin/sh
printf '%s\\n' "$*" >> "${dir}/calls"
case "$1 $2 $3 $4 $5" in
  *"create secret generic"*)
    printf 'apiVersion: v1\\nkind: Secret\\nmetadata:\\n  name: %s\\n  namespace: %s\\n' "$6" "$2"
    for a in "$@"; do case "$a" in --type=*) printf 'type: %s\\n' "\${a#--type=}";; esac; done
    printf 'data:\\n'
    for a in "$@"; do case "$a" in --from-file=*) kv="\${a#--from-file=}"; printf '  %s: %s\\n' "\${kv%%=*}" "$(base64 < "\${kv#*=}" | tr -d '\\n')";; esac; done;;
esac
case "$1" in apply) cat > "${dir}/applied.yaml";; patch) printf '%s' "$*" > "${dir}/patch";; esac
`);
  chmodSync(join(dir, 'kubectl'), 0o755);
  const result = spawnSync('/bin/sh', [SCRIPT], { env: { PATH: `${dir}:/usr/bin:/bin`, ...env }, encoding: 'utf8', timeout: 30000 });
  const read = (name) => { try { return readFileSync(join(dir, name), 'utf8'); } catch { return null; } };
  const out = { result, calls: read('calls'), applied: read('applied.yaml'), patch: read('patch') };
  rmSync(dir, { recursive: true, force: true });
  return out;
}

describe('deploy/webhook-cert.sh', () => {
  test('when run, then the Secret\'s certificate names the Service, is signed by the caBundle patched in, and serves TLS with its key', () => {
    const { result, calls, applied, patch } = run({ NAMESPACE: 'dbs' });
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    // The two ends of the pipe run at once, so the order of the first two calls varies.
    expect(calls.split('\n')).toContainEqual(expect.stringMatching(
      /^-n dbs create secret generic rethinkdb-manager-webhook-tls --type=kubernetes.io\/tls --from-file=tls.crt=\S+ --from-file=tls.key=\S+ --from-file=ca.crt=\S+ --dry-run=client -o yaml$/,
    ));
    const secret = parse(applied);
    expect(secret).toMatchObject({ kind: 'Secret', type: 'kubernetes.io/tls', metadata: { name: 'rethinkdb-manager-webhook-tls', namespace: 'dbs' } });
    const certPem = Buffer.from(secret.data['tls.crt'], 'base64');
    const keyPem = Buffer.from(secret.data['tls.key'], 'base64');
    const cert = new X509Certificate(certPem);
    expect(cert.subjectAltName).toBe('DNS:rethinkdb-manager, DNS:rethinkdb-manager.dbs, DNS:rethinkdb-manager.dbs.svc, DNS:rethinkdb-manager.dbs.svc.cluster.local');
    expect(cert.checkHost('rethinkdb-manager.dbs.svc')).toBe('rethinkdb-manager.dbs.svc');
    const ops = JSON.parse(patch.match(/-p (\[.*\])$/)[1]);
    expect(patch).toMatch(/^patch validatingwebhookconfiguration rethinkdb-manager-eviction --type=json -p /);
    expect(ops).toEqual([{ op: 'add', path: '/webhooks/0/clientConfig/caBundle', value: expect.any(String) }]);
    const ca = new X509Certificate(Buffer.from(ops[0].value, 'base64'));
    // The Secret carries the same CA, for a follower replica to check the leader's certificate with.
    expect(secret.data['ca.crt']).toBe(ops[0].value);
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkPrivateKey(createPrivateKey(keyPem))).toBe(true);
    expect(() => createSecureContext({ cert: certPem, key: keyPem })).not.toThrow();
  });

  test('when checked with shellcheck, then it has no finding', () => {
    if (!commandExists('shellcheck')) throw new Error('shellcheck is not installed: run `apt-get install shellcheck`');
    const lint = spawnSync('shellcheck', ['--severity=style', SCRIPT], { encoding: 'utf8' });
    expect(lint.stdout).toBe('');
    expect(lint.status).toBe(0);
  });
});
