// What a person at the terminal meets (decisions: "Clients of the HTTP API"): `.env` is read, the
// development key survives restarts, read-only commands create nothing, PUBLIC_URL's absence is said.
import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { publishFixtureBake } from '../helpers/artifacts.ts';
import { CLI_ENV as BASE_ENV, killServeChildren, serveStartLines as startLines } from '../helpers/serve-cli.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const tmp = () => mkdtempSync(join(tmpdir(), 'museum-terminal-'));
const museum = (args: string[], options: { cwd?: string; env?: Record<string, string> } = {}) =>
  spawnSync(process.execPath, [join(ROOT, 'bin/museum.js'), ...args], {
    cwd: options.cwd ?? ROOT,
    env: { ...BASE_ENV, ...options.env },
    encoding: 'utf8',
    timeout: 60_000,
  });

afterEach(killServeChildren);

/** Start `museum serve`; resolves with its start-up lines once it listens (then stops it). */
const serveStartLines = (env: Record<string, string>, args: string[] = []) =>
  // The start-up lines are written at once, ending with the last one asked for.
  startLines(env, args, args.includes('--dev-key') ? /museum: serving [\s\S]*museum: try / : /museum: serving /);

describe('.env', () => {
  it('museum reads .env from the working directory; the process environment wins', () => {
    const dir = tmp();
    writeFileSync(join(dir, '.env'), `# as .env.example\nSTATE_DB=${join(dir, 'from-dotenv.db')}\nDATABASE_URL=\n`);
    const created = museum(['keys', 'create', '--name', 'ci', '--json'], { cwd: dir });
    expect(created.status, created.stderr).toBe(0);
    expect(existsSync(join(dir, 'from-dotenv.db'))).toBe(true);
    const listed = museum(['keys', 'list', '--json'], { cwd: dir });
    expect(JSON.parse(listed.stdout).map((k: { name: string }) => k.name)).toEqual(['ci']);
    // The environment's STATE_DB beats the file's.
    const other = museum(['keys', 'create', '--name', 'other', '--json'], { cwd: dir, env: { STATE_DB: join(dir, 'from-env.db') } });
    expect(other.status, other.stderr).toBe(0);
    expect(existsSync(join(dir, 'from-env.db'))).toBe(true);
    expect(JSON.parse(museum(['keys', 'list', '--json'], { cwd: dir }).stdout)).toHaveLength(1);
  });

  it('.env.example copied to .env configures exactly the defaults', () => {
    const dir = tmp();
    writeFileSync(join(dir, '.env'), readFileSync(join(ROOT, '.env.example')));
    const run = museum(['keys', 'create', '--name', 'x'], { cwd: dir });
    expect(run.status, run.stderr).toBe(0);
    expect(existsSync(join(dir, 'state/museum.db'))).toBe(true);
  });

  it('an unreadable .env is exit 1 with one line', () => {
    const dir = tmp();
    writeFileSync(join(dir, 'x'), '');
    spawnSync('mkdir', [join(dir, '.env')]);
    const run = museum(['keys', 'list'], { cwd: dir });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`museum: ${join(dir, '.env')} is not readable (EISDIR)\n`);
  });
});

describe('read-only commands create nothing', () => {
  it('keys list with a STATE_DB that does not exist: exit 1, one line, no database, no directory', () => {
    const dir = tmp();
    const db = join(dir, 'typo', 'x.db');
    const run = museum(['keys', 'list'], { env: { STATE_DB: db } });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`museum: STATE_DB ${db} does not exist (no keys yet: \`museum keys create\` makes it)\n`);
    expect(existsSync(join(dir, 'typo'))).toBe(false);
  });

  it('bake gc --dry-run on a data directory that does not exist: exit 1, one line, nothing created', () => {
    const dir = tmp();
    const data = join(dir, 'no-such-dir');
    const run = museum(['bake', 'gc', '--out', data, '--dry-run']);
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`museum: ${data} is not a data directory (it does not exist): nothing to collect\n`);
    expect(existsSync(data)).toBe(false);
  });

  it('souls verify of a missing file: exit 1, one line, nothing created', () => {
    const dir = tmp();
    const run = museum(['souls', 'verify', join(dir, 'nope', 'soul.json')], { cwd: dir, env: { STATE_DB: join(dir, 'state', 'x.db') } });
    expect(run.status).toBe(1);
    expect(run.stderr).toBe(`museum: could not read ${join(dir, 'nope', 'soul.json')}: no such file\n`);
    expect(spawnSync('ls', ['-A', dir], { encoding: 'utf8' }).stdout).toBe('');
  });
});

describe('museum serve at start', () => {
  it('--dev-key keeps one development key across restarts, in dev-key beside STATE_DB (mode 0600); revoked: a new one', async () => {
    const dir = tmp();
    const env = { HOST: '127.0.0.1', DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state', 'museum.db') };
    const keyOf = (lines: string) => /development key: (museum_[0-9a-f]{48})/.exec(lines)?.[1];
    const first = keyOf(await serveStartLines(env, ['--dev-key']));
    const second = keyOf(await serveStartLines(env, ['--dev-key']));
    expect(first).toMatch(/^museum_/);
    expect(second).toBe(first);
    const file = join(dir, 'state', 'dev-key');
    expect(readFileSync(file, 'utf8').trim()).toBe(first);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(museum(['keys', 'revoke', 'dev'], { env }).status).toBe(0);
    const third = keyOf(await serveStartLines(env, ['--dev-key']));
    expect(third).toMatch(/^museum_/);
    expect(third).not.toBe(first);
    expect(readFileSync(file, 'utf8').trim()).toBe(third);
  }, 60_000);

  it('--dev-key never writes through a link planted in the state directory: dev-key becomes our own 0600 file', async () => {
    const dir = tmp();
    const env = { HOST: '127.0.0.1', DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'state', 'museum.db') };
    const outside = join(tmp(), 'outside');
    writeFileSync(outside, 'not a key\n', { mode: 0o644 });
    mkdirSync(join(dir, 'state'), { recursive: true });
    symlinkSync(outside, join(dir, 'state', 'dev-key'));
    // The attack on a temp name of its pid (`dev-key.<pid>.tmp`): links for the next pids the machine hands out.
    const nextPid = spawnSync('true').pid ?? process.pid;
    for (let pid = nextPid; pid < nextPid + 3000; pid++) symlinkSync(outside, join(dir, 'state', `dev-key.${pid}.tmp`));
    const key = /development key: (museum_[0-9a-f]{48})/.exec(await serveStartLines(env, ['--dev-key']))?.[1];
    expect(key).toMatch(/^museum_/);
    expect(readFileSync(outside, 'utf8')).toBe('not a key\n');
    expect(statSync(outside).mode & 0o777).toBe(0o644);
    const file = lstatSync(join(dir, 'state', 'dev-key'));
    expect([file.isFile(), file.mode & 0o777]).toEqual([true, 0o600]);
    expect(readFileSync(join(dir, 'state', 'dev-key'), 'utf8').trim()).toBe(key);
  }, 60_000);

  it('says once that clients on other machines need PUBLIC_URL when HOST is not loopback and PUBLIC_URL is unset', async () => {
    const dir = tmp();
    const env = { DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'museum.db') };
    const note = new RegExp(
      'PUBLIC_URL is not set: the URLs handed out name http:\\/\\/localhost:0, ' +
        'which clients on other machines cannot reach \\(set PUBLIC_URL\\)',
      'g',
    );
    expect((await serveStartLines({ ...env, HOST: '0.0.0.0' })).match(note)).toHaveLength(1);
    expect(await serveStartLines({ ...env, HOST: '127.0.0.1' })).not.toMatch(note);
    expect(await serveStartLines({ ...env, HOST: '0.0.0.0', PUBLIC_URL: 'http://museum.lan:8080' })).not.toMatch(note);
  }, 60_000);

  it('says when DATA_DIR holds no published bake (a mistyped path serves an empty museum), and not once one is published', async () => {
    const dir = tmp();
    const env = { HOST: '127.0.0.1', DATA_DIR: join(dir, 'data'), STATE_DB: join(dir, 'museum.db') };
    const note = `no bake is published in ${env.DATA_DIR} yet: the museum is empty until \`museum bake rooms --out ${env.DATA_DIR}\` publishes one`;
    expect(await serveStartLines(env)).toContain(note);
    await publishFixtureBake(env.DATA_DIR);
    expect(await serveStartLines(env)).not.toContain('no bake is published');
  }, 60_000);
});
