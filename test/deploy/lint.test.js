// Linters over the deployment files: dockerfilelint on both Dockerfiles, shellcheck on every shell script the
// manifests run, and the Dockerfile properties an operator relies on (pinned bases, non-root, exec form).

import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import dockerfilelint from 'dockerfilelint';
import { BUNDLE_ENTRY, DIST_DIR } from '../../scripts/build.js';
import {
  commandExists, containersOf, dockerInstructions as instructions, finalStageOf, imageCommand, renderKustomization, repoRoot,
} from '../helpers/deploy-files.js';

const dockerfiles = ['Dockerfile', 'docker/rethinkdb/Dockerfile'];
const read = (file) => readFileSync(join(repoRoot, file), 'utf8');

// Every `sh -c` script in the manifests: container commands and exec hooks (probes included, should any appear).
const { resources } = renderKustomization();
const scripts = resources.flatMap(({ doc }) => (['Deployment', 'StatefulSet'].includes(doc.kind) ? containersOf(doc) : [])
  .flatMap((c) => {
    const execs = [['command', c.command], ...Object.entries(c.lifecycle ?? {}).map(([hook, h]) => [hook, h.exec?.command])];
    return execs.filter(([, cmd]) => cmd?.[0] === '/bin/sh' && cmd[1] === '-c').map(([where, cmd]) => [`${doc.metadata.name}/${c.name} ${where}`, cmd[2]]);
  }));

describe('Dockerfiles', () => {
  test.each(dockerfiles)('when %s is linted with dockerfilelint, then it has no finding', (file) => {
    expect(dockerfilelint.run(repoRoot, read(file))).toEqual([]);
  });

  test('when a Dockerfile has known faults, then dockerfilelint reports them (the linter runs)', () => {
    const titles = dockerfilelint.run(repoRoot, 'FROM node:latest\nRUN apt-get install curl\n').map((m) => m.title);
    expect(titles).toEqual(expect.arrayContaining(['Base Image Latest Tag']));
  });

  test.each(dockerfiles)('when %s is built, then every base image has a precise version tag, and a digest when one is given it is complete', (file) => {
    const froms = instructions(read(file)).filter((l) => /^FROM\s/i.test(l)).map((l) => l.split(/\s+/)[1]);
    expect(froms.length).toBeGreaterThan(0);
    for (const image of froms) {
      expect(image).toMatch(/^[a-z0-9./-]+:\d+\.\d+\.\d+[-a-z0-9.]*(@sha256:[0-9a-f]{64})?$/);
    }
  });

  test.each(dockerfiles)('when %s runs, then its final stage runs as a non-root numeric user with an exec-form CMD', (file) => {
    const lines = instructions(read(file));
    const finalStage = finalStageOf(lines);
    const users = finalStage.filter((l) => /^USER\s/i.test(l)).map((l) => l.split(/\s+/)[1]);
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).toMatch(/^[1-9]\d*(:[1-9]\d*)?$/);
    const cmd = finalStage.filter((l) => /^(CMD|ENTRYPOINT)\s/i.test(l)).at(-1);
    expect(JSON.parse(cmd.replace(/^(CMD|ENTRYPOINT)\s+/i, ''))).toEqual(expect.any(Array));
  });

  test('when the manager image is built, then its build stage installs from the lockfile and runs npm run build, and its final stage holds only the bundle and runs it', () => {
    const lines = instructions(read('Dockerfile'));
    const finalStage = finalStageOf(lines);
    const buildStage = lines.slice(0, lines.length - finalStage.length);
    expect(lines.filter((l) => /^FROM\s/i.test(l))).toHaveLength(2);
    const install = buildStage.findIndex((l) => /^RUN npm ci\b/.test(l));
    expect(install).toBeGreaterThan(-1);
    expect(buildStage.findIndex((l) => l === 'RUN npm run build')).toBeGreaterThan(install);
    expect(JSON.parse(read('package.json')).scripts.build).toBe('node scripts/build.js');
    // No node_modules, no src/: the bundle holds the dependencies and its assets.
    expect(finalStage.filter((l) => /^WORKDIR\s/i.test(l)).at(-1)).toBe('WORKDIR /app');
    expect(finalStage.filter((l) => /^(COPY|ADD)\s/i.test(l))).toEqual([`COPY --from=build /app/${DIST_DIR} ./${DIST_DIR}`]);
  });

  test('when the manager image runs, then its CMD is node on the entry npm run build writes (test/kube-real/image-bundle.test.js builds and runs it)', () => {
    expect(imageCommand(read('Dockerfile'))).toEqual(['node', `${DIST_DIR}/${BUNDLE_ENTRY}`]);
    expect(instructions(read('Dockerfile')).at(-1)).toMatch(/^CMD /);
  });

  test('when the build context is sent, then .dockerignore excludes everything but the package files, the build script, src/ and gate/', () => {
    const patterns = read('.dockerignore').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
    expect(patterns[0]).toBe('*');
    expect(patterns.slice(1).sort()).toEqual(['!gate/', '!package-lock.json', '!package.json', '!scripts/build.js', '!src/']);
    // ... which is what the build stage copies from the context.
    const copied = instructions(read('Dockerfile')).filter((l) => /^COPY\s/i.test(l) && !/--from=/.test(l)).flatMap((l) => l.split(/\s+/).slice(1, -1));
    expect(copied.map((source) => `!${source}${['src', 'gate'].includes(source) ? '/' : ''}`).sort()).toEqual(patterns.slice(1).sort());
  });
});

describe('shell scripts in the manifests', () => {
  test('when the manifests are read, then their scripts are found (the StatefulSet start script and both hooks, the proxy\'s start script)', () => {
    expect(scripts.map(([where]) => where)).toEqual([
      'rethinkdb/rethinkdb command', 'rethinkdb/rethinkdb preStop', 'rethinkdb/rethinkdb postStart', 'rethinkdb-proxy/rethinkdb-proxy command',
    ]);
  });

  test('when the tests run, then shellcheck is installed (the test set-up, test/setup.sh, installs it; the lint below must not skip silently)', () => {
    if (!commandExists('shellcheck')) {
      throw new Error('shellcheck is not installed: run `apt-get install shellcheck` (Debian package), as test/setup.sh does');
    }
  });

  test('when a script has a known fault, then shellcheck reports it (the check runs)', () => {
    if (!commandExists('shellcheck')) throw new Error('shellcheck is not installed: run `apt-get install shellcheck`');
    const result = spawnSync('shellcheck', ['--shell=sh', '-'], { input: 'rm $1\n', encoding: 'utf8' });
    expect(result.stdout).toContain('SC2086');
  });

  test.each(scripts)('when %s is checked with shellcheck (POSIX sh, as /bin/sh runs it), then it has no finding', (where, script) => {
    if (!commandExists('shellcheck')) throw new Error('shellcheck is not installed: run `apt-get install shellcheck`');
    const result = spawnSync('shellcheck', ['--shell=sh', '--severity=style', '-'], { input: script, encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});

// The repository's own scripts (the test set-up, the builds, the Kubernetes lab, the webhook certificate): every
// tracked *.sh file and .ci/run, each with the shell its first line names.
describe('the repository\'s shell scripts', () => {
  const tracked = spawnSync('git', ['ls-files', '*.sh', '.ci/run'], { cwd: repoRoot, encoding: 'utf8' }).stdout.split('\n').filter(Boolean);

  test('when the scripts are listed, then the lab\'s, the builds\' and the set-up\'s are among them', () => {
    expect(tracked).toEqual(expect.arrayContaining(['lab/kube/lab.sh', 'lab/kube/build.sh', 'lab/images/build.sh', 'test/setup.sh', '.ci/run']));
  });

  test.each(tracked)('when %s is checked with shellcheck, then it has no finding', (file) => {
    if (!commandExists('shellcheck')) throw new Error('shellcheck is not installed: run `apt-get install shellcheck`');
    const result = spawnSync('shellcheck', ['--severity=style', '--external-sources', file], { cwd: repoRoot, encoding: 'utf8' });
    expect(result.stdout + result.stderr).toBe('');
    expect(result.status).toBe(0);
  });
});
