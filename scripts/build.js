// `npm run build`: the manager as the image runs it, src/server.js bundled by esbuild into dist/server.mjs. The
// reason is memory: importing @kubernetes/client-node's index loads its 967 modules, every generated API class and
// model, and added 53 MiB of resident memory here; the bundle's Kubernetes chunk (the adapter and only the client code
// its named imports reach) added 17 MiB (see docs/benchmarks.md > "Memory"). Code splitting keeps the backends'
// dynamic imports (the Kubernetes adapter, the rethinkdb driver) in chunks of their own that the sandbox never loads.

import { cp, readFile, rm } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = join(repoRoot, 'src');
// What `npm run build` writes, relative to the repository (the Dockerfile copies it and its CMD runs the entry).
export const DIST_DIR = 'dist';
export const BUNDLE_ENTRY = 'server.mjs';
// The query gate's entry in the same bundle (gate/server.js): the proxy pods run the manager's image with this.
export const GATE_ENTRY = 'gate.mjs';
// CommonJS dependencies (express, pino, the rethinkdb driver) call require() for Node's built-ins; an ESM bundle has
// no require of its own. Pino is used without transports, so its worker-thread files are never looked up.
const REQUIRE_BANNER = "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";
const MODULE_URL = /new URL\((['"])([^'"]+)\1, import\.meta\.url\)/g;

// Files the source reads at run time relative to its own module, new URL('<path>', import.meta.url) (package.json for
// the version, the status page's HTML and script): in the bundle every module shares the chunk's import.meta.url, so
// each such URL is rewritten to assets/<its path in the repository>, next to the chunks, where the build copies the
// file. Any other use of import.meta in src/ fails the build instead of breaking at run time.
function moduleRelativeAssets(assets) {
  return {
    name: 'module-relative-assets',
    setup(b) {
      b.onLoad({ filter: /\.js$/ }, async ({ path }) => {
        if (!path.startsWith(`${srcDir}/`)) return undefined;
        const text = await readFile(path, 'utf8');
        const contents = text.replace(MODULE_URL, (whole, quote, target) => {
          const asset = relative(repoRoot, resolve(dirname(path), target));
          assets.add(asset);
          return `new URL(${JSON.stringify(`./assets/${asset}`)}, import.meta.url)`;
        });
        if (contents.replace(MODULE_URL, '').includes('import.meta')) {
          return { errors: [{ text: `${relative(repoRoot, path)} uses import.meta other than as new URL('<literal path>', import.meta.url): the bundle cannot place that file` }] };
        }
        return { contents, loader: 'js' };
      });
    },
  };
}

// Builds into outdir (emptied first). Returns the entry file's path, the assets copied and esbuild's metafile (which
// input went into which output, and which outputs import which).
export async function buildBundle({ outdir = join(repoRoot, DIST_DIR), logLevel = 'warning' } = {}) {
  const assets = new Set();
  await rm(outdir, { recursive: true, force: true });
  const { metafile } = await build({
    entryPoints: { [BUNDLE_ENTRY.replace(/\.mjs$/, '')]: join(srcDir, 'server.js'), [GATE_ENTRY.replace(/\.mjs$/, '')]: join(repoRoot, 'gate', 'server.js') },
    outdir,
    outExtension: { '.js': '.mjs' },
    // Chunks beside the entry (no subfolder): the asset URLs above are relative to whichever chunk holds the module.
    chunkNames: '[name]-[hash]',
    bundle: true,
    splitting: true,
    platform: 'node',
    target: 'node20',
    format: 'esm',
    minify: true,
    banner: { js: REQUIRE_BANNER },
    plugins: [moduleRelativeAssets(assets)],
    metafile: true,
    absWorkingDir: repoRoot,
    logLevel,
  });
  for (const asset of assets) await cp(join(repoRoot, asset), join(outdir, 'assets', asset));
  return { entry: join(outdir, BUNDLE_ENTRY), assets: [...assets].sort(), metafile };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { entry, assets } = await buildBundle();
  process.stdout.write(`built ${relative(repoRoot, entry)} (assets: ${assets.join(', ')})\n`);
}
