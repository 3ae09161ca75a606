// docker/compose.yaml, checked without a Docker engine: three RethinkDB servers that form one cluster and are
// named the way the manager maps hostnames to servers, and a manager whose environment loadConfig accepts.

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { CONFIG_KEYS, loadConfig } from '../../src/config.js';
import { findServerForPod } from '../../src/cluster/cluster-model.js';
import { readYamlFile, repoRoot } from '../helpers/deploy-files.js';

const composeDir = join(repoRoot, 'docker');
const [compose] = readYamlFile(join(composeDir, 'compose.yaml'));
const rethinkdbServices = Object.entries(compose.services).filter(([, s]) => s.command?.[0] === 'rethinkdb');
const option = (command, name) => command.flatMap((a, i) => (command[i - 1] === name ? [a] : []));
const environment = Object.fromEntries(Object.entries(compose.services.manager.environment).map(([k, v]) => [k, String(v)]));

describe('docker/compose.yaml', () => {
  test('when it starts, then there are three RethinkDB servers and the manager', () => {
    expect(rethinkdbServices.map(([name]) => name)).toEqual(['rethinkdb-0', 'rethinkdb-1', 'rethinkdb-2']);
    expect(compose.services.manager).toBeDefined();
  });

  test.each(rethinkdbServices)('when %s starts, then its server name is its hostname with - as _, it advertises its hostname, and binds all interfaces', (name, service) => {
    expect(service.hostname).toBe(name);
    expect(option(service.command, '--server-name')).toEqual([name.replaceAll('-', '_')]);
    expect(option(service.command, '--canonical-address')).toEqual([name]);
    expect(option(service.command, '--bind')).toEqual(['all']);
    const server = { id: 'u', name: name.replaceAll('-', '_'), connected: true, hostname: service.hostname, canonicalAddresses: [] };
    expect(findServerForPod({ servers: [server] }, { podName: name })?.name).toBe(server.name);
  });

  test('when the servers join, then each one after the first joins only servers started before it, so they form one cluster', () => {
    rethinkdbServices.forEach(([name, service], i) => {
      const joined = option(service.command, '--join').map((hostPort) => hostPort.split(':')[0]);
      expect(joined).toEqual(rethinkdbServices.slice(0, i).map(([n]) => n));
      expect(service.depends_on ?? []).toEqual(joined);
      if (i > 0) expect(joined).not.toContain(name);
    });
  });

  test.each(Object.keys(environment))('when %s is set for the manager, then it is a key loadConfig knows', (key) => {
    expect(CONFIG_KEYS.map((k) => k.env)).toContain(key);
  });

  test('when the manager starts, then loadConfig accepts its environment: RethinkDB backend, no Kubernetes, a host every server answers to', () => {
    const config = loadConfig(environment);
    expect(config).toMatchObject({ backend: 'rethinkdb', kubernetes: { mode: 'off' }, auth: { mode: 'static' } });
    expect(compose.services.manager.secrets).toContain('manager-token');
    expect(config.auth.staticTokenFile).toBe('/run/secrets/manager-token');
    expect(compose.secrets['manager-token']).toEqual({ environment: 'MANAGER_TOKEN' });
    for (const [, service] of rethinkdbServices) expect(service.networks.default.aliases).toContain(config.rethinkdb.host);
  });

  test.each(Object.entries(compose.services))('when %s is built, then its Dockerfile exists and its image tag is precise', (name, service) => {
    const build = typeof service.build === 'string' ? { context: service.build } : service.build;
    expect(existsSync(join(composeDir, build.context, build.dockerfile ?? 'Dockerfile'))).toBe(true);
    expect(service.image).toMatch(/:\d+\.\d+\.\d+/);
  });

  test.each(Object.entries(compose.services))('when %s publishes ports, then only on 127.0.0.1', (name, service) => {
    for (const port of service.ports ?? []) expect(String(port)).toMatch(/^127\.0\.0\.1:/);
  });
});
