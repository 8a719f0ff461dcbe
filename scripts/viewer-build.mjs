/**
 * The viewer's browser bundle (viewer/*.ts → one ES module per page kind plus its CSS), built with
 * esbuild: minified, content-hashed file names so every asset URL is immutable. Built by
 * scripts/build.mjs (`make build`, `npm ci`) into dist/viewer/; the server only reads that copy
 * (readBuiltViewer) and never builds, so production needs no esbuild.
 */
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

// scripts/ and dist/ (where this module is bundled into the CLI) both sit one level below the root.
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
export const VIEWER_OUT = join(ROOT, 'dist', 'viewer');
const ENTRIES = { viewer: 'viewer/main.ts', docs: 'viewer/docs.ts' };

/** Build the bundle in memory: `{ files: Map<name, Uint8Array>, entries, inputs, builtAt }`. */
export async function buildViewer() {
  const { build } = await import('esbuild');
  const builtAt = Date.now();
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ENTRIES,
    outdir: VIEWER_OUT,
    entryNames: '[name]-[hash]',
    // Code loaded on first use (recast, for walk mode) goes to its own chunk, fetched when needed.
    splitting: true,
    chunkNames: 'chunk-[hash]',
    bundle: true,
    format: 'esm',
    platform: 'browser',
    target: ['chrome110', 'firefox115', 'safari16'],
    minify: true,
    legalComments: 'none',
    metafile: true,
    write: false,
    logLevel: 'warning',
  });
  const files = new Map();
  const entries = {};
  for (const file of result.outputFiles) {
    const name = file.path.slice(file.path.lastIndexOf('/') + 1);
    files.set(name, file.contents);
  }
  for (const [out, meta] of Object.entries(result.metafile.outputs)) {
    const name = out.slice(out.lastIndexOf('/') + 1);
    const key = Object.entries(ENTRIES).find(([, src]) => meta.entryPoint === src)?.[0];
    if (!key) continue;
    entries[key] = { js: name, css: meta.cssBundle ? meta.cssBundle.slice(meta.cssBundle.lastIndexOf('/') + 1) : null };
  }
  const inputs = Object.keys(result.metafile.inputs)
    .filter((path) => !path.split(/[\\/]/).includes('node_modules'))
    .concat('package-lock.json', 'scripts/viewer-build.mjs')
    .sort();
  return { files, entries, inputs, builtAt };
}

/**
 * The bundle written by the build, when no listed source changed since. Throws an Error whose
 * message says in one line why it cannot be served (not built, unreadable, or older than a source).
 */
export function readBuiltViewer(dir = VIEWER_OUT) {
  let meta;
  try {
    meta = JSON.parse(readFileSync(join(dir, 'assets.json'), 'utf8'));
  } catch (err) {
    const notBuilt = err?.code === 'ENOENT';
    throw new Error(notBuilt ? 'the viewer bundle is not built (no dist/viewer/assets.json)' : 'dist/viewer/assets.json is unreadable');
  }
  for (const input of meta.inputs) {
    let mtimeMs;
    try {
      ({ mtimeMs } = statSync(join(ROOT, input)));
    } catch {
      throw new Error(`${input}, a source of the viewer bundle in dist/viewer, is gone`);
    }
    if (mtimeMs > meta.built_at) throw new Error(`the viewer bundle in dist/viewer is older than ${input}`);
  }
  const files = new Map();
  try {
    for (const name of meta.files) files.set(name, readFileSync(join(dir, name)));
  } catch {
    throw new Error('the viewer bundle in dist/viewer is incomplete');
  }
  return { files, entries: meta.entries, inputs: meta.inputs, builtAt: meta.built_at };
}

/** Write a bundle and its `assets.json` into `dir` (the build's staging copy of dist/viewer). */
export function writeViewer(bundle, dir) {
  mkdirSync(dir, { recursive: true });
  for (const [name, bytes] of bundle.files) writeFileSync(join(dir, name), bytes);
  const meta = { built_at: bundle.builtAt, entries: bundle.entries, files: [...bundle.files.keys()].sort(), inputs: bundle.inputs };
  writeFileSync(join(dir, 'assets.json'), `${JSON.stringify(meta, null, 1)}\n`);
}
