/**
 * Bundle the `museum` CLI and the bake's worker entry into dist/ with esbuild, and the 3D viewer's
 * browser bundle into dist/viewer/ (scripts/viewer-build.mjs). From source, every
 * start loads hundreds of modules through the TypeScript loader's thread (~0.6 s before any work);
 * the bundle starts in a fraction of that, which is most of a one-room bake and of each bake
 * worker's start. bin/museum.js runs the bundle only while it is fresh — dist/build.json lists the
 * files it was built from and when — and the sources through tsx otherwise, so an edit is never
 * hidden behind a stale bundle. Run by `npm ci` (prepare) and by make before museum commands.
 *
 * Packages with native code, wasm files or worker files of their own stay external (loaded from
 * node_modules as usual); dynamic imports become chunks, so `serve` does not parse the bake's
 * libraries and `bake` does not parse Koa's.
 */
import { existsSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { buildViewer, writeViewer } from './viewer-build.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const EXTERNAL = ['sharp', 'better-sqlite3', 'draco3dgltf', 'pino', 'tsx', 'esbuild', 'pg'];

// Taken before reading any source: a file saved during the build counts as newer than the bundle.
const builtAt = Date.now();
const staging = join(ROOT, `dist.tmp-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
try {
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: { museum: 'cli/museum.ts', 'room-worker': 'bake/room-worker.ts' },
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
    banner: { js: "import { createRequire as __museumCreateRequire } from 'node:module'; const require = __museumCreateRequire(import.meta.url);" },
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
  const old = `${DIST}.old-${process.pid}`;
  if (existsSync(DIST)) renameSync(DIST, old);
  renameSync(staging, DIST);
  rmSync(old, { recursive: true, force: true });
  process.stderr.write(`museum: bundled ${inputs.length} source files into dist/\n`);
} catch (err) {
  rmSync(staging, { recursive: true, force: true });
  // Not fatal for an install: without a fresh bundle, bin/museum.js runs the sources.
  process.stderr.write(`museum: bundling failed (${err instanceof Error ? err.message.split('\n')[0] : err}); the CLI will run from source\n`);
  process.exitCode = process.env.MUSEUM_BUILD_STRICT ? 1 : 0;
}
