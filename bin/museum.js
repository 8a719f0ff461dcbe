#!/usr/bin/env node
// Entry point for `npx museum`. Runs the bundle in dist/ (scripts/build.mjs) while it is fresh —
// no listed source changed since it was built — and the TypeScript sources through tsx otherwise
// (or when MUSEUM_FROM_SOURCE is set), so the CLI always runs the code that is on disk.
import { readFileSync, statSync } from 'node:fs';

function freshBundle() {
  if (process.env.MUSEUM_FROM_SOURCE) return null;
  try {
    const build = JSON.parse(readFileSync(new URL('../dist/build.json', import.meta.url), 'utf8'));
    for (const input of build.inputs) {
      if (statSync(new URL(`../${input}`, import.meta.url)).mtimeMs > build.built_at) return null;
    }
    return new URL('../dist/museum.mjs', import.meta.url).href;
  } catch {
    return null; // no bundle, or a listed source is gone
  }
}

const bundle = freshBundle();
let main;
if (bundle) {
  ({ main } = await import(bundle));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../cli/museum.ts'));
}
await main(process.argv);
