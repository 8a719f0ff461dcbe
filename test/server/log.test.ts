/**
 * The server log's batched destination: every accepted line arrives whole and in order (multi-byte
 * text, lines larger than a batch), `flush` waits for the disk, a process that exits at once still
 * writes what it held, a reader that stops reading costs bounded memory and says how many lines it
 * lost, and a reader that goes away (EPIPE) stops the logging rather than the process. The access
 * log's lines, formatted a batch at a time, keep their order, their times and their exit-safety.
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { LogDestination, flushLog, serverLog } from '../../server/log.ts';
import { AccessLog } from '../../server/middleware/access-log.ts';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const dir = mkdtempSync(join(tmpdir(), 'museum-log-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Run a script with the log module, in a child process from the repository root. */
const script = (body: string) => `import { LogDestination, serverLog, flushLog } from ${JSON.stringify(join(ROOT, 'server/log.ts'))};\n${body}`;

describe('LogDestination', () => {
  it('writes every line whole and in order, across batches and oversized lines', async () => {
    const path = join(dir, 'order.log');
    const fd = openSync(path, 'w');
    const destination = new LogDestination(fd, { batchBytes: 1024 });
    const expected: string[] = [];
    for (let i = 0; i < 5_000; i++) {
      const line = i % 997 === 0 ? `line ${i} ${'é€😀'.repeat(400)}` : `line ${i} ${'ß'.repeat(i % 50)}`;
      expected.push(line);
      destination.write(`${line}\n`);
    }
    await new Promise<void>((done) => destination.flush(() => done()));
    closeSync(fd);
    expect(readFileSync(path, 'utf8').split('\n').slice(0, -1)).toEqual(expected);
  });

  it('is pino\'s destination: flushLog resolves once the lines are on disk', async () => {
    const path = join(dir, 'pino.log');
    const fd = openSync(path, 'w');
    const log = serverLog('info', fd);
    for (let i = 0; i < 100; i++) log.info({ i }, 'hello');
    expect(readFileSync(path, 'utf8')).toBe(''); // still held: nothing written per line
    await flushLog(log);
    closeSync(fd);
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { i: number; msg: string });
    expect(lines.map((l) => l.i)).toEqual(Array.from({ length: 100 }, (_, i) => i));
  });

  it('writes what it holds when the process exits at once', () => {
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(`
      const log = serverLog('info');
      for (let i = 0; i < 1000; i++) log.info({ i }, 'exiting');
      process.exit(3);
    `)], { cwd: ROOT, encoding: 'utf8' });
    expect(child.status).toBe(3);
    const lines = child.stderr.trim().split('\n').filter((l) => l.includes('"exiting"'));
    expect(lines).toHaveLength(1000);
  });

  it('bounds what waits for a reader that stopped reading, and says how many lines it dropped', async () => {
    // A pipe nobody reads until the writer has queued far past its bound.
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(`
      const destination = new LogDestination(1, { batchBytes: 4096, maxPendingBytes: 256 * 1024 });
      const line = 'x'.repeat(200) + '\\n';
      for (let i = 0; i < 20000; i++) destination.write(line); // 4 MB, far more than a pipe holds
      destination.append('y\\ny\\ny\\n'); // three lines in one string (the access log's batches) count as three
      process.stderr.write('queued\\n');
      process.stdin.once('data', () => destination.flush(() => { destination.write('last\\n'); destination.flush(() => process.exit(0)); }));
    `)], { cwd: ROOT, stdio: ['pipe', 'pipe', 'pipe'] });
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
    const keptY = lines.filter((l) => l === 'y').length;
    expect(JSON.parse(note!).dropped).toBe(20_000 - kept + 3 - keptY);
    expect(lines.at(-1)).toBe('last');
  });

  it('stops logging, not the process, when the reader goes away', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(`
      const log = serverLog('info', 1);
      let n = 0;
      const timer = setInterval(() => { for (let i = 0; i < 500; i++) log.info({ n: n++ }, 'spam'); }, 5);
      setTimeout(() => { clearInterval(timer); flushLog(log).then(() => { process.stderr.write('alive ' + n + '\\n'); process.exit(0); }); }, 1500);
    `)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    await new Promise<void>((done) => child.stdout.once('data', () => done()));
    child.stdout.destroy(); // the reader hangs up: the next writes get EPIPE
    const code = await new Promise<number | null>((done) => child.once('exit', done));
    expect(stderr).toMatch(/^alive \d+/);
    expect(code).toBe(0);
  });
});

describe('AccessLog on the server destination (lines formatted a batch at a time)', () => {
  const read = (path: string) =>
    readFileSync(path, 'utf8')
      .trim()
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);

  it('keeps every line, in order, across batches and around other log lines, each with its own time', async () => {
    const path = join(dir, 'access-order.log');
    const fd = openSync(path, 'w');
    const log = serverLog('info', fd);
    const access = new AccessLog(log);
    /** Date.now() just before and just after each write: its line's time lies between (± rounding). */
    const written: Array<[number, number]> = [];
    const writeOne = (i: number) => {
      const before = Date.now();
      access.write(`id-${i}`, 'GET', `/v1/rooms/${i}/slots`, 200, performance.now() - 1.234, true);
      written.push([before, Date.now()]);
    };
    for (let i = 0; i < 999; i++) {
      writeOne(i);
      if (i % 300 === 299) log.warn({ i }, 'between');
      // A few milliseconds pass within each batch too: lines formatted together keep their own times.
      if (i % 100 === 50) {
        const until = Date.now() + 3;
        while (Date.now() < until);
      }
    }
    // The last one is formatted 50 ms after it was logged: its time is still when it was logged.
    writeOne(999);
    await new Promise((done) => setTimeout(done, 50));
    await flushLog(log);
    closeSync(fd);
    const lines = read(path);
    expect(lines).toHaveLength(1_003);
    const order = lines.map((l) => (l.msg === 'request' ? l.requestId : `warn ${l.i}`));
    const expected: string[] = [];
    for (let i = 0; i < 1_000; i++) {
      expected.push(`id-${i}`);
      if (i % 300 === 299) expected.push(`warn ${i}`);
    }
    expect(order).toEqual(expected);
    const requests = lines.filter((l) => l.msg === 'request');
    requests.forEach((l, i) => {
      expect(l).toMatchObject({ level: 30, method: 'GET', path: `/v1/rooms/${i}/slots`, status: 200, fast: true });
      expect(l.ms).toBeGreaterThanOrEqual(1.23);
      // The time the request was logged, not the time its batch was formatted.
      const [before, after] = written[i]!;
      expect(l.time).toBeGreaterThanOrEqual(before - 1);
      expect(l.time).toBeLessThanOrEqual(after + 1);
    });
  });

  it('writes held lines within the flush interval, with no other traffic', async () => {
    const path = join(dir, 'access-quiet.log');
    const fd = openSync(path, 'w');
    const destination = new LogDestination(fd, { flushMs: 30 });
    const log = pino({ level: 'info', base: undefined }, destination);
    const access = new AccessLog(log);
    access.write('quiet-1', 'GET', '/v1', 200, performance.now());
    access.write('quiet-2', 'HEAD', '/v1/"odd"\npath', 404, performance.now());
    await expect.poll(() => readFileSync(path, 'utf8').split('\n').length - 1, { timeout: 2_000, interval: 20 }).toBe(2);
    closeSync(fd);
    const lines = read(path);
    expect(lines.map((l) => [l.requestId, l.method, l.path, l.status, l.fast])).toEqual([
      ['quiet-1', 'GET', '/v1', 200, undefined],
      ['quiet-2', 'HEAD', '/v1/"odd"\npath', 404, undefined],
    ]);
  });

  it('writes held lines when the process exits at once, and none above the level', () => {
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script(`
      import { AccessLog } from ${JSON.stringify(join(ROOT, 'server/middleware/access-log.ts'))};
      const log = serverLog('info');
      const access = new AccessLog(log);
      for (let i = 0; i < 300; i++) access.write('exit-' + i, 'GET', '/v1', 200, performance.now());
      log.level = 'warn';
      access.write('above-level', 'GET', '/v1', 200, performance.now());
      process.exit(3);
    `)], { cwd: ROOT, encoding: 'utf8' });
    expect(child.status).toBe(3);
    const ids = child.stderr.split('\n').filter((l) => l.includes('"msg":"request"')).map((l) => (JSON.parse(l) as { requestId: string }).requestId);
    expect(ids).toEqual(Array.from({ length: 300 }, (_, i) => `exit-${i}`));
  });
});
