/**
 * Before the run: the CLI and viewer bundles in dist/ are built from the sources on disk (tests spawn
 * `museum` and serve the pages, and neither builds at runtime), so a bare `npx vitest run` after an
 * edit tests the edit. Then one temporary directory per test run. Every temp dir a test makes (data
 * dirs, Redis and PostgreSQL servers, Chromium profiles, bakes) lands under it: TMPDIR is what
 * `os.tmpdir()` reads in the test workers and in the processes they start. The run removes it when
 * it ends, so `make test` leaves nothing behind in /tmp (it used to leave ~50 MB a run).
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkBundle } from '../bin/fresh-bundle.js';
import { readBuiltViewer } from '../scripts/viewer-build.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Run scripts/build.mjs (as `make build` does) unless both bundles are fresh. */
function buildWhenStale(): void {
  let viewerFresh = true;
  try {
    readBuiltViewer();
  } catch {
    viewerFresh = false;
  }
  if (checkBundle().url && viewerFresh) return;
  const run = spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs')], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, MUSEUM_BUILD_STRICT: '1' },
  });
  if (run.status !== 0) throw new Error('scripts/build.mjs failed: the tests need the bundles in dist/');
}

export default function setup(): () => void {
  buildWhenStale();
  const previous = process.env.TMPDIR;
  const runDir = mkdtempSync(join(tmpdir(), 'museum-test-run-'));
  // Traversable: PostgreSQL's initdb runs as an unprivileged user when the tests run as root.
  chmodSync(runDir, 0o755);
  process.env.TMPDIR = runDir;
  return () => {
    if (previous === undefined) delete process.env.TMPDIR;
    else process.env.TMPDIR = previous;
    rmSync(runDir, { recursive: true, force: true, maxRetries: 3 });
  };
}
