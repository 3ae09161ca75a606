#!/usr/bin/env node
// Writes an OCI image layout tar, the form `ctr -n k8s.io images import` takes, from layer tars and a spec:
//
//   node lab/images/oci-tar.js --spec SPEC.json --out IMAGE.tar LAYER.tar [LAYER.tar ...]
//
// SPEC.json: {"ref": "docker.io/library/name:tag", "config": {User, Env, Cmd, ...}, "layers": ["what made layer 1", ...]}
// (lab/images/images.js prints it). The layers are uncompressed tars, bottom first, each stored as is as a blob.
// The documents come from ./oci.js (deterministic); `created` is SOURCE_DATE_EPOCH or the epoch. Prints
// {"ref", "digest", "size"} as one JSON line: digest is the manifest's, the image's digest in containerd.
// A layer's digest is read from LAYER.tar.sha256 when that file is newer than the layer (build.sh writes it), else
// computed.

import { createReadStream, createWriteStream } from 'node:fs';
import { readFile, rename, stat, writeFile } from 'node:fs/promises';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import { parseArgs } from 'node:util';
import { blobPath, createdFromEpoch, layoutTarEntries, ociLayout, tarEnd, tarHeader, tarPadding } from './oci.js';

async function fileDigest(path) {
  const hash = createHash('sha256');
  await pipeline(createReadStream(path), hash);
  return `sha256:${hash.digest('hex')}`;
}

async function layerDigest(path) {
  const layer = await stat(path);
  const cached = await stat(`${path}.sha256`).catch(() => null);
  if (cached && cached.mtimeMs >= layer.mtimeMs) {
    const text = (await readFile(`${path}.sha256`, 'utf8')).trim();
    if (/^sha256:[0-9a-f]{64}$/.test(text)) return { digest: text, size: layer.size };
  }
  return { digest: await fileDigest(path), size: layer.size };
}

async function write(out, bytes) {
  if (!out.write(bytes)) await once(out, 'drain');
}

async function main() {
  const { values, positionals } = parseArgs({
    options: { spec: { type: 'string' }, out: { type: 'string' } },
    allowPositionals: true,
  });
  if (!values.spec || !values.out || positionals.length === 0) {
    throw new Error('usage: oci-tar.js --spec SPEC.json --out IMAGE.tar LAYER.tar [LAYER.tar ...]');
  }
  const spec = JSON.parse(await readFile(values.spec, 'utf8'));
  const createdBy = spec.layers ?? [];
  const layers = [];
  for (const [i, path] of positionals.entries()) {
    layers.push({ ...(await layerDigest(path)), path, createdBy: createdBy[i] });
  }
  const layout = ociLayout({
    ref: spec.ref,
    runtime: spec.config,
    layers,
    created: createdFromEpoch(process.env.SOURCE_DATE_EPOCH),
  });
  const files = [
    ...layout.files.map((f) => ({ path: f.path, size: f.bytes.length, bytes: f.bytes })),
    ...layers.map((l) => ({ path: blobPath(l.digest), size: l.size, source: l.path })),
  ];
  const tmp = `${values.out}.tmp-${process.pid}`;
  const out = createWriteStream(tmp);
  let total = 0;
  for (const entry of layoutTarEntries(files)) {
    await write(out, tarHeader(entry));
    if (entry.type !== '0') continue;
    if (entry.bytes) {
      await write(out, entry.bytes);
    } else {
      await pipeline(createReadStream(entry.source), out, { end: false });
      const now = (await stat(entry.source)).size;
      if (now !== entry.size) throw new Error(`${entry.source} changed while being written (${entry.size} -> ${now} bytes)`);
    }
    await write(out, tarPadding(entry.size));
    total += entry.size;
  }
  await write(out, tarEnd());
  out.end();
  await once(out, 'finish');
  await rename(tmp, values.out);
  const result = { ref: spec.ref, digest: layout.digest, size: (await stat(values.out)).size, contentBytes: total };
  await writeFile(`${values.out}.json`, `${JSON.stringify(result)}\n`);
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error) => {
  process.stderr.write(`oci-tar: ${error.message}\n`);
  process.exit(1);
});
