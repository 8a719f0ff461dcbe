// Whether dist/ holds a bundle built from the sources now on disk (scripts/build.mjs lists them in
// dist/build.json, with when it was built).
import { readFileSync, statSync } from 'node:fs';

/** `{ url }` of the fresh bundle, or `{ problem }`: one line saying why it cannot run. */
export function checkBundle() {
  let build;
  try {
    build = JSON.parse(readFileSync(new URL('../dist/build.json', import.meta.url), 'utf8'));
  } catch (err) {
    return { problem: err?.code === 'ENOENT' ? 'the CLI is not built (no dist/build.json)' : 'dist/build.json is unreadable' };
  }
  for (const input of build.inputs) {
    let mtimeMs;
    try {
      ({ mtimeMs } = statSync(new URL(`../${input}`, import.meta.url)));
    } catch {
      return { problem: `${input}, a source of the bundle in dist/, is gone` };
    }
    if (mtimeMs > build.built_at) return { problem: `the bundle in dist/ is older than ${input}` };
  }
  return { url: new URL('../dist/museum.mjs', import.meta.url).href };
}

/** The fresh bundle's URL, or null. */
export function freshBundle() {
  return checkBundle().url ?? null;
}
