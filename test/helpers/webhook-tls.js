// A CA and a serving certificate for 127.0.0.1 and localhost, made with the openssl command line, as
// deploy/webhook-cert.sh makes them for the manager's Service: what the webhook tests serve and trust.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function makeWebhookCertificate({ names = ['DNS:localhost', 'IP:127.0.0.1'] } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'webhook-tls-'));
  const file = (name) => join(dir, name);
  const openssl = (...args) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2', '-subj', '/CN=webhook-test-ca');
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('tls.key'), '-out', file('tls.csr'), '-subj', '/CN=rethinkdb-manager');
  writeFileSync(file('ext.cnf'), `subjectAltName=${names.join(',')}\nextendedKeyUsage=serverAuth\n`);
  openssl('x509', '-req', '-in', file('tls.csr'), '-CA', file('ca.crt'), '-CAkey', file('ca.key'), '-CAcreateserial', '-out', file('tls.crt'), '-days', '2', '-extfile', file('ext.cnf'));
  return {
    certFile: file('tls.crt'), keyFile: file('tls.key'), ca: readFileSync(file('ca.crt')),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
