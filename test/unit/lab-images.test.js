// The lab's container images (lab/images): the OCI layout documents are deterministic and well formed (pure, no
// build needed), and the runtime configs build.sh gives the images are the Dockerfiles' (parsed here), so a Dockerfile
// change that the lab images miss fails. No root, no network: the images themselves are built by
// lab/images/build.sh.

import { describe, expect, test } from '@jest/globals';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import {
  CONTAINERD_IMAGE_NAME, EPOCH, MEDIA_TYPES, OCI_REF_NAME, TAR_BLOCK, blobPath, canonicalJson, createdFromEpoch,
  imageIndex, layoutTarEntries, ociLayout, sha256Digest, tarEnd, tarHeader, tarPadding,
} from '../../lab/images/oci.js';
import {
  BASE_PACKAGES, chartAppVersion, debianSources, dockerfileRuntime, images, parseDockerfile, stageConfig,
} from '../../lab/images/images.js';
import { BUNDLE_ENTRY, DIST_DIR, GATE_ENTRY } from '../../scripts/build.js';

const read = (path) => readFileSync(new URL(`../../${path}`, import.meta.url), 'utf8');
const sha = (text) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
const LAYERS = [
  { digest: sha('base'), size: 10240, createdBy: 'base' },
  { digest: sha('app'), size: 2048, createdBy: 'app' },
];
const RUNTIME = { User: '1000:1000', Cmd: ['node', 'dist/server.mjs'], Env: ['PATH=/usr/bin:/bin'], ExposedPorts: { '8080/tcp': {} }, WorkingDir: '/app' };
const REF = 'docker.io/library/rethinkdb-k8s-manager:0.1.0';
const byPath = (layout, path) => JSON.parse(layout.files.find((f) => f.path === path).bytes.toString());

describe('oci.js', () => {
  test('when JSON is canonical, then the keys of every object are sorted and arrays keep their order', () => {
    expect(canonicalJson({ b: 1, a: { d: [3, { z: 1, y: 2 }], c: 'x' } })).toBe('{"a":{"c":"x","d":[3,{"y":2,"z":1}]},"b":1}');
  });

  test('when the same layers and config are laid out twice, then every file is byte for byte the same', () => {
    const a = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    const b = ociLayout({ ref: REF, runtime: { ...RUNTIME }, layers: LAYERS.map((l) => ({ ...l })) });
    expect(a.files.map((f) => [f.path, f.bytes.toString('hex')])).toEqual(b.files.map((f) => [f.path, f.bytes.toString('hex')]));
    expect(a.digest).toBe(b.digest);
  });

  test('when a layout is made, then each blob is stored under its own sha256 and the descriptors give its size', () => {
    const layout = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    for (const file of layout.files.filter((f) => f.path.startsWith('blobs/'))) {
      expect(file.path).toBe(blobPath(sha256Digest(file.bytes)));
    }
    expect(layout.digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    const manifest = byPath(layout, blobPath(layout.manifest.digest));
    expect(manifest).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.manifest,
      config: { mediaType: MEDIA_TYPES.config, digest: layout.config.digest, size: layout.config.size },
      layers: LAYERS.map((l) => ({ mediaType: MEDIA_TYPES.layer, digest: l.digest, size: l.size })),
    });
    expect(layout.files.find((f) => f.path === blobPath(layout.config.digest)).bytes.length).toBe(layout.config.size);
    expect(byPath(layout, 'oci-layout')).toEqual({ imageLayoutVersion: '1.0.0' });
  });

  test('when a layout is made, then the config holds the runtime config, the layers as diff_ids and a fixed time', () => {
    const layout = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    const config = byPath(layout, blobPath(layout.config.digest));
    expect(config).toEqual({
      architecture: 'amd64',
      os: 'linux',
      created: EPOCH,
      config: RUNTIME,
      rootfs: { type: 'layers', diff_ids: LAYERS.map((l) => l.digest) },
      history: [{ created: EPOCH, created_by: 'base' }, { created: EPOCH, created_by: 'app' }],
    });
  });

  test('when a layout is made, then index.json names the image for containerd and gives its tag and platform', () => {
    const layout = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    expect(byPath(layout, 'index.json')).toEqual({
      schemaVersion: 2,
      mediaType: MEDIA_TYPES.index,
      manifests: [{
        mediaType: MEDIA_TYPES.manifest,
        digest: layout.manifest.digest,
        size: layout.manifest.size,
        platform: { architecture: 'amd64', os: 'linux' },
        annotations: { [CONTAINERD_IMAGE_NAME]: REF, [OCI_REF_NAME]: '0.1.0' },
      }],
    });
  });

  test.each([
    ['the config', { runtime: { ...RUNTIME, User: '0' } }],
    ['the layer order', { layers: [...LAYERS].reverse() }],
    ['the creation time', { created: createdFromEpoch('1700000000') }],
  ])('when %s changes, then the image digest changes', (_, change) => {
    const before = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    const after = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS, ...change });
    expect(after.digest).not.toBe(before.digest);
  });

  test('when only the reference changes, then the image digest (the manifest) stays and index.json changes', () => {
    const a = ociLayout({ ref: REF, runtime: RUNTIME, layers: LAYERS });
    const b = ociLayout({ ref: 'rkl.local/other:2', runtime: RUNTIME, layers: LAYERS });
    expect(b.digest).toBe(a.digest);
    expect(byPath(b, 'index.json')).not.toEqual(byPath(a, 'index.json'));
  });

  test.each([
    [undefined, EPOCH],
    ['', EPOCH],
    ['0', EPOCH],
    ['86400', '1970-01-02T00:00:00Z'],
    ['1700000000', '2023-11-14T22:13:20Z'],
  ])('when SOURCE_DATE_EPOCH is %p, then created is %p', (epoch, created) => {
    expect(createdFromEpoch(epoch)).toBe(created);
  });

  test.each([
    ['a bad SOURCE_DATE_EPOCH', () => createdFromEpoch('yesterday')],
    ['a layer digest that is not sha256', () => ociLayout({ ref: REF, runtime: RUNTIME, layers: [{ digest: 'md5:00', size: 1 }] })],
    ['a layer without a size', () => ociLayout({ ref: REF, runtime: RUNTIME, layers: [{ digest: sha('x') }] })],
    ['an unknown config field', () => ociLayout({ ref: REF, runtime: { Cmnd: ['x'] }, layers: LAYERS })],
    ['a reference without a tag', () => imageIndex({ manifest: { digest: sha('m'), size: 1 }, ref: 'docker.io/library/x' })],
    ['a reference without a registry or repository path', () => imageIndex({ manifest: { digest: sha('m'), size: 1 }, ref: 'x:1' })],
  ])('when given %s, then it throws', (_, make) => {
    expect(make).toThrow();
  });
});

// A ustar reader for the tests: [{name, type, mode, size, content}].
function readTar(buffer) {
  const entries = [];
  for (let offset = 0; offset + TAR_BLOCK <= buffer.length;) {
    const header = buffer.subarray(offset, offset + TAR_BLOCK);
    if (header.every((b) => b === 0)) break;
    const field = (start, length) => header.subarray(start, start + length).toString('ascii').replace(/\0.*$/s, '').trim();
    const size = parseInt(field(124, 12), 8);
    const stored = parseInt(field(148, 8), 8);
    const sum = [...header].reduce((s, b, i) => s + (i >= 148 && i < 156 ? 0x20 : b), 0);
    entries.push({
      name: header.subarray(0, 100).toString('utf8').replace(/\0.*$/s, ''),
      type: field(156, 1),
      mode: parseInt(field(100, 8), 8),
      mtime: parseInt(field(136, 12), 8),
      magic: header.subarray(257, 263).toString('ascii'),
      checksumOk: stored === sum,
      content: buffer.subarray(offset + TAR_BLOCK, offset + TAR_BLOCK + size),
    });
    offset += TAR_BLOCK + size + tarPadding(size).length;
  }
  return entries;
}

describe('oci.js tar', () => {
  test('when a header is made, then it is one block with a valid ustar checksum, mtime 0 and the size in octal', () => {
    const [entry] = readTar(Buffer.concat([tarHeader({ path: 'index.json', size: 5 }), Buffer.from('hello'), tarPadding(5), tarEnd()]));
    expect(entry).toMatchObject({ name: 'index.json', type: '0', mode: 0o644, mtime: 0, magic: 'ustar\0', checksumOk: true });
    expect(entry.content.toString()).toBe('hello');
  });

  test.each([[0, 0], [1, 511], [512, 0], [513, 511]])('when the content is %p bytes, then %p bytes of padding follow', (size, padding) => {
    expect(tarPadding(size).length).toBe(padding);
  });

  test('when a path is longer than ustar allows, then the header is refused', () => {
    expect(() => tarHeader({ path: 'x'.repeat(101), size: 0 })).toThrow(/100 bytes/);
  });

  test('when the layout tar is assembled, then it holds the blobs directory, oci-layout, index.json and each blob once', () => {
    const layer = Buffer.from('a layer tar, as far as this test cares');
    const layers = [{ digest: sha256Digest(layer), size: layer.length }];
    const layout = ociLayout({ ref: REF, runtime: RUNTIME, layers: [...layers, ...layers] });
    const files = [
      ...layout.files.map((f) => ({ path: f.path, size: f.bytes.length, bytes: f.bytes })),
      ...[...layers, ...layers].map((l) => ({ path: blobPath(l.digest), size: l.size, bytes: layer })),
    ];
    const entries = layoutTarEntries(files);
    const tar = Buffer.concat([...entries.flatMap((e) => (e.type === '5' ? [tarHeader(e)] : [tarHeader(e), e.bytes, tarPadding(e.size)])), tarEnd()]);
    const read = readTar(tar);
    expect(read.every((e) => e.checksumOk)).toBe(true);
    expect(read.map((e) => e.name)).toEqual([
      'blobs/', 'blobs/sha256/',
      ...[layout.config.digest, layout.manifest.digest, layers[0].digest].map(blobPath).sort(),
      'index.json', 'oci-layout',
    ]);
    for (const file of layout.files) expect(read.find((e) => e.name === file.path).content.equals(file.bytes)).toBe(true);
    expect(tar.length % TAR_BLOCK).toBe(0);
  });
});

describe('images.js: the Dockerfile reader', () => {
  test('when instructions continue over lines with comments between, then they are joined and the comments dropped', () => {
    const [build, runtime] = parseDockerfile([
      'FROM node:20 AS build',
      'RUN npm ci',
      '# a comment',
      'FROM node:20-slim',
      'LABEL a="x y" \\',
      '# inside the continuation',
      '      b=z',
      'ENV OLD form with spaces',
      'ENV K=1 Q="two words"',
      'EXPOSE 53/udp 8080',
      'USER 1000:1000',
      'CMD ["node", "s.mjs"]',
    ].join('\n'));
    expect(build).toMatchObject({ from: 'node:20', name: 'build' });
    expect(runtime.from).toBe('node:20-slim');
    expect(stageConfig(runtime)).toEqual({
      Env: ['OLD=form with spaces', 'K=1', 'Q=two words'],
      Labels: { a: 'x y', b: 'z' },
      ExposedPorts: { '53/udp': {}, '8080/tcp': {} },
      User: '1000:1000',
      Cmd: ['node', 's.mjs'],
    });
  });

  test('when CMD is in shell form, then the config runs it with /bin/sh -c', () => {
    expect(stageConfig(parseDockerfile('FROM x\nCMD echo hi')[0]).Cmd).toEqual(['/bin/sh', '-c', 'echo hi']);
  });
});

describe('images.js: the Debian archive of this machine', () => {
  test('when the sources mix Debian with other repositories, then only Debian main of the suite is kept, one line each', () => {
    const files = [
      {
        name: 'debian.sources',
        text: [
          'Types: deb', '# http://snapshot.debian.org/archive/debian/20250520T000000Z', 'URIs: http://deb.debian.org/debian',
          'Suites: bookworm bookworm-updates', 'Components: main', 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg',
          '', 'Types: deb', 'URIs: http://deb.debian.org/debian-security/', 'Suites: bookworm-security', 'Components: main contrib',
          '', 'Types: deb-src', 'URIs: http://deb.debian.org/debian', 'Suites: bookworm', 'Components: main',
        ].join('\n'),
      },
      { name: 'google.list', text: 'deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n' },
      { name: 'nodesource.sources', text: 'Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\nComponents: main\n' },
      { name: '/etc/apt/sources.list', text: '# deb http://old/debian bookworm main\ndeb [arch=amd64] http://mirror.example/debian bookworm main non-free\ndeb http://mirror.example/debian trixie main\n' },
    ];
    expect(debianSources(files)).toEqual([
      'deb http://deb.debian.org/debian bookworm main',
      'deb http://deb.debian.org/debian bookworm-updates main',
      'deb http://deb.debian.org/debian-security bookworm-security main',
      'deb http://mirror.example/debian bookworm main',
    ]);
  });
});

describe('the lab images and the Dockerfiles', () => {
  const all = images();
  const values = parseYaml(read('deploy/helm/rethinkdb-k8s-manager/values.yaml'));
  // What a Dockerfile stage sets, in the shape of images.js's configs: PATH is the base image's, not the stage's.
  const comparable = (config) => ({
    User: config.User,
    WorkingDir: config.WorkingDir,
    ExposedPorts: config.ExposedPorts ?? {},
    Cmd: config.Cmd,
    Entrypoint: config.Entrypoint,
    Volumes: config.Volumes,
    StopSignal: config.StopSignal,
    Labels: config.Labels ?? {},
    Env: (config.Env ?? []).filter((e) => !e.startsWith('PATH=')),
  });

  test.each([
    ['manager', 'Dockerfile'],
    ['rethinkdb', 'docker/rethinkdb/Dockerfile'],
  ])('when the %s image is built, then its config is the runtime stage of %s', (name, dockerfile) => {
    const { config } = dockerfileRuntime(new URL(`../../${dockerfile}`, import.meta.url));
    expect(comparable(all[name].config)).toEqual(comparable(config));
  });

  test('when the Debian images get a PATH, then it is the one of the Debian and node base images', () => {
    for (const name of ['manager', 'rethinkdb']) {
      expect(all[name].config.Env[0]).toBe('PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin');
    }
  });

  test('when the manager image is named, then it is the chart\'s default: the repository of values.yaml at the appVersion', () => {
    expect(values.manager.image.tag).toBe('');
    expect(all.manager.ref).toBe(`docker.io/library/${values.manager.image.repository}:${chartAppVersion()}`);
    expect(chartAppVersion()).toBe(JSON.parse(read('package.json')).version);
  });

  test('when the RethinkDB image is named, then it is the chart\'s default and the tag of the Dockerfile\'s base', () => {
    const { from } = dockerfileRuntime(new URL('../../docker/rethinkdb/Dockerfile', import.meta.url));
    expect(all.rethinkdb.ref).toBe(`docker.io/library/${values.rethinkdb.image.repository}:${values.rethinkdb.image.tag}`);
    expect(from).toBe(`rethinkdb:${values.rethinkdb.image.tag}`);
  });

  test('when the Dockerfile\'s runtime stage is Node, then it is the major version build.sh requires of this machine\'s node', () => {
    const { from } = dockerfileRuntime(new URL('../../Dockerfile', import.meta.url));
    expect(from).toMatch(/^node:20\.\d+\.\d+-bookworm-slim@sha256:/);
  });

  test('when the manager image runs the server and the query gate, then both are entries of npm run build', () => {
    expect(all.manager.config.Cmd).toEqual(['node', `${DIST_DIR}/${BUNDLE_ENTRY}`]);
    const proxy = read('deploy/helm/rethinkdb-k8s-manager/templates/rethinkdb-proxy.yaml');
    expect(proxy).toContain(`command: ["node", "${DIST_DIR}/${GATE_ENTRY}"]`);
  });

  test('when the StatefulSet\'s hooks call the manager, then the RethinkDB image has curl', () => {
    expect(read('deploy/helm/rethinkdb-k8s-manager/templates/rethinkdb-statefulset.yaml')).toMatch(/(^\s+|\$\()curl /m);
    expect(BASE_PACKAGES).toContain('curl');
    expect(all.rethinkdb.layers).toContain('base');
  });

  test('when the lab images are named, then each reference is full and unique', () => {
    const refs = Object.values(all).map((i) => i.ref);
    expect(new Set(refs).size).toBe(refs.length);
    for (const ref of refs) expect(ref).toMatch(/^[a-z0-9.-]+\/[a-z0-9._/-]+:[\w.-]+$/);
    expect(all.pause.ref).toBe('rkl.local/pause:1');
    expect(all.coredns.ref).toBe(`rkl.local/coredns:${/github\.com\/coredns\/coredns v(\S+)/.exec(read('lab/kube/coredns/go.mod'))[1]}`);
  });
});

describe('the lab cluster and its images', () => {
  const ref = (name) => images()[name].ref.replace(/^docker\.io\/library\//, '');
  const addons = read('lab/kube/addons.yaml').split(/^---$/m).map((doc) => parseYaml(doc));
  const containerImages = addons.filter((o) => o?.kind === 'Deployment')
    .flatMap((o) => o.spec.template.spec.containers.map((c) => ({ deployment: o.metadata.name, image: c.image, pull: c.imagePullPolicy })));

  test('when the add-ons run CoreDNS and metrics-server, then they run the images build.sh makes and never pull', () => {
    expect(containerImages).toEqual([
      { deployment: 'coredns', image: ref('coredns'), pull: 'Never' },
      { deployment: 'metrics-server', image: ref('metrics-server'), pull: 'Never' },
    ]);
  });

  test('when containerd makes a pod sandbox, then its pause image is the one build.sh makes', () => {
    expect(read('lab/kube/lab.sh')).toContain(`sandbox_image = "${images().pause.ref}"`);
  });
});
