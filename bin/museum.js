#!/usr/bin/env node
// The CLI's launcher (`npx museum` runs it through bin/museum, which passes node the server's
// flags). Runs the bundle in dist/ (scripts/build.mjs, `make build`) while it is fresh — no listed
// source changed since it was built — and otherwise says so in one line and exits 1: production
// runs what was built, never a build tool. MUSEUM_FROM_SOURCE=1 runs the TypeScript sources
// through tsx instead (a devDependency: a development convenience, never a fallback).
import { checkBundle } from './fresh-bundle.js';

const fail = (line) => {
  process.stderr.write(`museum: ${line}\n`);
  process.exit(1);
};

let main;
if (process.env.MUSEUM_FROM_SOURCE) {
  let register;
  try {
    ({ register } = await import('tsx/esm/api'));
  } catch {
    fail('MUSEUM_FROM_SOURCE=1 runs the sources through tsx, which is not installed (a devDependency: npm ci)');
  }
  register();
  ({ main } = await import('../cli/museum.ts'));
} else {
  const bundle = checkBundle();
  if (!bundle.url) fail(`${bundle.problem}: run make build (or set MUSEUM_FROM_SOURCE=1 to run the sources through tsx)`);
  ({ main } = await import(bundle.url));
}
await main(process.argv);
