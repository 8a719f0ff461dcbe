/**
 * A real PostgreSQL server for a test (Debian's `postgresql`, installed by scripts/system-deps.sh):
 * `initdb` on a temp directory, `postgres` on a free loopback port, nothing kept afterwards. When
 * the tests run as root (PostgreSQL refuses to), the cluster belongs to the unprivileged `postgres`
 * user and the server runs as that user (setpriv execs in place, so the child is the postmaster
 * itself). It can be stopped and started again on the same port to play an outage.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { answersTcp, freePort, superviseService, testService, type TestService } from './service.ts';

const execFileP = promisify(execFile);

export type TestPostgres = TestService;

/** Debian installs the server binaries under /usr/lib/postgresql/<major>/bin, off PATH. */
function binDir(): string {
  const root = '/usr/lib/postgresql';
  const majors = existsSync(root)
    ? readdirSync(root)
        .filter((v) => /^\d+$/.test(v))
        .sort((a, b) => Number(b) - Number(a))
    : [];
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

export async function startPostgres(): Promise<TestPostgres> {
  const bin = binDir();
  const user = runAs();
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'museum-pg-'));
  if (user) chownSync(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const [initCmd, initArgs] = command(user, join(bin, 'initdb'), [
    '-D',
    data,
    '-U',
    'museum',
    '-A',
    'trust',
    '-E',
    'UTF8',
    '--no-sync',
    '--locale=C',
  ]);
  execFileSync(initCmd, initArgs, { stdio: 'ignore' });

  const psql = command(user, join(bin, 'psql'), [
    '-h',
    '127.0.0.1',
    '-p',
    String(port),
    '-U',
    'museum',
    '-d',
    'postgres',
    '-tAc',
    'SELECT 1',
  ]);
  const args = [
    '-D',
    data,
    '-p',
    String(port),
    '-h',
    '127.0.0.1',
    '-k',
    dir,
    '-c',
    'fsync=off',
    '-c',
    'synchronous_commit=off',
    '-c',
    'full_page_writes=off',
    '-c',
    'max_connections=100',
  ];
  const service = superviseService({
    name: 'postgres',
    port,
    spawn: () => spawn(...command(user, join(bin, 'postgres'), args), { stdio: 'ignore' }),
    // Accepting TCP is not yet accepting logins: ready once a query goes through.
    ready: async () =>
      (await answersTcp(port)) &&
      (await execFileP(...psql).then(
        () => true,
        () => false,
      )),
    startTimeoutMs: 20_000,
    // Fast shutdown: sessions are terminated, as when a database server goes away.
    stopSignal: 'SIGINT',
  });
  await service.start();
  const [c, a] = command(user, join(bin, 'createdb'), ['-h', '127.0.0.1', '-p', String(port), '-U', 'museum', 'museum']);
  execFileSync(c, a, { stdio: 'ignore' });
  return testService(`postgres://museum@127.0.0.1:${port}/museum`, port, service, dir);
}
