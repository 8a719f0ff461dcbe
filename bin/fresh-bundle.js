// Whether dist/ holds a bundle built from the sources now on disk (scripts/build.mjs lists them in
// dist/build.json): its URL, or null when it is missing or any listed source changed since.
import { readFileSync, statSync } from 'node:fs';

export function freshBundle() {
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
