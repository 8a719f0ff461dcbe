#!/usr/bin/env -S node --no-memory-reducer
// Entry point for `npx museum`. Runs the bundle in dist/ (scripts/build.mjs) while it is fresh —
// no listed source changed since it was built — and the TypeScript sources through tsx otherwise
// (or when MUSEUM_FROM_SOURCE is set), so the CLI always runs the code that is on disk.
//
// --no-memory-reducer (a V8 flag, so on the command line; `museum serve` notes its absence): V8's
// memory reducer runs full, memory-shrinking GCs once a process has idled ~8 s after a full GC,
// and a server that met them before its traffic answered every request after at ~25 % more CPU
// (README, "A server that idled first"). Memory it would have handed back stays with the process.
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
