#!/usr/bin/env node
// The CLI's launcher (`npx museum` runs it through bin/museum, which passes node the server's
// flags). Runs the bundle in dist/ (scripts/build.mjs) while it is fresh —
// no listed source changed since it was built — and the TypeScript sources through tsx otherwise
// (or when MUSEUM_FROM_SOURCE is set), so the CLI always runs the code that is on disk.
import { freshBundle } from './fresh-bundle.js';

const bundle = process.env.MUSEUM_FROM_SOURCE ? null : freshBundle();
let main;
if (bundle) {
  ({ main } = await import(bundle));
} else {
  const { register } = await import('tsx/esm/api');
  register();
  ({ main } = await import('../cli/museum.ts'));
}
await main(process.argv);
