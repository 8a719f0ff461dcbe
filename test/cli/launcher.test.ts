/**
 * bin/museum.js runs the bundle in dist/ only while it is fresh; a missing or stale bundle is one
 * line naming `make build` and exit 1 (the CLI never builds nor falls back to the sources), and
 * MUSEUM_FROM_SOURCE=1 runs the TypeScript sources through tsx, a devDependency. Shown on a copy of
 * the launcher in a scratch tree whose "bundle" and "sources" say which of them ran (node_modules
 * linked so tsx resolves). bin/museum (what npx runs) passes node the server's flags, and
 * `museum serve` started without them says so.
 */
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SERVER_NODE_FLAGS } from '../../server/cli.ts';
import { publishFixtureBake } from '../helpers/artifacts.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
let tree: string;

const write = (path: string, text: string) => {
  mkdirSync(join(tree, path, '..'), { recursive: true });
  writeFileSync(join(tree, path), text);
};
/** What the launcher did: which `main` ran, with what arguments (stdout), or why none ran (stderr, status). */
const launch = (env: Record<string, string> = {}) => {
  const run = spawnSync(process.execPath, [join(tree, 'bin/museum.js'), 'hello'], {
    encoding: 'utf8',
    env: { ...process.env, MUSEUM_FROM_SOURCE: '', ...env },
  });
  return { status: run.status, stdout: run.stdout.trim(), stderr: run.stderr };
};
const ran = (stdout: string) => ({ status: 0, stdout, stderr: '' });
const refused = (problem: string) => ({
  status: 1,
  stdout: '',
  stderr: `museum: ${problem}: run make build (or set MUSEUM_FROM_SOURCE=1 to run the sources through tsx)\n`,
});
const setMtime = (path: string, ms: number) => utimesSync(join(tree, path), ms / 1000, ms / 1000);

beforeEach(() => {
  tree = mkdtempSync(join(tmpdir(), 'museum-launcher-'));
  mkdirSync(join(tree, 'bin'));
  for (const file of ['museum', 'museum.js', 'fresh-bundle.js']) copyFileSync(join(ROOT, 'bin', file), join(tree, 'bin', file));
  symlinkSync(join(ROOT, 'node_modules'), join(tree, 'node_modules'), 'dir');
  write('package.json', '{"type":"module"}');
  write('cli/museum.ts', "export async function main(argv: string[]): Promise<void> { console.log('source', argv.at(-1)); }\n");
  write('cli/helper.ts', 'export {};\n');
  write('dist/museum.mjs', "export async function main(argv) { console.log('bundle', argv.at(-1)); }\n");
  const builtAt = Date.now();
  write('dist/build.json', JSON.stringify({ built_at: builtAt, inputs: ['cli/helper.ts', 'cli/museum.ts'] }));
  setMtime('cli/museum.ts', builtAt - 60_000);
  setMtime('cli/helper.ts', builtAt - 60_000);
});
afterEach(() => rmSync(tree, { recursive: true, force: true }));

describe('the museum launcher', () => {
  it('runs the bundle while no listed source is newer than it', () => {
    expect(launch()).toEqual(ran('bundle hello'));
  });

  it('refuses in one line, naming make build, once any listed source changed after the build', () => {
    setMtime('cli/helper.ts', Date.now() + 5_000);
    expect(launch()).toEqual(refused('the bundle in dist/ is older than cli/helper.ts'));
  });

  it('refuses in one line when a listed source is gone, the bundle is missing, or its record is unreadable', () => {
    rmSync(join(tree, 'cli/helper.ts'));
    expect(launch()).toEqual(refused('cli/helper.ts, a source of the bundle in dist/, is gone'));
    write('cli/helper.ts', 'export {};\n');
    setMtime('cli/helper.ts', Date.now() - 60_000);
    write('dist/build.json', '{not json');
    expect(launch()).toEqual(refused('dist/build.json is unreadable'));
    rmSync(join(tree, 'dist'), { recursive: true });
    expect(launch()).toEqual(refused('the CLI is not built (no dist/build.json)'));
  });

  it('runs the sources through tsx when MUSEUM_FROM_SOURCE is set, fresh bundle or not', () => {
    expect(launch({ MUSEUM_FROM_SOURCE: '1' })).toEqual(ran('source hello'));
    rmSync(join(tree, 'dist'), { recursive: true });
    expect(launch({ MUSEUM_FROM_SOURCE: '1' })).toEqual(ran('source hello'));
  });

  it('says in one line that MUSEUM_FROM_SOURCE needs tsx where it is not installed (npm ci --omit=dev)', () => {
    rmSync(join(tree, 'node_modules'));
    expect(launch({ MUSEUM_FROM_SOURCE: '1' })).toEqual({
      status: 1,
      stdout: '',
      stderr: 'museum: MUSEUM_FROM_SOURCE=1 runs the sources through tsx, which is not installed (a devDependency: npm ci)\n',
    });
    expect(launch()).toEqual(ran('bundle hello'));
  });
});

describe('bin/museum, as npx runs it', () => {
  it("runs the launcher with node's server flags, also through a symlink (npm's .bin)", () => {
    write('dist/museum.mjs', 'export async function main() { console.log(JSON.stringify(process.execArgv)); }\n');
    mkdirSync(join(tree, 'node_modules-bin'));
    symlinkSync('../bin/museum', join(tree, 'node_modules-bin/museum'));
    for (const command of [join(tree, 'bin/museum'), join(tree, 'node_modules-bin/museum')]) {
      const run = spawnSync(command, ['hello'], { encoding: 'utf8', env: { ...process.env, MUSEUM_FROM_SOURCE: '' } });
      expect(run.stderr).toBe('');
      expect(JSON.parse(run.stdout)).toEqual(expect.arrayContaining([...SERVER_NODE_FLAGS]));
    }
  });

  it('museum serve notes when node runs without them, and not when bin/museum passed them', async () => {
    const data = join(tree, 'data');
    await publishFixtureBake(data);
    /** The startup lines of `museum serve` started as `command args` (one write: whole once its "open" line is in). */
    const startup = (command: string, args: string[]) =>
      new Promise<string>((done, fail) => {
        const child = spawn(command, args, {
          cwd: ROOT,
          env: { ...process.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: data, STATE_DB: join(tree, 'state.db') },
          stdio: ['ignore', 'ignore', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
          if (/museum: open .*\n/.test(stderr)) child.kill('SIGKILL');
        });
        child.once('exit', () =>
          /museum: open .*\n/.test(stderr) ? done(stderr) : fail(new Error(`museum serve did not start: ${stderr}`)),
        );
      });
    expect(await startup(process.execPath, [join(ROOT, 'bin/museum.js'), 'serve'])).toContain(
      `museum: note   node runs without ${SERVER_NODE_FLAGS.join(' ')}`,
    );
    expect(await startup(join(ROOT, 'bin/museum'), ['serve'])).not.toContain('node runs without');
  });

  it('museum serve that cannot listen says why in one line and exits 1 (nothing it opened keeps it alive)', async () => {
    const data = join(tree, 'data');
    await publishFixtureBake(data);
    const taken = createServer();
    await new Promise<void>((done) => taken.listen(0, '127.0.0.1', done));
    const port = String((taken.address() as AddressInfo).port);
    try {
      const child = spawn(join(ROOT, 'bin/museum'), ['serve'], {
        cwd: ROOT,
        env: { ...process.env, PORT: port, HOST: '127.0.0.1', DATA_DIR: data, STATE_DB: join(tree, 'state.db') },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      // A safety net, not a measurement: before the fix the process never exited.
      const guard = setTimeout(() => child.kill('SIGKILL'), 20_000);
      const [code, signal] = (await once(child, 'exit')) as [number | null, string | null];
      clearTimeout(guard);
      expect({ code, signal }).toEqual({ code: 1, signal: null });
      expect(stderr.split('\n')).toContain(`museum: listen EADDRINUSE: address already in use 127.0.0.1:${port}`);
    } finally {
      taken.close();
    }
  });
});
