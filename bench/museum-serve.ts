/** `museum serve` as the benchmarks start it: the product as shipped, on a free port, its log in a file. */
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { missingServerFlags, SERVER_NODE_FLAGS } from '../server/cli.ts';

export interface MuseumServeOptions {
  /** The checkout whose bin/museum runs (e.g. an export of main for a "before"). */
  root: string;
  /** The server's environment besides PATH, HOME, PORT=0 and HOST=127.0.0.1 (DATA_DIR, STATE_DB…). */
  env: Record<string, string>;
  /** Where its stderr (the log, access lines included) goes. */
  logPath: string;
  /** V8 flags (profiler, --trace-gc): node then runs with bin/museum's flags and these (NODE_OPTIONS refuses some). */
  nodeFlags?: readonly string[];
  /** Its stdout: shown when V8 flags print there. */
  stdout?: 'ignore' | 'inherit';
}

export interface MuseumServe {
  child: ChildProcess;
  url: string;
  port: number;
}

const SERVING = /museum: serving .* at http:\/\/127\.0\.0\.1:(\d+)/;

/** Starts `museum serve` (bin/museum, as npx runs it); resolves once its log says where it serves. */
export async function startMuseumServe(options: MuseumServeOptions): Promise<MuseumServe> {
  const { root, env, logPath, nodeFlags = [], stdout = 'ignore' } = options;
  const logFd = openSync(logPath, 'w');
  const [command, args] =
    nodeFlags.length === 0
      ? [join(root, 'bin/museum'), ['serve']]
      : [process.execPath, [...SERVER_NODE_FLAGS, ...nodeFlags, join(root, 'bin/museum.js'), 'serve']];
  const child = spawn(command, args, {
    cwd: root,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', stdout, logFd],
  });
  closeSync(logFd);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const port = SERVING.exec(readFileSync(logPath, 'utf8'))?.[1];
    if (port) {
      // Measuring a server without its node flags would measure a configuration nobody ships.
      const missing = missingServerFlags(readFileSync(`/proc/${child.pid}/cmdline`, 'utf8').split('\0'));
      if (missing.length > 0) throw new Error(`museum serve runs without ${missing.join(' ')}`);
      return { child, url: `http://127.0.0.1:${port}`, port: Number(port) };
    }
    if (child.exitCode !== null || Date.now() > deadline)
      throw new Error(`museum serve did not start: ${readFileSync(logPath, 'utf8').slice(-500)}`);
    await new Promise((done) => setTimeout(done, 50));
  }
}
