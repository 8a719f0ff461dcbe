/**
 * The server log (pino's asynchronous destination with the museum's settings): every line arrives
 * whole and in order (multi-byte text, long lines), lines are held and leave together, within the
 * flush interval when traffic is light, `flushLog` waits for the disk, a process that exits at once
 * still writes what it held, a reader that stops reading costs bounded memory and is told how many
 * lines were lost, and a reader that goes away (EPIPE) stops the logging rather than the process.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { flushLog, serverLog } from '../../server/log.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const dir = mkdtempSync(join(tmpdir(), 'museum-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run a script with the log module, in a child process from the repository root. */
const script = (body: string) =>
  `import { logDestination, serverLog, flushLog } from ${JSON.stringify(join(ROOT, 'server/log.ts'))};\n${body}`;
const linesOf = (path: string) =>
  readFileSync(path, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as { i: number; text?: string; msg: string });

describe('the server log', () => {
  it('writes every line whole and in order, long and multi-byte ones included', async () => {
    const path = join(dir, 'order.log');
    const fd = openSync(path, 'w');
    const log = serverLog('info', fd);
    const texts: string[] = [];
    for (let i = 0; i < 5_000; i++) {
      const text = i % 997 === 0 ? `line ${i} ${'é€😀'.repeat(4_000)}` : `line ${i} ${'ß'.repeat(i % 50)}`;
      texts.push(text);
      log.info({ i, text }, 'order');
    }
    await flushLog(log);
    closeSync(fd);
    expect(linesOf(path).map((l) => l.text)).toEqual(texts);
  });

  it('holds lines and writes them together: flushLog resolves once they are on disk', async () => {
    const path = join(dir, 'held.log');
    const fd = openSync(path, 'w');
    const log = serverLog('info', fd);
    for (let i = 0; i < 100; i++) log.info({ i }, 'hello');
    expect(readFileSync(path, 'utf8')).toBe(''); // still held: nothing written per line
    await flushLog(log);
    closeSync(fd);
    expect(linesOf(path).map((l) => l.i)).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('writes held lines within the flush interval, with no other traffic', async () => {
    const path = join(dir, 'quiet.log');
    const fd = openSync(path, 'w');
    const log = serverLog('info', fd, { flushMs: 30 });
    log.info({ i: 1 }, 'quiet');
    log.info({ i: 2 }, 'quiet');
    await expect.poll(() => readFileSync(path, 'utf8').split('\n').length - 1, { timeout: 2_000, interval: 20 }).toBe(2);
    closeSync(fd);
  });

  it('writes what it holds when the process exits at once', () => {
    const child = spawnSync(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script(`
      const log = serverLog('info');
      for (let i = 0; i < 1000; i++) log.info({ i }, 'exiting');
      process.exit(3);
    `),
      ],
      { cwd: ROOT, encoding: 'utf8' },
    );
    expect(child.status).toBe(3);
    const lines = child.stderr
      .trim()
      .split('\n')
      .filter((l) => l.includes('"exiting"'));
    expect(lines.map((l) => (JSON.parse(l) as { i: number }).i)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });

  it('bounds what waits for a reader that stopped reading, and says how many lines it dropped', async () => {
    // A pipe nobody reads until the writer has queued far past its bound.
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script(`
      const destination = logDestination(1, { maxLength: 256 * 1024 });
      const line = 'x'.repeat(200) + '\\n';
      for (let i = 0; i < 20000; i++) destination.write(line); // 4 MB, far more than a pipe holds
      process.stderr.write('queued\\n');
      const last = () => { destination.write('last\\n'); destination.flush(() => process.exit(0)); };
      process.stdin.once('data', () => destination.flush(last));
    `),
      ],
      { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    child.stdout.pause();
    await new Promise<void>((done) => child.stderr.once('data', () => done()));
    const chunks: Buffer[] = [];
    child.stdout.on('data', (chunk: Buffer) => chunks.push(chunk));
    child.stdout.resume();
    child.stdin.write('go\n');
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(code).toBe(0);
    const lines = Buffer.concat(chunks).toString().split('\n').slice(0, -1);
    const kept = lines.filter((l) => l === 'x'.repeat(200)).length;
    const note = lines.find((l) => l.includes('log lines dropped'));
    expect(kept).toBeLessThan(20_000);
    expect(kept).toBeGreaterThan(1_000);
    expect(JSON.parse(note!).dropped).toBe(20_000 - kept);
    expect(lines.at(-1)).toBe('last');
  });

  it('stops logging, not the process, when the reader goes away', async () => {
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '--input-type=module',
        '-e',
        script(`
      const log = serverLog('info', 1);
      let n = 0;
      const timer = setInterval(() => { for (let i = 0; i < 500; i++) log.info({ n: n++ }, 'spam'); }, 5);
      const alive = () => { process.stderr.write('alive ' + n + '\\n'); process.exit(0); };
      setTimeout(() => { clearInterval(timer); flushLog(log).then(alive); }, 1500);
    `),
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((done) => child.stdout.once('data', () => done()));
    child.stdout.destroy(); // the reader hangs up: the next writes get EPIPE
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(stderr).toMatch(/^alive \d+/);
    expect(code).toBe(0);
  });
});
