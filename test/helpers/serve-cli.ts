/** `museum serve` as a person starts it (bin/museum.js), for the CLI tests that read its start-up lines. */
import { type ChildProcess, spawn } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
/** The environment without anything a developer's shell may set for the museum. */
export const CLI_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !['STATE_DB', 'DATA_DIR', 'DATABASE_URL', 'PUBLIC_URL', 'HOST', 'PORT'].includes(name)),
);

const children: ChildProcess[] = [];

/** Kill every server `serveStartLines` started that is still running (afterEach). */
export function killServeChildren(): void {
  for (const child of children.splice(0)) child.kill('SIGKILL');
}

/** Start `museum serve …args`; resolves with its start-up lines once `until` matches them (then stops it). */
export function serveStartLines(env: Record<string, string>, args: string[], until: RegExp): Promise<string> {
  const child = spawn(process.execPath, [join(ROOT, 'bin/museum.js'), 'serve', ...args], {
    cwd: ROOT,
    env: { ...CLI_ENV, PORT: '0', LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let stderr = '';
  return new Promise((done, fail) => {
    const early = (code: number | null) => fail(new Error(`museum serve exited (${code}): ${stderr}`));
    child.once('exit', early);
    child.stderr!.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      if (until.test(stderr)) {
        child.off('exit', early);
        child.once('exit', () => done(stderr));
        child.kill('SIGTERM');
      }
    });
  });
}
