// OCI image layout documents, pure (no I/O): given the layers' digests and sizes and an image's runtime config, the
// image config, manifest and index JSON exactly as `ctr images import` reads them from an OCI layout tar
// (oci-layout, index.json, blobs/sha256/<hex>), and the ustar headers of that tar. Deterministic: keys sorted at every
// level, a fixed `created` (1970-01-01T00:00:00Z unless SOURCE_DATE_EPOCH says otherwise), so the same layers and
// config always give the same digests. The layers are uncompressed tars, so a layer's digest is also its diff_id.
// lab/images/oci-tar.js writes the tar; lab/images/build.sh makes the layers.

import { createHash } from 'node:crypto';

export const MEDIA_TYPES = Object.freeze({
  index: 'application/vnd.oci.image.index.v1+json',
  manifest: 'application/vnd.oci.image.manifest.v1+json',
  config: 'application/vnd.oci.image.config.v1+json',
  layer: 'application/vnd.oci.image.layer.v1.tar',
});
export const EPOCH = '1970-01-01T00:00:00Z';
// containerd takes this annotation of an index.json entry as the image's full name (`ctr images import`).
export const CONTAINERD_IMAGE_NAME = 'io.containerd.image.name';
export const OCI_REF_NAME = 'org.opencontainers.image.ref.name';
const DIGEST = /^sha256:[0-9a-f]{64}$/;
// The fields of an image config's `config` object that an image may set (OCI image spec, "Properties").
const RUNTIME_FIELDS = ['User', 'ExposedPorts', 'Env', 'Entrypoint', 'Cmd', 'Volumes', 'WorkingDir', 'Labels', 'StopSignal'];

export function sha256Digest(data) {
  return `sha256:${createHash('sha256').update(data).digest('hex')}`;
}

// JSON with the keys of every object sorted (arrays keep their order), no whitespace.
export function canonicalJson(value) {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.keys(value).sort().filter((k) => value[k] !== undefined).map((k) => [k, sortKeys(value[k])]));
  }
  return value;
}

// SOURCE_DATE_EPOCH (seconds, as a string) -> the RFC 3339 time of `created`; unset or empty -> the epoch.
export function createdFromEpoch(sourceDateEpoch) {
  if (sourceDateEpoch === undefined || sourceDateEpoch === null || String(sourceDateEpoch).trim() === '') return EPOCH;
  const seconds = String(sourceDateEpoch).trim();
  if (!/^\d+$/.test(seconds)) throw new Error(`SOURCE_DATE_EPOCH must be whole seconds, not ${JSON.stringify(sourceDateEpoch)}`);
  return new Date(Number(seconds) * 1000).toISOString().replace(/\.000Z$/, 'Z');
}

function checkLayer(layer, i) {
  if (!layer || !DIGEST.test(layer.digest)) throw new Error(`layer ${i}: digest must be sha256:<64 hex>, not ${JSON.stringify(layer?.digest)}`);
  if (!Number.isSafeInteger(layer.size) || layer.size < 0) throw new Error(`layer ${i}: size must be a byte count, not ${JSON.stringify(layer.size)}`);
}

// The image config document. runtime: {User, Env, Cmd, Entrypoint, WorkingDir, ExposedPorts, Labels, ...};
// layers: [{digest, size, createdBy?}] from the bottom up.
export function imageConfig({ runtime, layers, created = EPOCH, architecture = 'amd64', os = 'linux' }) {
  layers.forEach(checkLayer);
  const unknown = Object.keys(runtime).filter((k) => !RUNTIME_FIELDS.includes(k));
  if (unknown.length) throw new Error(`unknown image config field(s): ${unknown.join(', ')}`);
  return {
    architecture,
    os,
    created,
    config: { ...runtime },
    rootfs: { type: 'layers', diff_ids: layers.map((l) => l.digest) },
    history: layers.map((l) => ({ created, created_by: l.createdBy ?? 'lab/images/build.sh' })),
  };
}

export function imageManifest({ config, layers }) {
  layers.forEach(checkLayer);
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.manifest,
    config: { mediaType: MEDIA_TYPES.config, digest: config.digest, size: config.size },
    layers: layers.map((l) => ({ mediaType: MEDIA_TYPES.layer, digest: l.digest, size: l.size })),
  };
}

// ref: a full reference, docker.io/library/name:tag. Its tag is the OCI ref name; containerd reads the full name.
export function imageIndex({ manifest, ref, architecture = 'amd64', os = 'linux' }) {
  const tag = /:([\w][\w.-]{0,127})$/.exec(ref.replace(/@.*$/, ''))?.[1];
  if (!tag || !ref.includes('/')) throw new Error(`ref must be a full reference with a tag (registry/repository:tag), not ${JSON.stringify(ref)}`);
  return {
    schemaVersion: 2,
    mediaType: MEDIA_TYPES.index,
    manifests: [{
      mediaType: MEDIA_TYPES.manifest,
      digest: manifest.digest,
      size: manifest.size,
      platform: { architecture, os },
      annotations: { [CONTAINERD_IMAGE_NAME]: ref, [OCI_REF_NAME]: tag },
    }],
  };
}

// Everything an OCI layout needs besides the layer tars themselves: the files as {path, bytes} (oci-layout,
// index.json, the config and manifest blobs) and the manifest's digest, which is the image's digest in containerd.
export function ociLayout({ ref, runtime, layers, created = EPOCH, architecture = 'amd64', os = 'linux' }) {
  const configBytes = Buffer.from(canonicalJson(imageConfig({ runtime, layers, created, architecture, os })));
  const config = { digest: sha256Digest(configBytes), size: configBytes.length };
  const manifestBytes = Buffer.from(canonicalJson(imageManifest({ config, layers })));
  const manifest = { digest: sha256Digest(manifestBytes), size: manifestBytes.length };
  const indexBytes = Buffer.from(canonicalJson(imageIndex({ manifest, ref, architecture, os })));
  return {
    digest: manifest.digest,
    config,
    manifest,
    files: [
      { path: 'oci-layout', bytes: Buffer.from(canonicalJson({ imageLayoutVersion: '1.0.0' })) },
      { path: 'index.json', bytes: indexBytes },
      { path: blobPath(config.digest), bytes: configBytes },
      { path: blobPath(manifest.digest), bytes: manifestBytes },
    ],
  };
}

export function blobPath(digest) {
  if (!DIGEST.test(digest)) throw new Error(`not a sha256 digest: ${digest}`);
  return `blobs/sha256/${digest.slice('sha256:'.length)}`;
}

// --- The layout tar: plain ustar, mtime 0, owner 0:0, so the same files give the same tar. ---

export const TAR_BLOCK = 512;

function octal(value, width) {
  return `${value.toString(8).padStart(width - 1, '0')}\0`;
}

// The 512-byte ustar header of a regular file (type '0') or a directory (type '5').
export function tarHeader({ path, size = 0, mode, type = '0' }) {
  const name = type === '5' && !path.endsWith('/') ? `${path}/` : path;
  if (Buffer.byteLength(name) > 100) throw new Error(`tar path longer than 100 bytes: ${name}`);
  if (!Number.isSafeInteger(size) || size < 0 || size >= 8 ** 11) throw new Error(`tar entry size out of range: ${size}`);
  const header = Buffer.alloc(TAR_BLOCK, 0);
  header.write(name, 0, 100, 'utf8');
  header.write(octal(mode ?? (type === '5' ? 0o755 : 0o644), 8), 100, 8, 'ascii');
  header.write(octal(0, 8), 108, 8, 'ascii'); // uid
  header.write(octal(0, 8), 116, 8, 'ascii'); // gid
  header.write(octal(type === '5' ? 0 : size, 12), 124, 12, 'ascii');
  header.write(octal(0, 12), 136, 12, 'ascii'); // mtime
  header.write('        ', 148, 8, 'ascii'); // checksum placeholder
  header.write(type, 156, 1, 'ascii');
  header.write('ustar\0', 257, 6, 'ascii');
  header.write('00', 263, 2, 'ascii');
  header.write('root', 265, 32, 'ascii');
  header.write('root', 297, 32, 'ascii');
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'ascii');
  return header;
}

// Zero bytes after a file's content up to the next 512-byte block.
export function tarPadding(size) {
  return Buffer.alloc((TAR_BLOCK - (size % TAR_BLOCK)) % TAR_BLOCK, 0);
}

// The end of a tar archive: two zero blocks.
export function tarEnd() {
  return Buffer.alloc(2 * TAR_BLOCK, 0);
}

// The entries of the layout tar in order: directories first, then oci-layout, index.json and the blobs by path.
// files: [{path, size}] (the JSON files and the layer tars alike).
export function layoutTarEntries(files) {
  const dirs = [{ path: 'blobs', type: '5' }, { path: 'blobs/sha256', type: '5' }];
  const seen = new Set();
  const regular = [...files].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)).filter((f) => {
    if (seen.has(f.path)) return false; // a layer shared twice in one image is one blob
    seen.add(f.path);
    return true;
  });
  return [...dirs, ...regular.map((f) => ({ ...f, type: '0' }))];
}
