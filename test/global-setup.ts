/**
 * One temporary directory per test run. Every temp dir a test makes (data dirs, Redis and PostgreSQL
 * servers, Chromium profiles, bakes) lands under it: TMPDIR is what `os.tmpdir()` reads in the test
 * workers and in the processes they start. The run removes it when it ends, so `make test` leaves
 * nothing behind in /tmp (it used to leave ~50 MB a run).
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export default function setup(): () => void {
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
