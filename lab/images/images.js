#!/usr/bin/env node
// The lab's container images, in one place: their references, their runtime configs and the layers they are made of
// (lab/images/build.sh builds them; test/unit/lab-images.test.js checks the manager's and RethinkDB's configs against
// /Dockerfile's runtime stage and docker/rethinkdb/Dockerfile, so a Dockerfile change the lab misses fails a test).
// The configs are written out here, not derived from the Dockerfiles, for that check to mean something.
//
// CLI, for build.sh:
//   node lab/images/images.js list                  name<TAB>ref<TAB>layer,layer...  one line per image
//   node lab/images/images.js spec NAME             {ref, config, layers} for oci-tar.js
//   node lab/images/images.js base-packages         the Debian packages of the shared base layer, comma-separated
//   node lab/images/images.js apt-sources           the Debian archive's sources of this machine, one-line format
//   node lab/images/images.js dockerfile-node       the Node version the Dockerfile's runtime stage is based on

import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const REPO_ROOT = resolve(here, '..', '..');

const PATH_ENV = 'PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
export const SUITE = 'bookworm';
// One base layer under both Debian-based images: minbase (Essential packages + apt: sh, coreutils, getent, hostname,
// tr...) plus what node and the rethinkdb binary link against (ldd) and what the StatefulSet's hooks run (curl).
export const BASE_PACKAGES = ['ca-certificates', 'curl', 'libcurl4', 'libssl3', 'libstdc++6', 'zlib1g'];

// The chart's appVersion: the manager's default image tag (deploy/helm/.../values.yaml leaves manager.image.tag empty).
export function chartAppVersion(root = REPO_ROOT) {
  const text = readFileSync(join(root, 'deploy', 'helm', 'rethinkdb-k8s-manager', 'Chart.yaml'), 'utf8');
  const match = /^appVersion:\s*["']?([^"'\s]+)["']?\s*$/m.exec(text);
  if (!match) throw new Error('no appVersion in Chart.yaml');
  return match[1];
}

// The version a lab/kube/<dir>/go.mod pins for a module ("v1.12.4" -> "1.12.4").
export function pinnedVersion(dir, module, root = REPO_ROOT) {
  const text = readFileSync(join(root, 'lab', 'kube', dir, 'go.mod'), 'utf8');
  const escaped = module.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const match = new RegExp(`^\\s*(?:require\\s+)?${escaped}\\s+v(\\S+)`, 'm').exec(text);
  if (!match) throw new Error(`lab/kube/${dir}/go.mod pins no ${module}`);
  return match[1];
}

// What made each layer (the image config's history). The layers themselves are build.sh's business.
export const LAYERS = {
  base: `mmdebstrap --variant=minbase ${SUITE} --include=${BASE_PACKAGES.join(',')} (docs, man pages and locales left out)`,
  node: 'Node.js (the nodejs package of the build machine: bin, lib/node_modules), user node 1000:1000, /home/node',
  'manager-app': 'npm run build: dist/ at /app/dist',
  rethinkdb: 'rethinkdb server binary at /usr/bin/rethinkdb, user rethinkdb 1000:1000, /var/lib/rethinkdb owned by 1000:1000',
  pause: 'lab/images/pause.c, gcc -static, at /pause',
  coredns: 'lab/kube/bin/coredns at /coredns (cap_net_bind_service=+ep), /etc/ssl/certs/ca-certificates.crt, /tmp',
  'metrics-server': 'lab/kube/bin/metrics-server at /metrics-server, /etc/ssl/certs/ca-certificates.crt, /tmp',
};

export function images(root = REPO_ROOT) {
  const appVersion = chartAppVersion(root);
  return {
    // /Dockerfile's runtime stage (node:20-bookworm-slim, USER 1000 = node). The query gate runs from it too
    // (rethinkdb-proxy.yaml: node dist/gate.mjs).
    manager: {
      ref: `docker.io/library/rethinkdb-k8s-manager:${appVersion}`,
      layers: ['base', 'node', 'manager-app'],
      config: {
        Env: [PATH_ENV, 'NODE_ENV=production', 'NODE_OPTIONS=--max-semi-space-size=2'],
        Labels: {
          'org.opencontainers.image.title': 'rethinkdb-k8s-manager',
          'org.opencontainers.image.version': appVersion,
          'org.opencontainers.image.licenses': 'Apache-2.0',
        },
        WorkingDir: '/app',
        User: '1000:1000',
        ExposedPorts: { '8080/tcp': {} },
        Cmd: ['node', 'dist/server.mjs'],
      },
    },
    // docker/rethinkdb/Dockerfile, on Debian minbase instead of the official rethinkdb image.
    rethinkdb: {
      ref: 'docker.io/library/rethinkdb-k8s-rethinkdb:2.4.4-bookworm-slim',
      layers: ['base', 'rethinkdb'],
      config: {
        Env: [PATH_ENV],
        User: '1000:1000',
        WorkingDir: '/var/lib/rethinkdb',
        ExposedPorts: { '28015/tcp': {}, '29015/tcp': {}, '8080/tcp': {} },
        Cmd: ['rethinkdb', '--bind', 'all', '--directory', '/var/lib/rethinkdb/data'],
      },
    },
    // containerd's sandbox image: waits for SIGTERM/SIGINT, reaps children.
    pause: {
      ref: 'rkl.local/pause:1',
      layers: ['pause'],
      config: { User: '65535:65535', Entrypoint: ['/pause'] },
    },
    coredns: {
      ref: `rkl.local/coredns:${pinnedVersion('coredns', 'github.com/coredns/coredns', root)}`,
      binary: 'lab/kube/bin/coredns',
      layers: ['coredns'],
      config: {
        Env: [PATH_ENV],
        User: '65534',
        WorkingDir: '/',
        ExposedPorts: { '53/tcp': {}, '53/udp': {} },
        Entrypoint: ['/coredns'],
      },
    },
    'metrics-server': {
      ref: `rkl.local/metrics-server:${pinnedVersion('metrics-server', 'sigs.k8s.io/metrics-server', root)}`,
      binary: 'lab/kube/bin/metrics-server',
      layers: ['metrics-server'],
      config: { Env: [PATH_ENV], User: '65534', Entrypoint: ['/metrics-server'] },
    },
  };
}

// --- Dockerfiles, read only far enough to compare: the stages and the runtime instructions of each. ---

// Instruction lines with continuations joined and comments dropped: [{op, args}] grouped by FROM into stages.
export function parseDockerfile(text) {
  const stages = [];
  let pending = '';
  const lines = text.split(/\r?\n/);
  const flush = () => {
    const line = pending.trim();
    pending = '';
    if (!line) return;
    const match = /^(\S+)\s*(.*)$/s.exec(line);
    const op = match[1].toUpperCase();
    const args = match[2].trim();
    if (op === 'FROM') {
      const [image, as, name] = args.split(/\s+/).filter((w) => !w.startsWith('--'));
      stages.push({ from: image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
    } else {
      if (!stages.length) throw new Error(`${op} before any FROM`);
      stages.at(-1).instructions.push({ op, args });
    }
  };
  for (const raw of lines) {
    if (/^\s*#/.test(raw)) continue; // a comment, also inside a continued instruction
    if (/\\\s*$/.test(raw)) {
      pending += `${raw.replace(/\\\s*$/, '')} `;
    } else {
      pending += raw;
      flush();
    }
  }
  flush();
  return stages;
}

function unquote(value) {
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) return value.slice(1, -1).replace(/\\(.)/g, '$1');
  if (value.length >= 2 && value.startsWith("'") && value.endsWith("'")) return value.slice(1, -1);
  return value.replace(/\\(.)/g, '$1');
}

// `K=V K2="v 2"` (or the old `K V` form) -> [[K, V], ...].
function keyValues(args) {
  if (!/^[^\s=]+=/.test(args)) {
    const [key, ...rest] = args.split(/\s+/);
    return [[key, rest.join(' ')]];
  }
  const pairs = [];
  const pair = /([^\s=]+)=("(?:[^"\\]|\\.)*"|'[^']*'|(?:[^\s\\]|\\.)*)/g;
  let match;
  while ((match = pair.exec(args))) pairs.push([match[1], unquote(match[2])]);
  return pairs;
}

function execForm(args) {
  if (args.startsWith('[')) return JSON.parse(args);
  return ['/bin/sh', '-c', args];
}

// What a stage's instructions set in the image config (not what it inherits from its FROM).
export function stageConfig(stage) {
  const config = { Env: [], Labels: {}, ExposedPorts: {} };
  for (const { op, args } of stage.instructions) {
    if (op === 'ENV') for (const [k, v] of keyValues(args)) config.Env = [...config.Env.filter((e) => !e.startsWith(`${k}=`)), `${k}=${v}`];
    else if (op === 'LABEL') for (const [k, v] of keyValues(args)) config.Labels[k] = v;
    else if (op === 'EXPOSE') for (const port of args.split(/\s+/)) config.ExposedPorts[port.includes('/') ? port : `${port}/tcp`] = {};
    else if (op === 'USER') config.User = args;
    else if (op === 'WORKDIR') config.WorkingDir = args;
    else if (op === 'CMD') config.Cmd = execForm(args);
    else if (op === 'ENTRYPOINT') config.Entrypoint = execForm(args);
    else if (op === 'VOLUME') config.Volumes = Object.fromEntries(execFormOrWords(args).map((v) => [v, {}]));
    else if (op === 'STOPSIGNAL') config.StopSignal = args;
  }
  return config;
}

function execFormOrWords(args) {
  return args.startsWith('[') ? JSON.parse(args) : args.split(/\s+/);
}

export function dockerfileRuntime(path) {
  const stages = parseDockerfile(readFileSync(path, 'utf8'));
  const stage = stages.at(-1);
  return { from: stage.from, config: stageConfig(stage) };
}

// --- This machine's Debian archive, for mmdebstrap (no host written into the build). ---

// files: [{name, text}] of /etc/apt/sources.list and /etc/apt/sources.list.d/* -> one-line "deb URI SUITE main"
// entries of the Debian archive (URIs ending in /debian or /debian-security) for suite and its -updates/-security.
export function debianSources(files, suite = SUITE) {
  const entries = [];
  for (const { name, text } of files) {
    if (name.endsWith('.sources')) {
      for (const paragraph of text.split(/\n\s*\n/)) {
        const fields = {};
        for (const line of paragraph.split('\n')) {
          const m = /^([A-Za-z-]+):\s*(.*)$/.exec(line);
          if (m && !line.startsWith('#')) fields[m[1].toLowerCase()] = m[2].trim();
        }
        if (!fields.uris || !fields.suites) continue;
        if (fields.enabled === 'no' || !(fields.types ?? '').split(/\s+/).includes('deb')) continue;
        for (const uri of fields.uris.split(/\s+/)) for (const s of fields.suites.split(/\s+/)) entries.push({ uri, suite: s, components: (fields.components ?? 'main').split(/\s+/) });
      }
    } else {
      for (const line of text.split('\n')) {
        const m = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)\s*(.*)$/.exec(line);
        if (m) entries.push({ uri: m[1], suite: m[2], components: m[3].split(/\s+/).filter(Boolean) });
      }
    }
  }
  const seen = new Set();
  return entries
    .filter((e) => /\/debian(-security)?\/?$/.test(e.uri) && (e.suite === suite || e.suite.startsWith(`${suite}-`)) && e.components.includes('main'))
    .map((e) => `deb ${e.uri.replace(/\/$/, '')} ${e.suite} main`)
    .filter((line) => !seen.has(line) && seen.add(line));
}

function readAptSources() {
  const files = [];
  for (const path of ['/etc/apt/sources.list']) {
    try { files.push({ name: path, text: readFileSync(path, 'utf8') }); } catch { /* absent */ }
  }
  let names = [];
  try { names = readdirSync('/etc/apt/sources.list.d').sort(); } catch { /* absent */ }
  for (const name of names) {
    if (name.endsWith('.list') || name.endsWith('.sources')) files.push({ name, text: readFileSync(join('/etc/apt/sources.list.d', name), 'utf8') });
  }
  return files;
}

function cli(argv) {
  const [command, name] = argv;
  const all = images();
  if (command === 'list') {
    for (const [key, image] of Object.entries(all)) process.stdout.write(`${key}\t${image.ref}\t${image.layers.join(',')}\t${image.binary ?? ''}\n`);
  } else if (command === 'spec') {
    const image = all[name];
    if (!image) throw new Error(`no image ${name}; one of ${Object.keys(all).join(', ')}`);
    process.stdout.write(`${JSON.stringify({ ref: image.ref, config: image.config, layers: image.layers.map((l) => LAYERS[l]) }, null, 2)}\n`);
  } else if (command === 'base-packages') {
    process.stdout.write(`${BASE_PACKAGES.join(',')}\n`);
  } else if (command === 'apt-sources') {
    const lines = debianSources(readAptSources());
    if (!lines.length) throw new Error(`no Debian archive (…/debian, ${SUITE}, main) in /etc/apt/sources.list{,.d/*}`);
    process.stdout.write(`${lines.join('\n')}\n`);
  } else if (command === 'dockerfile-node') {
    const { from } = dockerfileRuntime(join(REPO_ROOT, 'Dockerfile'));
    const match = /^node:(\d+(?:\.\d+)*)/.exec(from);
    if (!match) throw new Error(`the Dockerfile's runtime stage is not FROM node:<version>: ${from}`);
    process.stdout.write(`${match[1]}\n`);
  } else {
    throw new Error('usage: images.js list | spec NAME | base-packages | apt-sources | dockerfile-node');
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  try {
    cli(process.argv.slice(2));
  } catch (error) {
    process.stderr.write(`images.js: ${error.message}\n`);
    process.exit(1);
  }
}
