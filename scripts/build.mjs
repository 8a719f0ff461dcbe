/**
 * Bundle the `museum` CLI and the bake's worker entry into dist/ with esbuild, and the 3D viewer's
 * browser bundle into dist/viewer/ (scripts/viewer-build.mjs). From source, every
 * start loads hundreds of modules through the TypeScript loader's thread (~0.6 s before any work);
 * the bundle starts in a fraction of that, which is most of a one-room bake and of each bake
 * worker's start. bin/museum.js runs the bundle only while it is fresh — dist/build.json lists the
 * files it was built from and when — and otherwise exits naming `make build`, so an edit is never
 * hidden behind a stale bundle. Run by `npm ci` (prepare), by make before museum commands and by the
 * tests' global setup; esbuild is a devDependency, so `npm ci --omit=dev` keeps the dist/ it ships.
 *
 * Packages with native code, wasm files or worker files of their own stay external (loaded from
 * node_modules as usual); dynamic imports become chunks, so `serve` does not parse the bake's
 * libraries and `bake` does not parse Koa's.
 */
import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildViewer, writeViewer } from './viewer-build.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const EXTERNAL = [
  'sharp',
  'better-sqlite3',
  'draco3dgltf',
  'pino',
  'tsx',
  'esbuild',
  'pg',
  'ktx2-encoder',
  'recast-navigation',
  '@recast-navigation/core',
  '@recast-navigation/generators',
  '@recast-navigation/wasm',
];

// Taken before reading any source: a file saved during the build counts as newer than the bundle.
const builtAt = Date.now();
let build;
try {
  ({ build } = await import('esbuild'));
} catch {
  // A production install (npm ci --omit=dev) runs `prepare` too: it ships dist/ instead.
  process.stderr.write('museum: esbuild is not installed (a devDependency); dist/ is left as it is\n');
  process.exit(process.env.MUSEUM_BUILD_STRICT ? 1 : 0);
}
const staging = join(ROOT, `dist.tmp-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
try {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { museum: 'cli/museum.ts', 'room-worker': 'bake/room-worker.ts', 'manifest-worker': 'server/manifest-worker.ts' },
    outdir: staging,
    // Chunks sit beside the entries: code that resolves siblings from import.meta.url
    // (the worker entry, ../package.json) finds them from any chunk.
    chunkNames: '[name]-[hash]',
    outExtension: { '.js': '.mjs' },
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node20.19',
    external: EXTERNAL,
    // Bundled CommonJS packages call require(); ESM output has none of its own.
    banner: {
      js: "import { createRequire as __museumCreateRequire } from 'node:module'; const require = __museumCreateRequire(import.meta.url);",
    },
    sourcemap: 'linked',
    metafile: true,
    logLevel: 'warning',
  });
  const inputs = Object.keys(result.metafile.inputs)
    .filter((path) => !path.split(/[\\/]/).includes('node_modules'))
    .concat('package-lock.json', 'scripts/build.mjs')
    .sort();
  // The 3D viewer's browser bundle (server/view serves it), with hashed, immutable file names.
  writeViewer(await buildViewer(), join(staging, 'viewer'));
  writeFileSync(join(staging, 'build.json'), `${JSON.stringify({ built_at: builtAt, inputs }, null, 1)}\n`);
  // Swap directories; a process already running from the old bundle has loaded what it needs.
  // Two builds at once (two test runs) may race here; whichever lands, dist/ is whole and fresh.
  const old = `${DIST}.old-${process.pid}`;
  try {
    renameSync(DIST, old);
  } catch (err) {
    if (err?.code !== 'ENOENT') throw err; // first build, or the other build moved it
  }
  try {
    renameSync(staging, DIST);
  } catch (err) {
    if (err?.code !== 'ENOTEMPTY' && err?.code !== 'EEXIST') throw err;
    rmSync(staging, { recursive: true, force: true }); // the other build's dist/ is in place
  }
  rmSync(old, { recursive: true, force: true });
  process.stderr.write(`museum: bundled ${inputs.length} source files into dist/\n`);
} catch (err) {
  rmSync(staging, { recursive: true, force: true });
  // Not fatal for an install (the error is shown); bin/museum.js then names `make build` until it succeeds.
  process.stderr.write(`museum: bundling failed (${err instanceof Error ? err.message.split('\n')[0] : err}); fix it and run make build\n`);
  process.exitCode = process.env.MUSEUM_BUILD_STRICT ? 1 : 0;
}
