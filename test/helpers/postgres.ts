/**
 * A real PostgreSQL server for a test (Debian's `postgresql`, installed by scripts/system-deps.sh):
 * `initdb` on a temp directory, `postgres` on a free loopback port, nothing kept afterwards. When
 * the tests run as root (PostgreSQL refuses to), the cluster belongs to the unprivileged `postgres`
 * user and the server runs as that user (setpriv execs in place, so the child is the postmaster
 * itself). It can be stopped and started again on the same port to play an outage.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { createConnection, createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

export interface TestPostgres {
  /** postgres://museum@127.0.0.1:<port>/museum */
  url: string;
  port: number;
  stop(): Promise<void>;
  start(): Promise<void>;
  /** Stop for good and remove its directory. */
  close(): Promise<void>;
}

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });

/** Debian installs the server binaries under /usr/lib/postgresql/<major>/bin, off PATH. */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root) ? readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const major of majors) if (existsSync(join(root, major, 'bin', 'initdb'))) return join(root, major, 'bin');
  throw new Error('PostgreSQL server binaries not found under /usr/lib/postgresql; run scripts/system-deps.sh');
}

/** The unprivileged account to run as when we are root. */
function runAs(): { uid: number; gid: number; name: string } | null {
  if (userInfo().uid !== 0) return null;
  const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
  const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
  return { uid, gid, name: 'postgres' };
}

const command = (user: ReturnType<typeof runAs>, bin: string, args: string[]): [string, string[]] =>
  user ? ['setpriv', [`--reuid=${user.uid}`, `--regid=${user.gid}`, '--init-groups', bin, ...args]] : [bin, args];

/** True once something accepts TCP connections on the port. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = createConnection({ port, host: '127.0.0.1' });
    socket.setTimeout(500, () => socket.destroy());
    socket.once('error', () => resolve(false));
    socket.once('close', () => resolve(false));
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
  });

/** A postgres:// URL on a loopback port nothing listens on. */
export const unreachablePostgresUrl = async (): Promise<string> => `postgres://museum@127.0.0.1:${await freePort()}/museum`;

export async function startPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  const user = runAs();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'museum-pg-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const [initCmd, initArgs] = command(user, join(bin, 'initdb'), ['-D', data, '-U', 'museum', '-A', 'trust', '-E', 'UTF8', '--no-sync', '--locale=C']);
  execFileSync(initCmd, initArgs, { stdio: 'ignore' });

  let child: ChildProcess | null = null;
  const start = async () => {
    if (child && child.exitCode === null) return;
    const args = ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off', '-c', 'max_connections=100'];
    const [cmd, argv] = command(user, join(bin, 'postgres'), args);
    child = spawn(cmd, argv, { stdio: 'ignore' });
    const failed = new Promise<never>((_, reject) => child!.once('error', (err) => reject(new Error(`postgres did not start (${err.message}); run scripts/system-deps.sh`))));
    const deadline = Date.now() + 20_000;
    while (!(await Promise.race([accepts(port), failed]))) {
      if (Date.now() > deadline) throw new Error(`postgres did not answer on port ${port}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    // Accepting TCP is not yet accepting logins: wait until the database can be created/reached.
    while (true) {
      try {
        const [c, a] = command(user, join(bin, 'psql'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'museum', '-d', 'postgres', '-tAc', 'SELECT 1']);
        execFileSync(c, a, { stdio: 'ignore' });
        break;
      } catch {
        if (Date.now() > deadline) throw new Error(`postgres on port ${port} did not accept logins`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  };
  const stop = async () => {
    const running = child;
    child = null;
    if (!running || running.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      running.once('exit', () => resolve());
      // Fast shutdown: sessions are terminated, as when a database server goes away.
      running.kill('SIGINT');
    });
  };
  await start();
  const [c, a] = command(user, join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'museum', 'museum']);
  execFileSync(c, a, { stdio: 'ignore' });
  return {
    url: `postgres://museum@127.0.0.1:${port}/museum`,
    port,
    start,
    stop,
    close: async () => {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
